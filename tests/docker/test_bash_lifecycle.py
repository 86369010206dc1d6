"""The original harness's Bash container lifecycle, which `replay` uses for the original's recordings:
what it leaks from episode to episode, its gold re-run at every scoring, and when replay picks it.
Then our own lifecycle's golds that depend on the time: cached briefly, never across runs."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from collections.abc import AsyncIterator
from dataclasses import replace

import aiodocker
import pytest

import environments.bash as bash_module
from environments.bash import BashEnv
from orchestrator.fidelity.original_lifecycle import OriginalLifecycleBashEnv
from environments.file_ages import FileAges
from environments.runtime import Runtime
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


# fs1 #21's gold from `/`, and fs4 #25's: the first meets the original host's `acpiphp` module; the
# second's $NF is the fifteen-minute load, the tenth field of `uptime` the first minute's on a host up
# for days. Then a directory whose file was copied up: 8K (16 blocks) in the original host's 256-byte
# inodes, 4K in ours.
HOST_GOLD = ("cd /; find -name '*php' | xargs cat | wc -l; uptime | awk '{print $10}'; w | head -n 1 | awk '{print $NF}'; "
             "touch /starter/logs/app.log; stat -c %b /starter/logs")


@pytest.mark.docker
async def test_a_replay_sees_the_original_host_and_the_differential_harness_this_one(runtime: Runtime) -> None:
    task = replace(load_tasks("starter-bash")[0], gold=HOST_GOLD)
    seen = {}
    for original_host in (True, False):
        async with OriginalLifecycleBashEnv(runtime, original_host=original_host) as env:
            await env.reset(task)
            step = await env.step(HOST_GOLD)
            gold = (await env.score())[1]["eval_obs"]
        if original_host:
            assert step.observation == gold  # the agent's container and the gold's alike
        else:  # alike but for this machine's loads, which move between the two runs
            ours, golds = step.observation.splitlines(), gold.splitlines()
            assert (ours[0], ours[-1]) == (golds[0], golds[-1]), (ours, golds)
        seen[original_host] = gold
    assert seen[True] == "cat: ./sys/module/acpiphp: Is a directory\n0\n0.03,\n0.00\n16\n", seen[True]
    assert "acpiphp" not in seen[False] and "0.03\n0.00" not in seen[False]
    assert seen[False].endswith("\n8\n"), seen[False]


# A recording made 2023-06-06 16:45 UTC, two days after its image's build: the replay's containers show
# that wall clock (the day and time), their files as old as they were then; the kernel's clock, and so
# `date -u` and every age, stay this machine's. The differential harness keeps this machine's clock.
RECORDED = datetime(2023, 6, 6, 16, 45, tzinfo=timezone.utc)
CLOCK = "date '+%Y-%m-%d %H:%M'; date -u +%Y; ls -ld --time-style=+%F /starter; find /starter -maxdepth 0 -mtime +1 | wc -l"


@pytest.mark.docker
async def test_a_replay_shows_the_recording_s_wall_clock_whatever_the_day(runtime: Runtime) -> None:
    anchor = time.time_ns()
    ages = FileAges(("/starter",), anchor, 2 * 86400 * 10**9, anchor - int(RECORDED.timestamp()) * 10**9)
    task = load_tasks("starter-bash")[0]
    task = replace(task, gold=CLOCK, meta={**task.meta, "file_ages": ages.as_meta()})
    seen = {}
    for original_host in (True, False):
        async with OriginalLifecycleBashEnv(runtime, original_host=original_host) as env:
            await env.reset(task)
            seen[original_host] = (await env.step(CLOCK)).observation.splitlines()
    now = datetime.now(timezone.utc)
    wall, year, listed, old = seen[True]
    assert abs(datetime.strptime(wall, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc) - RECORDED) < timedelta(minutes=5)
    assert int(year) == now.year and listed.endswith(" 2023-06-04 /starter") and old == "1", seen[True]
    wall, year, listed, old = seen[False]
    assert abs(datetime.strptime(wall, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc) - now) < timedelta(minutes=5)
    assert int(year) == now.year and listed.endswith(f" {now - timedelta(days=2):%Y-%m-%d} /starter") and old == "1", seen[False]


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
