"""An environment of your own whose gold is a list of commands, on a Docker-free sandbox
(foundation/local.py), through the sweep's episode entry point (`play`) and its store's writer
(issue 37): the oracle solves it under every strategy, Plan & Solve's too (its plan holds every
step of the gold), and the lists of its reward's breakdown are stored as JSON, not as Python's text,
while a store written before keeps reading as it was written."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing

import pytest

from agents.base import get_strategy
from agents.episode import play
from agents.models import OracleModel
from environments import make_environment
from environments.runtime import Runtime
from foundation.local import LocalProvider
from orchestrator.store import EpisodeKey, EpisodeRecord, TurnRecord
from orchestrator.store.episode_detail import episode_detail
from orchestrator.view.breakdown import value
from tasks import Task
from tests.local_starter import environment_of_your_own
from tests.stores import rows, write_episodes

MANIFEST = 'name = "two-steps"\nlanguage = "shell"\nscore_every_action = false\n'
# Two commands: the first writes the file, the second prints it; the answer is what the last printed.
TASKS = '{"query": "Write 3 into n.txt, then print n.txt.", "gold": ["echo 3 > n.txt", "cat n.txt"]}\n'
REWARD = '''
async def reward(sandbox, task, answer):
    seen = answer.split()
    return float(seen == ["3"]), {"seen": seen, "missing": [w for w in ["3"] if w not in seen],
                                  "where": {"file": "n.txt", "lines": (1,)}}
'''


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """The environment's one task, its kind registered (as a sweep's task set registers it)."""
    [found] = environment_of_your_own(tmp_path_factory.mktemp("two-steps"), MANIFEST, TASKS, REWARD)
    assert isinstance(found.gold, list) and len(found.gold) == 2
    return found


async def episode(task: Task, strategy: str) -> list:
    async with Runtime.local(LocalProvider({task.image: {}})) as runtime:
        async with make_environment(task.kind, runtime) as env:
            outcome = await play(get_strategy(strategy), env, task, OracleModel(), max_turns=6)
    return outcome.turns


@pytest.mark.parametrize("strategy", ["single", "try_again", "react", "plan_solve", "plan_solve_refine",
                                      "try_again_fenced", "react_fenced", "plan_solve_fenced", "tools"])
async def test_the_oracle_solves_a_list_gold_under_every_strategy_but_single(task, strategy):
    turns = await episode(task, strategy)
    best = max(t.reward for t in turns)
    if strategy == "single":  # one action: the first command only, the episode then submitted as it is
        assert best == 0.0
        return
    assert best == 1.0, [(t.action, t.reward) for t in turns]
    assert [t.action for t in turns if t.action][:2] == task.gold  # each step, in order


async def test_the_breakdowns_lists_are_stored_as_json_and_old_rows_read_as_written(task, tmp_path):
    scored = (await episode(task, "try_again"))[-1]
    assert scored.breakdown == {"seen": ["3"], "missing": [], "where": {"file": "n.txt", "lines": [1]}}
    old = {"seen": "['3']", "missing": "[]"}  # what a store written before holds: Python's text
    out = tmp_path / "out"
    await write_episodes(out, "two-steps", [stored(task, 0, scored.breakdown), stored(task, 1, old)])
    [(new_text,), (old_text,)] = rows(out, "SELECT breakdown FROM turns ORDER BY episode_id")
    assert '"missing": []' in new_text and '"seen": ["3"]' in new_text
    assert "\"missing\": \"[]\"" in old_text
    with closing(sqlite3.connect(out / "results.db")) as db:  # the viewer's reader, then its rendering
        new, before = (episode_detail(db, n).turns[0].breakdown for n in (1, 2))
    assert new == scored.breakdown and before == old
    assert value(new["missing"]) == value(before["missing"]) == "[]"
    assert value(new["seen"]) == "[&quot;3&quot;]" and value(before["seen"]) == "[&#x27;3&#x27;]"


def stored(task: Task, index: int, breakdown: dict) -> EpisodeRecord:
    now = time.time()
    return EpisodeRecord(EpisodeKey("oracle", "try_again", "two-steps", f"two-steps/{index}", 0), task.kind,
                         task.dataset, index, task.query, task.gold_text, task.image, 6, now - 1, now, "solved",
                         turns=[TurnRecord("", "submit", "3", 1.0, True, breakdown)])
