"""The project's four fenced-code strategies with scripted models on the starter tasks: Bash, Python
and CTF on a Docker-free local sandbox (tests/local_starter.py), SQL in real containers (MariaDB)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiodocker
import pytest

from agents.strategies.turns import retry_message
from environments.kind import kind_spec
from environments.runtime import Runtime
from tests.conftest import clean_runtime
from tests.unit.test_strategies import last_user, play, task

GENRES = "```sql\nSELECT genre, COUNT(*) FROM books GROUP BY genre\n```"  # the gold of starter-sql/1


@pytest.fixture(scope="module")
async def runtime(docker: aiodocker.Docker) -> AsyncIterator[Runtime]:
    """Containers, for the SQL tasks."""
    async with clean_runtime(docker, "intercode/sql-starter") as runtime:
        yield runtime


@pytest.mark.docker
async def test_single_turn_scores_its_one_action(runtime: Runtime) -> None:
    outcome, model = await play(runtime, "single_fenced", task("sql", 1), [GENRES, "never asked"])
    assert len(outcome.turns) == 1 and len(model.calls) == 1
    assert outcome.turns[0].reward == 1.0 and outcome.status == "solved" and outcome.success


@pytest.mark.docker
async def test_single_turn_without_code_runs_nothing(runtime: Runtime) -> None:
    outcome, _ = await play(runtime, "single_fenced", task("sql", 1), ["The genres are fiction and poetry."])
    (turn,) = outcome.turns
    assert (turn.action, turn.executed, turn.reward) == (None, False, 0.0)
    assert turn.observation == retry_message(kind_spec("sql")) and not outcome.success


@pytest.mark.docker
async def test_try_again_runs_out_of_turns(runtime: Runtime) -> None:
    outputs = ["```sql\nSELECT title FROM books\n```"] * 4
    outcome, model = await play(runtime, "try_again_fenced", task("sql", 1), outputs, max_turns=3,
                                show_reward=False, dialogue_limit=1)
    assert len(outcome.turns) == 3 and outcome.status == "max_turns"
    assert all(t.executed and t.reward < 1.0 for t in outcome.turns)
    assert all("Reward:" not in m["content"] for call in model.calls for m in call)
    assert len(model.calls[2]) == 4  # system, question, and the last turn only (dialogue_limit=1)


@pytest.mark.docker
async def test_plan_solve_runs_one_action_per_step(runtime: Runtime) -> None:
    outputs = ["1. Show the tables\n2. Count the books of each genre", "```sql\nSHOW TABLES\n```", GENRES]
    outcome, model = await play(runtime, "plan_solve_fenced", task("sql", 1), outputs)
    assert len(outcome.turns) == 2 and [t.reward for t in outcome.turns][-1] == 1.0
    assert "Step: Show the tables" in last_user(model.calls[1])
    assert "Step: Count the books of each genre" in last_user(model.calls[2])
    assert outcome.status == "solved"


@pytest.mark.docker
async def test_plan_solve_refines_once(runtime: Runtime) -> None:
    outputs = ["1. Count the books", "```sql\nSELECT COUNT(*) FROM books\n```", "no code here", GENRES]
    outcome, _ = await play(runtime, "plan_solve_fenced", task("sql", 1), outputs, refine=True, refine_turns=2)
    assert [t.executed for t in outcome.turns] == [True, False, True]
    assert [t.reward for t in outcome.turns][1:] == [0.0, 1.0] and outcome.status == "solved"
    outcome, _ = await play(runtime, "plan_solve_fenced", task("sql", 1), outputs[:3], refine=False)
    assert len(outcome.turns) == 1 and outcome.status == "submitted"
