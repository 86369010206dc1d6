"""litellm's real `anthropic/` provider against the scripted server's Messages API, over HTTP.

litellm calls `{api_base}/v1/messages` with the key in `x-api-key`; these tests hold the client to
the same guarantees as on the OpenAI path: usage recorded, tool calls read back, Retry-After
honoured, Anthropic's 529 (overloaded) retried, a refused key failing at once and redacted, a
broken body classified. Then one episode of each text strategy, every answer going through
Anthropic's format, on the Docker-free sandbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from agents.base import PAPER_STRATEGIES, STRATEGIES, get_strategy
from agents.llm import LLMClient, ModelError, ModelSpec, RetryPolicy
from agents.llm.errors import classify
from agents.llm.server import Rule, ScriptedLLMServer, ScriptedToolCall, ServerConfig
from agents.llm.transport import InProcessTransport, Transport
from agents.models import LLMModel, answer_as
from environments import make_environment
from environments.runtime import Runtime
from foundation.local import LocalProvider
from tasks import Task
from tests.conftest import Lent
from tests.lazy import lazy

openai = lazy("openai")
litellm = lazy("agents.llm._litellm", "litellm")

MODEL = "anthropic/claude-scripted"
KEY = "ant-test-SECRET-5b7e1d"  # not shaped like an sk- key: only the client's knowledge of it can redact it
FAST = RetryPolicy(initial_backoff=0.05, max_backoff=0.2, retry_after_jitter=0.05)
ONCE = FAST.model_copy(update={"max_attempts": 1})
USER = [{"role": "system", "content": "You write bash."}, {"role": "user", "content": "list the files please"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
IMAGE = "local/notes"
SEED = {"notes/a.txt": "alpha\nbeta\n", "notes/b.txt": "gamma\n"}
GOLD = "grep -c a notes/a.txt"
TEXT_STRATEGIES = [*PAPER_STRATEGIES, *(name for name in STRATEGIES if name.endswith("_fenced"))]


@asynccontextmanager
async def _client(config: ServerConfig | None = None, *, policy: RetryPolicy = FAST,
                  transport: Transport | None = None) -> AsyncIterator[tuple[ScriptedLLMServer, LLMClient]]:
    """The server, and a client whose `anthropic/` model points at it (litellm appends /v1/messages)."""
    async with ScriptedLLMServer(config) as server:
        spec = ModelSpec(name=MODEL, api_base=server.base_url, api_key=KEY, timeout=10)
        yield server, LLMClient([spec], retry=policy, transport=transport or InProcessTransport())


def _elapsed_since(started: float) -> float:
    return asyncio.get_running_loop().time() - started


@pytest.fixture(params=["in-process", "worker"])
def transport(request: pytest.FixtureRequest) -> Transport | None:
    """litellm in the test's process (None: the client's default), or in the session's worker."""
    return Lent(request.getfixturevalue("llm_worker")) if request.param == "worker" else None


async def test_answer_usage_and_the_request_as_the_server_saw_it(transport: Transport | None) -> None:
    config = ServerConfig(rules=[Rule(pattern="files", answer="ls -la")], served_model="claude-scripted-served")
    async with _client(config, transport=transport) as (server, client):
        result = await client.complete(MODEL, USER, max_tokens=64)
    assert (result.text, result.finish_reason) == ("ls -la", "stop")
    # The server counts words: 4 of the user's and 3 of the system prompt in; 2 out.
    usage = result.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.attempts) == (7, 2, 1)
    assert (usage.model, usage.served_model, usage.cost_usd) == (MODEL, "claude-scripted-served", None)
    seen = server.requests[0]
    assert (seen.path, seen.api_key, seen.status) == ("/v1/messages", KEY, 200)
    assert seen.body == {"model": "claude-scripted", "max_tokens": 64,
                         "system": [{"type": "text", "text": "You write bash."}],
                         "messages": [{"role": "user", "content": [{"type": "text", "text": "list the files please"}]}]}


async def test_tool_use_blocks_come_back_as_tool_calls_and_a_tool_result_is_matched() -> None:
    calls = [ScriptedToolCall(name="get_weather", arguments='{"city": "Paris"}'),
             ScriptedToolCall(name="get_weather", arguments="Paris")]
    config = ServerConfig(rules=[Rule(pattern="^sunny", answer="It is sunny in Paris."),
                                 Rule(pattern="weather", answer="Let me look.", tool_calls=calls)])
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    async with ScriptedLLMServer(config) as server:
        async def call(messages: list[dict[str, object]]) -> object:
            return await litellm.acompletion(model=MODEL, messages=messages, api_base=server.base_url, api_key=KEY,
                                             max_retries=0)

        first = (await call(ask)).choices[0]
        answered = [*ask, first.message.model_dump(include={"role", "content", "tool_calls"}),
                    {"role": "tool", "tool_call_id": first.message.tool_calls[0].id, "content": "sunny, 21C"}]
        second = (await call(answered)).choices[0]
    assert first.finish_reason == "tool_calls" and first.message.content == "Let me look."
    assert [(c.function.name, c.function.arguments) for c in first.message.tool_calls] == [
        ("get_weather", '{"city": "Paris"}'), ("get_weather", '{"_raw": "Paris"}')]  # not an object: under _raw
    assert second.message.content == "It is sunny in Paris." and second.finish_reason == "stop"
    sent = server.requests[1].body["messages"]
    assert [block["type"] for block in sent[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_scripted_1_0", "content": "sunny, 21C"}


async def test_tools_in_openai_format_reach_the_server_as_anthropic_tools() -> None:
    config = ServerConfig(default_tool_calls=[ScriptedToolCall(name="get_weather", arguments='{"city": "Paris"}')])
    async with ScriptedLLMServer(config) as server:
        response = await litellm.acompletion(model=MODEL, messages=[{"role": "user", "content": "weather?"}], tools=TOOLS,
                                             api_base=server.base_url, api_key=KEY, max_retries=0)
    calls = response.choices[0].message.tool_calls
    assert [(c.function.name, c.function.arguments) for c in calls] == [("get_weather", '{"city": "Paris"}')]
    sent = server.requests[0].body["tools"]
    assert [(t["name"], t["input_schema"]) for t in sent] == [("get_weather", TOOLS[0]["function"]["parameters"])]


def test_a_package_missing_inside_litellm_is_a_setup_error_not_retried() -> None:
    """litellm 1.106 imports its MCP gateway for any call with tools (hence litellm[mcp] in pyproject);
    a package missing there surfaces as a connection error, which no retry can cure."""
    request = httpx.Request("POST", "http://127.0.0.1/v1/messages")
    try:
        try:
            raise ModuleNotFoundError("No module named 'mcp'")
        except ImportError as missing:
            raise openai.APIConnectionError(message="No module named 'mcp'", request=request) from missing
    except openai.APIConnectionError as exc:
        error = classify(exc, MODEL)
    assert (error.kind, error.retryable) == ("setup", False) and "mcp" in error.reason


async def test_429_retry_after_is_waited_for() -> None:
    async with _client() as (server, client):
        server.fail_next(1, status=429, retry_after=1, message="slow down")
        started = asyncio.get_running_loop().time()
        result = await client.complete(MODEL, USER)
        elapsed = _elapsed_since(started)
    # the provider's second (plus at most the 0.05 s jitter), not the policy's 0.05 s backoff; and it was slept
    assert result.usage.attempts == 2 and 1.0 <= client.stats(MODEL).backoff_s <= 1.05 and elapsed >= 1.0
    assert [r.status for r in server.requests] == [429, 200] and client.stats(MODEL).rate_limited == 1


async def test_529_overloaded_is_retried_and_named() -> None:
    async with _client() as (server, client):
        server.fail_next(2, status=529, message="Overloaded")
        assert (await client.complete(MODEL, USER)).usage.attempts == 3
        server.fail_next(2, status=529, message="Overloaded")
        client.retry = FAST.model_copy(update={"max_attempts": 2})
        with pytest.raises(ModelError) as caught:
            await client.complete(MODEL, USER)
    assert [r.status for r in server.requests] == [529, 529, 200, 529, 529]
    error = caught.value
    assert (error.kind, error.status, error.attempts, error.reason) == ("overloaded", 529, 2, "InternalServerError: Overloaded")


async def test_a_refused_key_fails_at_once_redacted() -> None:
    async with _client() as (server, client):
        await client.complete(MODEL, USER)
        server.config.rejected_keys.add(KEY)
        with pytest.raises(ModelError) as caught:
            await client.complete(MODEL, USER)
    error = caught.value
    assert (error.kind, error.status, error.attempts, len(server.requests)) == ("auth", 401, 1, 2)
    assert client.stats(MODEL).backoff_s == 0 and client.stats(MODEL).retries == 0
    assert KEY not in str(error) and error.reason == "AuthenticationError: Incorrect API key provided: ***"


@pytest.mark.parametrize(("status", "kind", "raised"), [(400, "bad_request", "BadRequestError"),
                                                        (404, "not_found", "NotFoundError"),
                                                        (500, "server", "InternalServerError")])
async def test_an_anthropic_error_body_gives_its_message(status: int, kind: str, raised: str) -> None:
    async with _client(policy=ONCE) as (server, client):
        server.fail_next(1, status=status, message="messages.0: field required")
        with pytest.raises(ModelError) as caught:
            await client.complete(MODEL, USER)
    assert (caught.value.kind, caught.value.status) == (kind, status)
    assert caught.value.reason == f"{raised}: messages.0: field required"


async def test_a_malformed_body_is_classified() -> None:
    async with _client(policy=FAST.model_copy(update={"max_attempts": 2})) as (server, client):
        server.fail_next(2, kind="malformed")
        with pytest.raises(ModelError) as caught:
            await client.complete(MODEL, USER)
        server.fail_next(1, kind="malformed")
        recovered = await client.complete(MODEL, USER)  # a one-off is retried away
    assert (caught.value.kind, caught.value.attempts) == ("malformed", 2)
    assert caught.value.reason.startswith("malformed response body") and "Original Response" not in caught.value.reason
    assert recovered.usage.attempts == 2


async def test_an_unknown_provider_is_a_classified_error() -> None:
    client = LLMClient(retry=FAST)
    with pytest.raises(ModelError, match="LLM Provider NOT provided") as caught:
        await client.complete("nosuchprovider/x", USER)
    assert (caught.value.kind, caught.value.attempts, caught.value.retryable) == ("bad_request", 1, False)


def _answers(strategy: str, task: Task) -> ServerConfig:
    """The gold in the form `strategy` reads (agents.models.answer_as): its first answer by default,
    and for ReAct the submission after an observation, for Plan & Solve the action of a step."""
    fenced = strategy.endswith("_fenced")
    if strategy.startswith("react"):
        style, observation = ("fenced", "^Observation:") if fenced else ("react", "^Observation 1:")
        return ServerConfig(default_answer=answer_as(task, GOLD, style, 0),
                            rules=[Rule(pattern=observation, answer=answer_as(task, "submit", style, 1))])
    if strategy.startswith("plan_solve"):
        return ServerConfig(default_answer=answer_as(task, GOLD, "plan"),
                            rules=[Rule(pattern="(?m)^Step: ", answer=answer_as(task, GOLD, "fenced" if fenced else "paper"))])
    return ServerConfig(default_answer=answer_as(task, GOLD, "fenced" if fenced else "paper"))


@pytest.mark.parametrize("strategy", TEXT_STRATEGIES)
async def test_each_text_strategy_solves_an_episode_through_anthropic(strategy: str) -> None:
    task = Task(kind="bash", dataset="local-notes", index=0, query="How many lines of notes/a.txt hold an a?",
                gold=GOLD, image=IMAGE)
    async with _client(_answers(strategy, task)) as (server, client), \
            Runtime.local(LocalProvider({IMAGE: SEED})) as runtime, make_environment("bash", runtime) as env:
        outcome = await get_strategy(strategy).run(env, task, LLMModel(client, MODEL), max_turns=3)
    assert outcome.success and outcome.status == "solved", outcome
    two_prompts = strategy.startswith(("react", "plan_solve"))  # an answer, then a submission or a step
    assert [r.path for r in server.requests] == ["/v1/messages"] * (2 if two_prompts else 1)
