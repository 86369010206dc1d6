"""The original harness's Bash container lifecycle, which `replay` uses for the original's recordings:
what it leaks from episode to episode, its gold re-run at every scoring, and when replay picks it.
Then our own lifecycle's golds that depend on the time: cached briefly, never across runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from environments.bash import volatile
from environments.gold import GoldCache
from orchestrator.fidelity.replay import lifecycle
from orchestrator.fidelity.trajectories import read_episodes
from orchestrator.store.export import HARNESS


def test_replay_gives_the_original_lifecycle_to_the_original_bash_files_only(tmp_path: Path) -> None:
    episode = {"environment": "ic_bash", "dataset": "./data/nl2bash/nl2bash_fs_1.json", "task_id": 0, "query": "q",
               "turn_history": {"actions": ["ls"], "observations": [""], "rewards": [0.5], "valid_action": [True]}}
    theirs, ours, sql = tmp_path / "theirs.json", tmp_path / "ours.json", tmp_path / "sql.json"
    theirs.write_text(json.dumps({"0": episode}))
    ours.write_text(json.dumps({"0": {**episode, "harness": HARNESS}}))
    sql.write_text(json.dumps({"0": {**episode, "environment": "ic_sql"}}))
    (original,), (exported,), (query,) = (read_episodes(p) for p in (theirs, ours, sql))
    assert [lifecycle(e) for e in (original, exported, query)] == ["original", "pristine", "pristine"]
    assert lifecycle(original, "pristine") == "pristine" and lifecycle(exported, "original") == "original"
    assert original.source == str(theirs)


# ---------------------------------------------------------------- golds that depend on the time


@pytest.mark.parametrize(("gold", "expected"), [
    ('echo $(date) "1" | tee -a /system/folder3/temp/empty.txt', True),
    ("df /workspace/dir2/mysql/", True),
    ("find /workspace -cmin -60", True),
    ("find /system -type f -mtime +31 -exec rm -f {} \\;", True),
    ("who | cut -d' ' -f1 | sort | uniq", True),
    ("find /testbed -name '*.txt' -print0 | xargs -0 wc -w", False),
    ("find /workspace -newer /workspace/a.txt", False),
    ("grep -c who /starter/logs/app.log", False),
])
def test_golds_that_depend_on_the_time_are_recognised(gold: str, expected: bool) -> None:
    assert volatile(gold) is expected


async def test_a_gold_cached_with_a_ttl_is_computed_again_and_never_saved(tmp_path: Path) -> None:
    cache, runs = GoldCache(tmp_path), []

    async def compute() -> int:
        runs.append(1)
        return len(runs)

    stable, live = ("digest", "task/0", "v1"), ("digest", "task/1", "live")
    assert [await cache.get(stable, compute), await cache.get(stable, compute)] == [1, 1]
    assert [await cache.get(live, compute, ttl=0.05), await cache.get(live, compute, ttl=0.05)] == [2, 2]
    await asyncio.sleep(0.06)
    assert await cache.get(live, compute, ttl=0.05) == 3
    saved = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert [entry["task"] for entry in saved] == ["task/0"]
