"""The Python environment on the starter tasks and hand-made ones, in real containers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import aiodocker
import pytest

from environments import make_environment
from environments.python import RETRY_MESSAGE, PythonEnv
from environments.runtime import Runtime
from foundation.pool import ImagePoolConfig
from tasks import Task, load_tasks
from tests.conftest import clean_runtime

pytestmark = pytest.mark.docker
PY = "intercode/python"
PASSED = "{'output': '', 'error': ''}"


def python_runtime(docker: aiodocker.Docker, **kwargs: object):
    """A runtime whose containers are all gone afterwards."""
    return clean_runtime(docker, PY, **kwargs)


@pytest.fixture(scope="module")
async def runtime(docker: aiodocker.Docker) -> AsyncIterator[Runtime]:
    async with python_runtime(docker) as runtime:
        yield runtime


@pytest.fixture(scope="module")
async def strict_runtime(docker: aiodocker.Docker) -> AsyncIterator[Runtime]:
    async with python_runtime(docker, reward_mode="strict") as runtime:
        yield runtime


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks("starter-python")


def handmade(gold: str, tests: list[str], setup: str = "") -> Task:
    """A task of our own, with a fresh id so that its gold is computed for this test."""
    return Task(kind="python", dataset=f"test-{uuid.uuid4().hex[:8]}", index=0, query="q", gold=gold, image=PY,
                meta={"tests": tests, "test_setup_code": setup})


INC = handmade("def inc(x):\n    return x + 1", ["assert inc(1) == 2", "assert inc(2) == 3", "assert inc(9) == 10"])


@pytest.mark.parametrize("mode", ["original", "strict"])
async def test_starter_golds_score_one(mode: str, runtime: Runtime, strict_runtime: Runtime,
                                       tasks: list[Task]) -> None:
    async with make_environment("python", strict_runtime if mode == "strict" else runtime) as env:
        for task in tasks:
            assert await env.reset(task) == task.query
            observation, reward, done, info = await env.step(task.gold_text)
            assert (observation, reward, done, info["action_executed"]) == (PASSED, 0.0, False, True)
            name = task.gold_text.split("(")[0].removeprefix("def ")
            _, reward, done, info = await env.step(f"submit {name}")
            assert (reward, done) == (1.0, True), info


async def test_state_printing_and_errors(runtime: Runtime, tasks: list[Task]) -> None:
    async with make_environment("python", runtime) as env:
        await env.reset(tasks[0])
        assert (await env.step("x = [3, 1, 2]")).observation == PASSED
        assert (await env.step("sorted(x)")).observation == "{'output': '[1, 2, 3]', 'error': ''}"
        assert (await env.step("x.append(4)")).observation == "{'output': 'None', 'error': ''}"
        step = await env.step("print('kept?'); x[10]")
        assert step.observation == "{'error': 'Error: list index out of range'}"
        assert step.info["action_executed"] is False
        step = await env.step("import re  def f(s):     return s")
        assert step.observation == "Error executing action: invalid syntax (<unknown>, line 1)"
        assert (await env.step("from math import sqrt")).observation == (
            "{'error': 'Error: invalid syntax (<string>, line 1)'}")  # the original printed it: a quirk
        assert (await env.step("assert len(x) == 4")).observation == PASSED


async def test_strict_mode_runs_what_the_original_print_rule_broke(strict_runtime: Runtime, tasks: list[Task]) -> None:
    async with make_environment("python", strict_runtime) as env:
        await env.reset(tasks[0])
        assert (await env.step("from math import sqrt")).observation == PASSED
        assert (await env.step("n = 8")).observation == PASSED
        assert (await env.step("n += 1")).observation == PASSED
        assert (await env.step("sqrt(n)  # a comment")).observation == "{'output': '3.0', 'error': ''}"


async def test_runaway_action_is_killed_and_the_next_step_says_so(runtime: Runtime, tasks: list[Task]) -> None:
    async with make_environment("python", runtime) as env:
        assert isinstance(env, PythonEnv)
        env.timeout = 1.0
        await env.reset(tasks[0])
        await env.step("x = 1")
        step = await env.step("y = 0\nwhile True:\n    y += 1")  # the `=` keeps it from being printed
        assert "timed out after 1 s" in step.observation and step.info["action_executed"] is False
        step = await env.step("x")
        assert step.info["interpreter_restarted"] is True
        assert step.observation == '{\'error\': "Error: name \'x\' is not defined"}'
        assert "interpreter_restarted" not in (await env.step("1")).info


@pytest.mark.parametrize(("mode", "definition", "expected"), [
    ("original", "def inc(x):\n    return x + 1", 1.0),
    ("original", "def inc(x):\n    return x + 1 if x < 5 else x", 2 / 3),
    ("original", "def inc(x):\n    print(x)\n    return x + 1", 0.0),  # what it prints counts
    ("strict", "def inc(x):\n    print(x)\n    return x + 1", 1.0),
    ("original", "def plus_one(x):\n    return x + 1", 1.0),  # submitted under its own name: aliased
])
async def test_reward_on_handmade_cases(mode: str, definition: str, expected: float, runtime: Runtime,
                                        strict_runtime: Runtime) -> None:
    async with make_environment("python", strict_runtime if mode == "strict" else runtime) as env:
        await env.reset(INC)
        await env.step(definition)
        name = definition.split("(")[0].removeprefix("def ")
        _, reward, done, info = await env.step(f"submit {name}")
        assert done and reward == pytest.approx(expected), info


@pytest.mark.parametrize("mode", ["original", "strict"])
async def test_a_gold_only_error_and_a_shared_one(mode: str, runtime: Runtime, strict_runtime: Runtime) -> None:
    task = handmade("def half(x):\n    return x // 2", ["assert half(4) == 2", "assert half(5) == 2.5"])
    async with make_environment("python", strict_runtime if mode == "strict" else runtime) as env:
        await env.reset(task)
        await env.step("def half(x):\n    return x / 2")  # passes the test the gold fails
        reward, info = await env.score()
        assert reward == 0.5 and info["eval_obs"]["assert half(5) == 2.5"] == {"error": "Error: "}
        await env.step("def half(x):\n    return x >> 1")  # fails it like the gold does
        reward, _ = await env.score()
        assert reward == (1.0 if mode == "original" else 0.5)


async def test_a_missing_name_runs_whatever_the_gold_name_holds(runtime: Runtime, strict_runtime: Runtime) -> None:
    for env_runtime, leaked in ((runtime, 1.0), (strict_runtime, 0.0)):
        async with make_environment("python", env_runtime) as env:
            await env.reset(INC)
            _, reward, _, info = await env.step("submit missing")
            assert reward == 0.0, info
            await env.reset(INC)
            step = await env.step_with_autosubmit("def inc(x):\n    return x")
            assert (step.reward, step.observation) == (0.0, RETRY_MESSAGE)
            # The original's reward left the gold in the episode's namespace: the next submission of
            # an undefined name ran the tests on it.
            _, reward, _, _ = await env.step("submit missing")
            assert reward == leaked


async def test_step_with_autosubmit_is_the_harness_rule(runtime: Runtime) -> None:
    async with make_environment("python", runtime) as env:
        assert isinstance(env, PythonEnv)
        await env.reset(INC)
        step = await env.step_with_autosubmit("def inc(x):\n      return x + 1\n    return x")
        assert (step.reward, step.done, step.observation) == (0.0, False, RETRY_MESSAGE)
        step = await env.step_with_autosubmit("inc(1)")  # not a def: a plain step, reward 0
        assert (step.reward, step.observation) == (0.0, "{'output': '2', 'error': ''}")  # the gold's
        step = await env.step_with_autosubmit("def inc(x):\n    return x + 1")
        assert (step.reward, step.done, step.observation) == (1.0, False, PASSED)
        assert step.info["submitted_function"] == "inc"


async def test_score_submits_the_last_defined_function(runtime: Runtime) -> None:
    async with make_environment("python", runtime) as env:
        await env.reset(INC)
        assert (await env.score())[0] == 0.0
        await env.step("def helper(x):\n    return x + 1\ndef mine(x):\n    return helper(x)")
        reward, info = await env.score()
        assert (reward, info["submitted_function"]) == (1.0, "mine")
        assert not env.done


async def test_twenty_episodes_at_once(docker: aiodocker.Docker, tasks: list[Task]) -> None:
    configs = {PY: ImagePoolConfig(min_idle=0, max_size=20)}
    async with python_runtime(docker, images=configs) as runtime:

        async def episode(i: int) -> float:
            task = tasks[i % len(tasks)]
            async with make_environment("python", runtime) as env:
                await env.reset(task)
                await env.step(f"mine = {i}")
                await asyncio.sleep(0)  # interleave the episodes
                assert (await env.step("mine")).observation == f"{{'output': '{i}', 'error': ''}}"
                await env.step(task.gold_text)
                name = task.gold_text.split("(")[0].removeprefix("def ")
                return (await env.step(f"submit {name}")).reward

        rewards = await asyncio.gather(*(episode(i) for i in range(20)))
        assert rewards == [1.0] * 20
        assert runtime.gold.computed == len(tasks), "one gold computation per task, not per episode"
        assert max(sum(c.values()) for c in runtime.pool.stats().values()) <= 20
