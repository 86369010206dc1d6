"""Work shared between episodes outlives the one that started it: a gold computed for many
episodes goes on when the episode that asked first is cancelled (its deadline passed), the
episodes waiting for it are scored with it, and every worker lives on (the sweep stores every
planned episode, or says which it lost)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks import DatasetInfo, register_dataset
from tests.stores import rows
from tests.docker.test_sweep import our_containers, sweep

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Two Bash tasks on the starter image; their golds take their time, the agent's answers do not.
SLOW, FAST = ("Print slow-done, slowly.", "sleep 9; echo slow-done"), ("Print fast-done.", "sleep 4; echo fast-done")


def test_an_episode_cancelled_while_it_computes_a_gold_leaves_the_gold_to_those_waiting(tmp_path):
    for name, (query, gold) in (("gold-slow", SLOW), ("gold-fast", FAST)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps([{"query": query, "gold": gold}]))
        register_dataset(DatasetInfo(name, "bash", "intercode/starter", str(path)))
    answers = tmp_path / "answers.json"  # the agent prints what the gold prints, at once
    answers.write_text(json.dumps({str(i): {
        "environment": "ic_bash", "dataset": "x", "task_id": 0, "query": query,
        "turn_history": {"actions": [f"echo {gold.split()[-1]}"], "observations": [""], "rewards": [0],
                         "valid_action": [True]}} for i, (query, gold) in enumerate((SLOW, FAST))}))
    sweep_path = tmp_path / "gold.toml"
    # With 2 workers: the slow task's first episode computes its 9 s gold and times out at 6.5 s;
    # the fast task's episode ends at about 4 s and its worker takes the slow task's second
    # episode, which waits for the same gold (done at about 9 s, within its own 6.5 s).
    sweep_path.write_text(f'name = "gold"\noutput = "{tmp_path / "out"}"\nstrategies = ["single"]\nepochs = 2\n'
                          f'concurrency = 2\nepisode_timeout = 6.5\n[[models]]\nname = "replay:{answers}"\n'
                          '[[tasks]]\ndataset = "gold-slow"\n[[tasks]]\ndataset = "gold-fast"\n')
    assert sweep(sweep_path) == 0
    stored = {(task, epoch): (status, reward) for task, epoch, status, reward in rows(
        tmp_path / "out", "SELECT task_id, epoch, status, reward FROM episodes")}
    assert stored[("gold-slow/0", 0)][0] == "timeout"  # the episode that started the gold ran out of time
    assert stored[("gold-slow/0", 1)] == ("solved", 1.0)  # the one waiting for it was scored with it
    assert stored[("gold-fast/0", 0)] == stored[("gold-fast/0", 1)] == ("solved", 1.0)
    assert len(stored) == 4 and rows(tmp_path / "out", "SELECT status FROM runs") == [("finished",)]
    assert our_containers() == []
