"""Agents of your own, without Docker (the starter tasks on a local sandbox): the example agent and
agents written for the tests run as strategies, async or plain; what goes wrong is one line (a file
that does not import, an agent that raises or returns a value) or its episode's end (out of turns,
the deadline); agents written against the OpenAI and Anthropic SDKs reach the model through the
gateway, streaming or not, and a wrong or expired token is refused."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.base import EpisodeOutcome
from agents.gateway import LLMGateway
from agents.models import OracleModel
from agents.own import load_agent
from agents.episode import play
from agents.strategies.external import ExternalStrategy, ModelHandle
from environments import make_environment
from environments.runtime import Runtime
from foundation.errors import ConfigError
from foundation.settings import PROJECT_ROOT
from tests.lazy import lazy
from tests.local_starter import local_runtime, starter

anthropic, openai = lazy("anthropic"), lazy("openai")

EXAMPLE = PROJECT_ROOT / "examples" / "own-agent"


@pytest.fixture
async def local() -> AsyncIterator[Runtime]:
    async with local_runtime() as runtime:
        yield runtime


def agent_file(tmp_path: Path, code: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    path.write_text(code)
    return path


async def run_agent(runtime: Runtime, name: str, base: Path, kind: str = "bash", index: int = 0, *,
                    max_turns: int = 4, gateway: LLMGateway | None = None) -> EpisodeOutcome:
    strategy = ExternalStrategy(load_agent(name, base), gateway)
    async with make_environment(kind, runtime) as env:
        return await play(strategy, env, starter(kind, index), OracleModel(), max_turns=max_turns)


@pytest.mark.parametrize(("kind", "index"), [("bash", 0), ("bash", 2), ("python", 0), ("ctf", 0)])
async def test_the_example_agent_solves_with_the_oracle(local, kind, index):
    outcome = await run_agent(local, "my_agent.py:Terse", EXAMPLE, kind, index)
    assert outcome.status == "solved" and outcome.reward == 1.0
    assert outcome.turns[0].output.startswith("```") and outcome.turns[-1].action.startswith("submit")


async def test_a_plain_function_runs_in_a_thread_with_the_same_methods(local, tmp_path):
    agent_file(tmp_path, '''
import re, threading
def run(episode, model):
    assert threading.current_thread() is not threading.main_thread()
    answer = model.complete([{"role": "user", "content": episode.query}])
    step = episode.step(re.search(r"```\\w*\\n(.*?)```", answer.text, re.S).group(1))
    assert step.reward == 1.0 and not step.done and episode.turns_left == 3
    episode.submit()
''')
    outcome = await run_agent(local, "mine.py:run", tmp_path)
    assert outcome.status == "solved" and [t.action for t in outcome.turns][-1] == "submit"


@pytest.mark.parametrize(("code", "words"), [
    ("class A:\n    async def run(self, episode, model):\n        await episode.step('true')\n        {}['x']\n",
     "mine.py:4 in run of mine.py:A raised KeyError: 'x'"),
    ("def A(episode, model):\n    return 42\n", "mine.py:A returned 42; run(episode, model) returns nothing"),
    ("class A:\n    def __init__(self):\n        raise ValueError('no')\n    def run(self, episode, model):\n        pass\n",
     "mine.py:3 in __init__ of mine.py:A raised ValueError: no"),
])
async def test_an_agent_that_raises_is_its_episodes_agent_error_naming_where(local, tmp_path, code, words):
    agent_file(tmp_path, code)
    outcome = await run_agent(local, "mine.py:A", tmp_path)
    assert outcome.status == "agent_error" and outcome.error is not None and words in outcome.error
    assert "\n" not in outcome.error


async def test_steps_past_max_turns_end_the_episode_as_out_of_turns(local, tmp_path):
    agent_file(tmp_path, "async def A(episode, model):\n    while True:\n        await episode.step('echo again')\n")
    outcome = await run_agent(local, "mine.py:A", tmp_path, max_turns=3)
    assert outcome.status == "max_turns" and len(outcome.turns) == 3


@pytest.mark.parametrize("code", [
    "import asyncio\nasync def A(episode, model):\n    await asyncio.sleep(3600)\n",
    "def A(episode, model):\n    while True:\n        episode.step('sleep 0.05')\n",
])
async def test_an_agent_that_never_returns_is_stopped_by_the_deadline(local, tmp_path, code):
    path = agent_file(tmp_path, code)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(1.0):
            await run_agent(local, "mine.py:A", tmp_path, max_turns=1000)
    for _ in range(100):  # a thread's agent ends with its next call, which raises once the episode ended
        if not running(path):
            break
        await asyncio.sleep(0.05)
    assert not running(path)


def running(path: Path) -> bool:
    """Whether a thread of this process is in the agent's code (its file is on a thread's stack);
    the count of threads would also see the executor's, which start when a call first needs them."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_filename == str(path):
                return True
            frame = frame.f_back
    return False


@pytest.mark.parametrize(("code", "name", "words"), [
    ("def run(:\n", "mine.py:run", "mine.py:1 does not import: SyntaxError"),
    ("import no_such_module_here\n", "mine.py:run", "mine.py:1 does not import: ModuleNotFoundError"),
    ("x = 1\n", "mine.py:Agent", "mine.py has no 'Agent'"),
    ("class Agent:\n    pass\n", "mine.py:Agent", "Agent has no method run(episode, model)"),
    ("x = 1\n", "missing.py:Agent", "missing.py does not exist (paths start at the sweep file's directory)"),
])
def test_an_agent_file_that_cant_be_used_is_one_line(tmp_path, code, name, words):
    agent_file(tmp_path, code)
    with pytest.raises(ConfigError) as raised:
        load_agent(name, tmp_path)
    assert words in str(raised.value) and "\n" not in str(raised.value)


OPENAI_AGENT = '''
import json, openai
class A:
    async def run(self, episode, model):
        gateway = episode.gateway
        async with openai.AsyncOpenAI(base_url=gateway.openai_base_url, api_key=gateway.api_key, max_retries=0) as client:
            await self.loop(episode, client)

    async def loop(self, episode, client):
        messages = [{"role": "user", "content": episode.query}]
        while not episode.done:
            reply = await client.chat.completions.create(model="any", messages=messages, tools=episode.tools,
                                                          stream=STREAM)
            if STREAM:
                calls = {}
                async for chunk in reply:
                    for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                        calls[call.index] = call
                calls = [calls[i] for i in sorted(calls)]
            else:
                calls = reply.choices[0].message.tool_calls
            messages.append({"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]})
            for call in calls:
                arguments = json.loads(call.function.arguments)
                if call.function.name == "submit":
                    await episode.submit(next(iter(arguments.values()), ""))
                    return
                step = await episode.step(arguments["command"])
                messages.append({"role": "tool", "tool_call_id": call.id, "content": step.observation})
'''

ANTHROPIC_AGENT = '''
import anthropic
class A:
    async def run(self, episode, model):
        gateway = episode.gateway
        async with anthropic.AsyncAnthropic(base_url=gateway.anthropic_base_url, api_key=gateway.api_key,
                                            max_retries=0) as client:
            await self.loop(episode, client)

    async def loop(self, episode, client):
        tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
                  "input_schema": t["function"]["parameters"]} for t in episode.tools]
        messages = [{"role": "user", "content": episode.query}]
        while not episode.done:
            if STREAM:
                async with client.messages.stream(model="any", max_tokens=512, messages=messages, tools=tools) as s:
                    reply = await s.get_final_message()
            else:
                reply = await client.messages.create(model="any", max_tokens=512, messages=messages, tools=tools)
            messages.append({"role": "assistant", "content": reply.content})
            results = []
            for block in reply.content:
                if block.type != "tool_use":
                    continue
                if block.name == "submit":
                    await episode.submit(next(iter(block.input.values()), ""))
                    return
                step = await episode.step(block.input["command"])
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": step.observation})
            messages.append({"role": "user", "content": results})
'''


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("code", [OPENAI_AGENT, ANTHROPIC_AGENT], ids=["openai", "anthropic"])
async def test_an_sdk_agent_reaches_the_model_through_the_gateway(local, tmp_path, code, stream):
    agent_file(tmp_path, code.replace("STREAM", str(stream)))
    async with LLMGateway.serve() as gateway:
        outcome = await run_agent(local, "mine.py:A", tmp_path, gateway=gateway)
        assert not gateway.doors  # its door closed with the episode
    assert outcome.status == "solved", outcome
    assert [t.action for t in outcome.turns] == ["grep -c ERROR starter/logs/app.log", "submit"]


SPENDER = '''
import openai
class A:
    async def run(self, episode, model):
        gateway = episode.gateway
        async with openai.AsyncOpenAI(base_url=gateway.openai_base_url, api_key=gateway.api_key, max_retries=0) as client:
            with open(LOG, "a") as log:
                for _ in range(20):  # never a step: the model's answers spent, outside the turns it was given
                    try:
                        await client.chat.completions.create(model="any", messages=[{"role": "user", "content": "more"}])
                    except openai.BadRequestError as refused:
                        log.write(f"refused {refused.status_code}\\n")
                        return
                    log.write("answered\\n")
'''


async def test_an_agent_of_yours_gets_at_most_max_turns_model_calls_through_the_gateway(local, tmp_path):
    """Its calls through the gateway are its turns, as its steps are: issue 45 saw 6 answered with
    max_turns = 3, each charged to the sweep's budget."""
    log = tmp_path / "calls.log"
    agent_file(tmp_path, f"LOG = {str(log)!r}\n" + SPENDER)
    async with LLMGateway.serve() as gateway:
        outcome = await run_agent(local, "mine.py:A", tmp_path, max_turns=3, gateway=gateway)
    assert log.read_text().splitlines() == ["answered"] * 3 + ["refused 400"], log.read_text()
    assert not outcome.turns and outcome.status != "solved"


async def test_the_gateway_refuses_a_wrong_token_and_an_ended_episodes():
    async with LLMGateway.serve() as gateway:
        door = gateway.open(ModelHandle(OracleModel(), starter("bash", 0)))
        access = door.access
        good = openai.AsyncOpenAI(base_url=access.openai_base_url, api_key=access.api_key, max_retries=0)
        reply = await good.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        assert "grep -c ERROR" in (reply.choices[0].message.content or "")
        wrong = openai.AsyncOpenAI(base_url=access.openai_base_url, api_key="sk-not-a-token", max_retries=0)
        with pytest.raises(openai.AuthenticationError, match="unknown token"):
            await wrong.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        door.close()
        with pytest.raises(openai.AuthenticationError, match="episode has ended"):
            await good.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        claude = anthropic.AsyncAnthropic(base_url=access.anthropic_base_url, api_key=access.api_key, max_retries=0)
        with pytest.raises(anthropic.AuthenticationError, match="episode has ended"):
            await claude.messages.create(model="x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        await good.close()
        await wrong.close()
        await claude.close()
