"""The original harness's Bash container lifecycle, which `replay` uses for the original's recordings:
what it leaks from episode to episode, its gold re-run at every scoring, and when replay picks it.
Then our own lifecycle's golds that depend on the time: cached briefly, never across runs."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiodocker
import pytest

import environments.bash as bash_module
from environments.bash import BashEnv, volatile
from environments.bash_lifecycle import OriginalLifecycleBashEnv
from environments.gold import GoldCache
from environments.runtime import Runtime
from orchestrator.fidelity.replay import lifecycle
from orchestrator.fidelity.trajectories import read_episodes
from orchestrator.store.export import HARNESS
from tasks import load_tasks
from tests.conftest import clean_runtime

LOOK = "ls /root; stat -c %Y /starter/logs/app.log"


@pytest.fixture(scope="module")
async def runtime(docker: aiodocker.Docker) -> AsyncIterator[Runtime]:
    async with clean_runtime(docker, "intercode/starter") as runtime:
        yield runtime


async def two_episodes(env: BashEnv) -> str:
    """Change things git's reset does not restore as they were, then look from the next episode."""
    first, second = load_tasks("starter-bash")[:2]
    await env.reset(first)
    await env.step("rm /starter/logs/app.log; touch /root/left-behind")
    await env.reset(second)
    return (await env.step(LOOK)).observation


@pytest.mark.docker
async def test_the_original_lifecycle_leaks_what_its_reset_leaked(runtime: Runtime) -> None:
    started = time.time()
    async with OriginalLifecycleBashEnv(runtime) as env:
        leaked = await two_episodes(env)
    async with BashEnv(runtime) as env:
        pristine = await two_episodes(env)
    # git rewrites the deleted file, stamped with the reset's time, and leaves ignored /root alone
    assert leaked.split()[0] == "left-behind" and int(leaked.split()[1]) >= int(started)
    (image_mtime,) = pristine.split()
    assert int(image_mtime) < int(started)


@pytest.mark.docker
async def test_the_original_lifecycle_runs_the_gold_again_for_every_score(runtime: Runtime) -> None:
    # /root is ignored by git, so the gold's own trace survives its container's resets
    task = replace(load_tasks("starter-bash")[0], gold="echo run >> /root/gold-runs; wc -l < /root/gold-runs")
    async with OriginalLifecycleBashEnv(runtime) as env:
        await env.reset(task)
        await env.step("echo 1")
        leaky = [(await env.score())[1]["eval_obs"].strip() for _ in range(3)]
    async with BashEnv(runtime) as env:
        await env.reset(task)
        await env.step("echo 1")
        cached = [(await env.score())[1]["eval_obs"].strip() for _ in range(3)]
    assert leaky == ["1", "2", "3"]
    assert cached == ["1", "1", "1"]


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


@pytest.mark.docker
async def test_an_episode_keeps_its_gold_while_a_later_one_gets_a_fresh_one(runtime: Runtime, monkeypatch) -> None:
    monkeypatch.setattr(bash_module, "VOLATILE_TTL", 0.0)
    task = replace(load_tasks("starter-bash")[0], gold="date +%s%N")
    seen = []
    async with BashEnv(runtime) as env:
        for _ in range(2):
            await env.reset(task)
            await env.step("date +%s%N")
            seen.append([(await env.score())[1]["eval_obs"] for _ in range(2)])
    (first, again), (later, later_again) = seen
    assert first == again and later == later_again  # scored against the gold it started with
    assert first != later  # a new episode got a fresh gold: the old one had expired
