"""The paper's four protocols, checked against what the original's scripts did, with scripted
models on the starter tasks (Bash on a Docker-free local sandbox, tests/local_starter.py; SQL in real
containers, MariaDB): the turn grammar, the parse, the clipping, the
reward per turn, the dialogue window and the forced submit (experiments/eval_n_turn.py,
eval_react.py, eval_plan_solve.py of ../shared/intercode-original)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiodocker
import pytest

from agents.strategies.turns import retry_message
from environments.kind import kind_spec
from environments.runtime import Runtime
from tests.conftest import clean_runtime
from tests.unit.test_paper_strategies import _oracle_solves_every_paper_protocol, play, task, users

GENRES = "SELECT genre, COUNT(*) FROM books GROUP BY genre"  # starter-sql/1's gold
MANY_ROWS = "SELECT seq FROM seq_1_to_100"  # 100 rows (MariaDB's sequence engine)


@pytest.fixture(scope="module")
async def runtime(docker: aiodocker.Docker) -> AsyncIterator[Runtime]:
    """Containers, for the SQL tasks."""
    async with clean_runtime(docker, "intercode/sql-starter") as runtime:
        yield runtime


@pytest.mark.docker
async def test_try_again_clips_rows_to_50(runtime):
    outputs = [f"```sql\n{MANY_ROWS}\n```", f"```sql\n{GENRES}\n```"]
    _, model = await play(runtime, "try_again", task("sql", 1), outputs, max_turns=2)
    feedback = users(model.calls[1])[-1]
    assert "(50,)" in feedback and "(51,)" not in feedback  # 50 rows, however long


@pytest.mark.docker
async def test_try_again_without_code_feeds_back_the_retry_message_with_reward_zero(runtime):
    outputs = ["The genres are fiction and poetry.", f"```sql\n{GENRES}\n```"]
    outcome, model = await play(runtime, "try_again", task("sql", 1), outputs)
    assert outcome.turns[0].action is None and outcome.turns[0].reward == 0.0 and not outcome.turns[0].executed
    feedback = users(model.calls[1])[-1]
    assert retry_message(kind_spec("sql")).strip().splitlines()[0] in feedback and "Reward: 0.0" in feedback
    assert outcome.turns[1].reward == 1.0


@pytest.mark.docker
async def test_single_scores_its_one_parsed_action(runtime):
    outcome, model = await play(runtime, "single", task("sql", 1), [f"Sure: {GENRES}; done", "never asked"])
    assert [t.action for t in outcome.turns] == [GENRES] and outcome.turns[0].reward == 1.0
    assert outcome.status == "solved" and len(model.calls) == 1


@pytest.mark.docker
async def test_react_sql_code_stops_at_the_semicolon(runtime):
    outputs = [f"Thought 1: q\nAction 1: execute[{GENRES}; DROP TABLE books]", "Thought 2: ok\nAction 2: submit"]
    outcome, _ = await play(runtime, "react", task("sql", 1), outputs)
    assert outcome.turns[0].action == GENRES and outcome.turns[1].reward == 1.0


@pytest.mark.docker
async def test_the_oracle_solves_every_paper_protocol_in_sql(runtime):
    await _oracle_solves_every_paper_protocol(runtime, "sql")
