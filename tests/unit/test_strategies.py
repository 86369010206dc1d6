"""The project's four fenced-code strategies with scripted models on the starter tasks: Bash, Python
and CTF on a Docker-free local sandbox (tests/local_starter.py), SQL in real containers (MariaDB)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import pytest

from agents.base import Message, get_strategy
from agents.llm import LLMClient, ModelError, ModelSpec
from agents.llm.server import Rule, ScriptedLLMServer, ServerConfig
from tests.scripted import ScriptedModel
from agents.strategies.turns import retry_message
from environments import make_environment
from environments.base import TaskUnavailable
from environments.kind import kind_spec
from environments.runtime import Runtime
from tasks import Task
from tests.local_starter import local_runtime, starter

GREP = "```bash\ngrep -c ERROR starter/logs/app.log\n```"  # the gold of starter-bash/0, on a local sandbox


@pytest.fixture
async def local() -> AsyncIterator[Runtime]:
    """No Docker, for the Bash, Python and CTF tasks."""
    async with local_runtime() as runtime:
        yield runtime


def task(kind: str, index: int = 0) -> Task:
    return starter(kind, index)


async def play(runtime: Runtime, strategy: str, task: Task, outputs: Sequence[str | BaseException],
               max_turns: int = 5, **options: object):
    model = ScriptedModel(outputs)
    async with make_environment(task.kind, runtime) as env:
        outcome = await get_strategy(strategy, **options).run(env, task, model, max_turns=max_turns)
    return outcome, model


def last_user(messages: list[Message]) -> str:
    return [m for m in messages if m["role"] == "user"][-1]["content"]


async def test_try_again_retries_without_code_and_stops_at_reward_one(local: Runtime) -> None:
    outputs = ["I would count the errors.", "```bash\nls starter/logs\n```", GREP, "```bash\necho never\n```"]
    outcome, model = await play(local, "try_again_fenced", task("bash"), outputs)
    assert [t.action for t in outcome.turns] == [None, "ls starter/logs", GREP.split("\n")[1]]
    assert [t.executed for t in outcome.turns] == [False, True, True]
    assert outcome.turns[0].reward == 0.0 and outcome.turns[1].reward < 1.0 and outcome.turns[2].reward == 1.0
    assert outcome.turns[0].observation == retry_message(kind_spec("bash"))
    assert last_user(model.calls[1]) == retry_message(kind_spec("bash"))  # the retry message is what the model sees next
    assert "app.log" in last_user(model.calls[2]) and "Reward: " in last_user(model.calls[2])
    assert outcome.status == "solved" and len(model.calls) == 3


async def test_try_again_python_autosubmits_a_def(local: Runtime) -> None:
    wrong = "```python\ndef sum_even_squares(nums):\n    return -1\n```"
    right = "```python\ndef sum_even_squares(nums):\n    return sum(n * n for n in nums if n % 2 == 0)\n```"
    outcome, _ = await play(local, "try_again_fenced", task("python"), ["```python\n1 + 1\n```", wrong, right])
    assert [t.reward for t in outcome.turns] == [0.0, 0.0, 1.0]
    assert outcome.turns[0].observation == "{'output': '2', 'error': ''}"
    assert outcome.status == "solved"


async def test_try_again_ctf_goes_on_after_a_wrong_flag(local: Runtime) -> None:
    ctf = task("ctf")
    outputs = ["```bash\nsubmit starter{wrong}\n```", f"```bash\nsubmit {ctf.gold_text}\n```"]
    outcome, _ = await play(local, "try_again_fenced", ctf, outputs)
    assert [t.reward for t in outcome.turns] == [0.0, 1.0] and outcome.status == "solved"


async def test_react_submits_and_scores_the_submission(local: Runtime) -> None:
    outputs = ["Thought: where are the logs?\nAction: execute[ls starter/logs]",
               "Thought: count them\nAction: execute[grep -c ERROR starter/logs/app.log]\nObservation: 3",
               "Thought: the last output answers it\nAction: submit"]
    outcome, model = await play(local, "react_fenced", task("bash"), outputs)
    assert [t.action for t in outcome.turns] == ["ls starter/logs", "grep -c ERROR starter/logs/app.log", "submit"]
    assert [t.reward for t in outcome.turns] == [0.0, 0.0, 1.0] and outcome.status == "solved"
    assert last_user(model.calls[1]).startswith("Observation: ")


async def test_react_is_submitted_for_it_at_max_turns(local: Runtime) -> None:
    outputs = ["Thought: hmm\nAction: ask someone", "Thought: look\nAction: execute[ls starter]"]
    outcome, _ = await play(local, "react_fenced", task("bash"), outputs, max_turns=2)
    assert [t.action for t in outcome.turns] == [None, "ls starter", "submit"]
    assert [t.executed for t in outcome.turns] == [False, True, True]
    assert outcome.status == "max_turns" and outcome.reward < 1.0


@pytest.mark.parametrize("strategy", ["single_fenced", "try_again_fenced", "react_fenced", "plan_solve_fenced"])
async def test_model_error_fails_the_episode(local: Runtime, strategy: str) -> None:
    error = ModelError("scripted", "rate limited for good", kind="rate_limit")
    outcome, _ = await play(local, strategy, task("bash"), [error])
    assert outcome.status == "model_error" and "rate limited" in (outcome.error or "")
    assert outcome.turns == [] and not outcome.success


class ClientModel:
    """The smallest adapter of LLMClient to the Model protocol (agents/models.py has the real one)."""

    def __init__(self, client: LLMClient, name: str) -> None:
        self.client, self.name = client, name

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int, style: str = "fenced") -> str:
        return (await self.client.complete(self.name, messages)).text


async def test_try_again_with_llm_client_and_scripted_server(local: Runtime) -> None:
    config = ServerConfig(rules=[Rule(pattern="Reward", answer=GREP)],
                          default_answer="Let me see.\n```bash\nls starter/logs\n```")
    name = "openai/scripted-agent"
    async with ScriptedLLMServer(config) as server:
        client = LLMClient([ModelSpec(name=name, api_base=f"{server.base_url}/v1", api_key="sk-test-0000", timeout=10)])
        async with make_environment("bash", local) as env:
            outcome = await get_strategy("try_again_fenced").run(env, task("bash"), ClientModel(client, name), max_turns=4)
        bodies = [r.body for r in server.requests if r.body]
    assert [t.reward for t in outcome.turns][-1] == 1.0 and len(outcome.turns) == 2
    assert outcome.status == "solved" and len(bodies) == 2
    assert bodies[0]["messages"][0]["role"] == "system"


class _Watching:
    """A model that notes, at each call, whether the environment had finished its reset."""

    name = "watching"

    def __init__(self, env: Any, outputs: Sequence[str], delay: float = 0.0) -> None:
        self.outputs, self.delay = list(outputs), delay
        self.reset_done: list[bool] = []
        self.cancelled = False
        self.started = False
        start = env._start  # noqa: SLF001 — the end of the reset is what this model watches

        async def started(task: Task) -> None:
            await start(task)
            self.started = True

        env._start = started  # noqa: SLF001

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int, style: str = "fenced") -> str:
        self.reset_done.append(self.started)
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return self.outputs[len(self.reset_done) - 1]


@pytest.mark.parametrize("strategy", ["single_fenced", "try_again_fenced", "react_fenced", "plan_solve_fenced"])
async def test_the_first_answer_is_asked_for_while_the_environment_resets(local: Runtime, strategy: str) -> None:
    answer = "Action: execute[grep -c ERROR starter/logs/app.log]" if strategy == "react_fenced" else GREP
    async with make_environment("bash", local) as env:
        model = _Watching(env, [answer] * 4, delay=0.05)
        outcome = await get_strategy(strategy).run(env, task("bash"), model, max_turns=3)
    assert model.reset_done[0] is False and all(model.reset_done[1:])  # the first call did not wait
    assert outcome.turns[0].executed and outcome.turns[0].observation.strip() == "2"  # it waited for the reset


async def test_a_failed_reset_cancels_the_first_call_and_raises_its_error(local: Runtime) -> None:
    broken = replace(task("bash"), unavailable="its set-up downloads from the internet")
    async with make_environment("bash", local) as env:
        model = _Watching(env, [GREP], delay=30)
        with pytest.raises(TaskUnavailable, match="downloads from the internet"):
            await asyncio.wait_for(get_strategy("try_again_fenced").run(env, broken, model, max_turns=3), 10)
    assert model.cancelled
