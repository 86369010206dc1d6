"""The `tools` strategy end to end: LLMModel -> LLMClient -> litellm -> HTTP -> the scripted server,
in OpenAI's format (`openai/...`, /v1/chat/completions) and Anthropic's (`anthropic/...`,
/v1/messages), litellm in this process or in a worker, on the Docker-free sandbox (the Bash
starter task, tests/local_starter.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from agents.base import EpisodeOutcome, get_strategy
from agents.llm import LLMClient, ModelSpec, RetryPolicy
from agents.llm.server import Rule, ScriptedLLMServer, ScriptedToolCall, ServerConfig
from agents.llm.transport import InProcessTransport, Transport
from agents.models import LLMModel
from environments import make_environment
from tests.conftest import Lent
from tests.local_starter import local_runtime, starter

KEY = "sk-test-tools-4c1f"
FORMATS = {"openai": ("openai/gpt-scripted", "/v1"), "anthropic": ("anthropic/claude-scripted", "")}
GOLD = "grep -c ERROR starter/logs/app.log"  # starter-bash/0 on a local sandbox; it prints 2


def bash(command: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="bash", arguments=json.dumps({"command": command}))


@pytest.fixture(params=["in-process", "worker"])
def transport(request: pytest.FixtureRequest) -> Transport | None:
    """litellm in the test's process (None: the client's default), or in the session's worker."""
    return Lent(request.getfixturevalue("llm_worker")) if request.param == "worker" else None


@asynccontextmanager
async def serving(config: ServerConfig, fmt: str,
                  transport: Transport | None = None) -> AsyncIterator[tuple[ScriptedLLMServer, LLMClient, str]]:
    """The server, and a client whose model of format `fmt` points at it."""
    model, path = FORMATS[fmt]
    async with ScriptedLLMServer(config) as server:
        spec = ModelSpec(name=model, api_base=server.base_url + path, api_key=KEY, timeout=10)
        client = LLMClient([spec], retry=RetryPolicy(max_attempts=1), transport=transport or InProcessTransport())
        yield server, client, model


async def episode(client: LLMClient, model: str, max_turns: int = 3) -> EpisodeOutcome:
    task = starter("bash")
    async with local_runtime() as runtime, make_environment("bash", runtime) as env:
        return await get_strategy("tools").run(env, task, LLMModel(client, model), max_turns=max_turns)


# Two calls in the first answer; the second call's result (wc's count) brings the gold.
TWO_THEN_GOLD = ServerConfig(default_answer="Let me look.",
                             default_tool_calls=[bash("ls starter/logs"), bash("wc -l starter/logs/app.log")],
                             rules=[Rule(pattern=r"5 starter/logs/app\.log", tool_calls=[bash(GOLD)])])


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_a_tools_episode_is_solved_over_http(fmt: str, transport: Transport | None) -> None:
    async with serving(TWO_THEN_GOLD.model_copy(deep=True), fmt, transport) as (server, client, model):
        outcome = await episode(client, model)
    assert outcome.status == "solved" and outcome.success, outcome
    assert [t.action for t in outcome.turns] == ["ls starter/logs", "wc -l starter/logs/app.log", GOLD]
    assert outcome.turns[0].output.splitlines() == ["Let me look.", 'bash({"command": "ls starter/logs"})',
                                                    'bash({"command": "wc -l starter/logs/app.log"})']
    first, second = (r.body or {} for r in server.requests)
    sent = second["messages"]
    if fmt == "openai":
        assert [t["function"]["name"] for t in first["tools"]] == ["bash", "submit"]
        assert [c["id"] for c in sent[-3]["tool_calls"]] == ["call_scripted_1_0", "call_scripted_1_1"]
        assert [(m["role"], m["tool_call_id"]) for m in sent[-2:]] == [("tool", "call_scripted_1_0"),
                                                                       ("tool", "call_scripted_1_1")]
        assert sent[-2]["content"].startswith("app.log\nold.log")
    else:
        assert [t["name"] for t in first["tools"]] == ["bash", "submit"]
        assert [b["type"] for b in sent[-2]["content"]] == ["text", "tool_use", "tool_use"]
        results = [b for b in sent[-1]["content"] if b["type"] == "tool_result"]
        assert [b["tool_use_id"] for b in results] == ["toolu_scripted_1_0", "toolu_scripted_1_1"]
    # usage: one record per answer, the second prompt longer by the first answer and its results
    first_usage, second_usage = client.usage.records
    assert first_usage.model == model and first_usage.completion_tokens > 0
    assert second_usage.prompt_tokens > first_usage.prompt_tokens
    assert second_usage.completion_tokens == len(json.dumps({"command": GOLD}).split())  # the server counts words


async def test_an_unknown_tool_and_bad_json_come_back_as_observations() -> None:
    bad = [ScriptedToolCall(name="shell", arguments='{"command": "touch a"}'),
           ScriptedToolCall(name="bash", arguments='{"command": "touch b"')]
    config = ServerConfig(default_tool_calls=bad, rules=[Rule(pattern="not JSON", tool_calls=[bash("ls"), bash(GOLD)])])
    async with serving(config, "openai") as (server, client, model):
        outcome = await episode(client, model)
    wrong, listing, solved = outcome.turns[:2], outcome.turns[2], outcome.turns[3]
    assert [(t.action, t.executed, t.reward) for t in wrong] == [(None, False, 0.0)] * 2
    assert listing.observation.split() == ["starter"] and solved.reward == 1.0  # nothing was touched
    results = [m for m in (server.requests[1].body or {})["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["call_scripted_1_0", "call_scripted_1_1"]
    assert results[0]["content"].startswith("No BASH code was run: there is no tool named 'shell'")
    assert results[1]["content"].startswith("No BASH code was run: the arguments of bash are not JSON")
    assert len(client.usage.records) == 2 and outcome.status == "solved"

