"""Background jobs, as docker's exec saw them in the original: an action (and a gold) ends when its
output ends or 2 s after its shell exited, so what a background job prints or makes by then counts.
Found by the differential harness (checks/differential): NL2Bash fs1 #11's gold
`... | xargs compress {} &` printed its error to the original's reward, and to ours nothing."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace

import aiodocker
import pytest

from environments.bash import BashEnv
from orchestrator.fidelity.original_lifecycle import OriginalLifecycleBashEnv
from environments.runtime import Runtime
from tasks import load_tasks
from tests.conftest import clean_runtime

LATE = "(sleep 1; echo late; touch /starter/late.txt) &"


@pytest.fixture(scope="module")
async def runtime(docker: aiodocker.Docker) -> AsyncIterator[Runtime]:
    async with clean_runtime(docker, "intercode/starter") as runtime:
        yield runtime


@pytest.mark.docker
@pytest.mark.parametrize("lifecycle", [BashEnv, OriginalLifecycleBashEnv])
async def test_an_action_waits_for_its_background_output_and_keeps_its_status(runtime: Runtime, lifecycle) -> None:
    async with lifecycle(runtime) as env:
        await env.reset(load_tasks("starter-bash")[0])
        late = await env.step(LATE)
        made = await env.step("ls /starter/late.txt")
        failed = await env.step("echo out; echo err >&2; exit 3")
        started = time.monotonic()
        lingering = await env.step("echo now; sleep 30 & (sleep 4; echo too late) &")
        waited = time.monotonic() - started
    assert late.observation == "late\n" and made.observation == "/starter/late.txt\n"
    assert failed.observation == "out\nerr\n" and failed.info["action_executed"] is False
    # docker stopped waiting 2 s after the shell exited: no timeout, and the late line is lost
    assert lingering.observation == "now\n" and lingering.info["action_executed"] is True and 1.9 < waited < 4


@pytest.mark.docker
@pytest.mark.parametrize("lifecycle", [BashEnv, OriginalLifecycleBashEnv])
async def test_a_gold_with_a_background_job_scores_its_output_and_its_files(runtime: Runtime, lifecycle) -> None:
    task = replace(load_tasks("starter-bash")[0], gold=LATE)
    async with lifecycle(runtime) as env:
        await env.reset(task)
        await env.step(LATE)
        reward, info = await env.score()
    assert info["eval_obs"] == "late\n"
    assert reward == 1.0  # same output, and late.txt made on both sides before the reward looked
