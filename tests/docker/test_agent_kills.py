"""What an agent does to its own container is the model's doing, never the infrastructure's: an
action that kills every process it can (`kill -9 -1` in Bash, `os.kill(-1, 9)` in Python) kills
the environment's driver too, but not the container, whose first process is ours (PID 1, which
such a kill spares). The driver is started again, the episode goes on with an observation saying
what happened, it is stored once, never re-run, and a resume does not run it again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foundation.pool.container_sandbox import KILLED
from tasks import load_tasks
from tests.stores import rows
from tests.docker.test_sweep import our_containers, sweep

pytestmark = [pytest.mark.docker, pytest.mark.slow]

KILLS = {"bash": "kill -9 -1", "python": "import os; os.kill(-1, 9)"}


def recording(tmp_path: Path) -> Path:
    """Each kind's first starter task: the kill first, then the gold."""
    episodes = {}
    for number, kind in enumerate(KILLS):
        task = load_tasks(f"starter-{kind}")[0]
        episodes[str(number)] = {
            "environment": f"ic_{kind}", "dataset": "starter", "task_id": task.index, "query": task.query,
            "turn_history": {"actions": [KILLS[kind], task.gold_text], "observations": ["", ""], "rewards": [0, 0],
                             "valid_action": [True, True]}}
    path = tmp_path / "kills.json"
    path.write_text(json.dumps(episodes))
    return path


def test_an_agent_that_kills_every_process_is_its_own_failure_and_the_episode_goes_on(tmp_path):
    path = tmp_path / "kill.toml"
    path.write_text(f'name = "kill"\noutput = "{tmp_path / "out"}"\nstrategies = ["try_again"]\nmax_turns = 3\n'
                    f'[[models]]\nname = "replay:{recording(tmp_path)}"\n'
                    '[[tasks]]\ndataset = "starter-bash"\nlimit = 1\n[[tasks]]\ndataset = "starter-python"\nlimit = 1\n')
    assert sweep(path) == 0
    out = tmp_path / "out"
    episodes = rows(out, "SELECT env, status, failure_class, attempts, reward FROM episodes ORDER BY env")
    assert episodes == [("bash", "solved", None, 1, 1.0), ("python", "solved", None, 1, 1.0)], episodes
    killed = rows(out, "SELECT e.env, t.observation FROM turns t JOIN episodes e ON e.id = t.episode_id WHERE t.idx = 0")
    assert len(killed) == 2 and all(KILLED in observation for _, observation in killed), killed
    assert sweep(path) == 0  # a resume runs nothing again
    assert rows(out, "SELECT count(*), max(run_id) FROM episodes") == [(2, 1)]
    assert our_containers() == []
