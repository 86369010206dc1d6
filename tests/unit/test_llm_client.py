"""LLMClient against the scripted server over real HTTP, through real litellm (no mocks).

Every test that takes `setup` runs twice: litellm in the test's process, and litellm in a worker
process (the sweep's transport), so both give the same answers, errors, retries and redaction.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import structlog

from agents.llm import LLMClient, ModelError, ModelLimits, ModelSpec, RetryPolicy
from agents.llm.errors import redact
from agents.llm.server import Rule, ScriptedLLMServer, ScriptedToolCall, ServerConfig
from agents.llm.transport import Transport
from agents.llm.transport import transport as make_transport
from tests.conftest import Lent

KEY = "sk-test-SECRET-4f2a9c"
PRICED = "openai/gpt-4o-mini"  # in litellm's local price map
UNPRICED = "openai/scripted-no-such-model"
FAST = RetryPolicy(initial_backoff=0.05, max_backoff=0.2, retry_after_jitter=0.05)
USER = [{"role": "user", "content": "list the files please"}]


@asynccontextmanager
async def _setup(config: ServerConfig | None = None, *, model: str = PRICED, policy: RetryPolicy = FAST,
                 limits: ModelLimits | None = None, workers: Transport | None = None,
                 timeout: float = 10) -> AsyncIterator[tuple[ScriptedLLMServer, LLMClient]]:
    async with ScriptedLLMServer(config) as server:
        spec = ModelSpec(name=model, api_base=f"{server.base_url}/v1", api_key=KEY, timeout=timeout,
                         limits=limits or ModelLimits())
        transport = make_transport(0) if workers is None else Lent(workers)
        client = LLMClient([spec], retry=policy, transport=transport)
        await client.start()
        try:
            yield server, client
        finally:
            await client.aclose()


@pytest.fixture(params=["in-process", "worker"])
def setup(request: pytest.FixtureRequest) -> Callable[..., Any]:
    workers = request.getfixturevalue("llm_worker") if request.param == "worker" else None
    return functools.partial(_setup, workers=workers)


def _elapsed_since(started: float) -> float:
    return asyncio.get_running_loop().time() - started


async def test_answer_and_usage_recorded(setup: Callable[..., Any]) -> None:
    config = ServerConfig(rules=[Rule(pattern="files", answer="ls -la")], served_model="gpt-4o-mini-2024-07-18")
    async with setup(config) as (server, client):
        result = await client.complete(PRICED, USER)
    assert result.text == "ls -la" and result.finish_reason == "stop"
    usage = result.usage
    assert (usage.model, usage.served_model) == (PRICED, "gpt-4o-mini-2024-07-18")
    assert (usage.prompt_tokens, usage.completion_tokens, usage.attempts) == (4, 2, 1)
    assert usage.cost_usd is not None and usage.cost_usd > 0
    assert usage.latency_s > 0
    assert client.usage.records == [usage]
    assert server.requests[0].api_key == KEY


async def test_unknown_price_is_none_not_zero(setup: Callable[..., Any]) -> None:
    async with setup(model=UNPRICED) as (_, client):
        result = await client.complete(UNPRICED, USER)
    assert result.usage.cost_usd is None
    assert client.usage.unpriced_calls == 1 and client.usage.known_cost_usd == 0


async def test_backoff_honours_retry_after(setup: Callable[..., Any]) -> None:
    async with setup() as (server, client):
        server.fail_next(1, status=429, retry_after=1)
        started = asyncio.get_running_loop().time()
        result = await client.complete(PRICED, USER)
        elapsed = _elapsed_since(started)
    stats = client.stats(PRICED)
    assert result.text == "OK" and result.usage.attempts == 2
    # the provider's second (plus at most the 0.05 s jitter), not the policy's 0.05 s backoff; and it was slept
    assert 1.0 <= stats.backoff_s <= 1.05 and elapsed >= 1.0
    assert (stats.retries, stats.rate_limited, stats.failed, stats.succeeded) == (1, 1, 0, 1)
    assert [r.status for r in server.requests] == [429, 200]


async def test_auth_error_fails_fast(setup: Callable[..., Any]) -> None:
    async with setup() as (server, client):
        await client.complete(PRICED, USER)  # warm litellm up: its first call in a process is slow
        server.config.rejected_keys.add(KEY)
        server.requests.clear()
        with pytest.raises(ModelError) as caught:
            await client.complete(PRICED, USER)
    assert caught.value.kind == "auth" and caught.value.status == 401 and caught.value.model == PRICED
    assert len(server.requests) == 1 and client.stats(PRICED).backoff_s == 0
    assert KEY not in str(caught.value) and "Incorrect API key" in str(caught.value)
    assert client.stats(PRICED).retries == 0 and client.stats(PRICED).failed == 1
    assert client.usage.records[0].attempts == 1


async def test_bad_request_is_not_retried(setup: Callable[..., Any]) -> None:
    async with setup() as (server, client):
        server.fail_next(1, status=400, message="messages: field required")
        with pytest.raises(ModelError, match="field required") as caught:
            await client.complete(PRICED, USER)
    assert caught.value.kind == "bad_request" and len(server.requests) == 1
    assert str(caught.value) == f"{PRICED}: BadRequestError: messages: field required"


async def test_server_errors_are_retried_then_succeed(setup: Callable[..., Any]) -> None:
    async with setup() as (server, client):
        server.fail_next(2, status=500)
        server.fail_next(1, status=503)
        result = await client.complete(PRICED, USER)
    assert result.usage.attempts == 4 and client.stats(PRICED).retries == 3
    assert [r.status for r in server.requests] == [500, 500, 503, 200]


async def test_retries_give_up_after_the_attempt_budget(setup: Callable[..., Any]) -> None:
    policy = FAST.model_copy(update={"max_attempts": 3})
    async with setup(policy=policy) as (server, client):
        server.fail_next(5, status=500)
        with pytest.raises(ModelError, match="after 3 attempts") as caught:
            await client.complete(PRICED, USER)
    assert caught.value.kind == "server" and len(server.requests) == 3


async def test_retry_after_beyond_the_wait_budget_gives_up_at_once(setup: Callable[..., Any]) -> None:
    policy = FAST.model_copy(update={"max_total_wait": 2.0})
    async with setup(policy=policy) as (server, client):
        server.fail_next(1, status=429, retry_after=30)
        with pytest.raises(ModelError) as caught:
            await client.complete(PRICED, USER)
    assert caught.value.kind == "rate_limit" and caught.value.retry_after == 30
    assert len(server.requests) == 1 and client.stats(PRICED).backoff_s == 0  # nothing was slept


async def test_malformed_body_is_a_clear_error(setup: Callable[..., Any]) -> None:
    policy = FAST.model_copy(update={"max_attempts": 2})
    async with setup(policy=policy) as (server, client):
        server.fail_next(2, kind="malformed")
        with pytest.raises(ModelError, match="malformed response") as caught:
            await client.complete(PRICED, USER)
        assert caught.value.kind == "malformed" and caught.value.attempts == 2
        server.fail_next(1, kind="malformed")  # a one-off is retried away
        assert (await client.complete(PRICED, USER)).usage.attempts == 2


async def test_connection_refused_is_a_connection_error() -> None:
    spec = ModelSpec(name=PRICED, api_base="http://127.0.0.1:9/v1", api_key=KEY, timeout=5)
    client = LLMClient([spec], retry=FAST.model_copy(update={"max_attempts": 2}))
    with pytest.raises(ModelError) as caught:
        await client.complete(PRICED, USER)
    assert caught.value.kind == "connection" and caught.value.attempts == 2


async def test_timeout_is_retried(setup: Callable[..., Any]) -> None:
    policy = FAST.model_copy(update={"max_attempts": 2})
    async with setup(ServerConfig(latency=0.5), policy=policy, timeout=0.2) as (_, client):
        with pytest.raises(ModelError) as caught:
            await client.complete(PRICED, USER)
    assert caught.value.kind == "timeout" and caught.value.attempts == 2


async def test_the_wait_budget_counts_from_the_first_attempt() -> None:
    # The first attempt alone spends the budget: no second one, although its backoff is short.
    policy = FAST.model_copy(update={"max_attempts": 5, "max_total_wait": 0.5})
    async with _setup(ServerConfig(latency=1.0), policy=policy, timeout=0.6) as (_, client):
        with pytest.raises(ModelError) as caught:
            await client.complete(PRICED, USER)
    assert caught.value.kind == "timeout" and caught.value.attempts == 1 and client.stats(PRICED).retries == 0


async def test_429s_cut_concurrency_and_every_call_completes(setup: Callable[..., Any]) -> None:
    # The provider takes 10 requests per second; the client starts 20 at once with no rpm of its own.
    config = ServerConfig(rpm=10, window=1.0, latency=0.05)
    limits = ModelLimits(max_concurrency=8, recover_after=50)
    async with setup(config, limits=limits, policy=FAST.model_copy(update={"max_attempts": 20})) as (_, client):
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(client.complete(PRICED, USER)) for _ in range(20)]
    stats = client.stats(PRICED)
    assert all(t.result().text == "OK" for t in tasks)
    assert stats.rate_limited > 0 and stats.concurrency_limit < 8
    assert (stats.failed, stats.in_flight, stats.waiting) == (0, 0, 0)


async def test_api_key_never_logged(setup: Callable[..., Any], caplog: pytest.LogCaptureFixture,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        async with setup(ServerConfig(rejected_keys={KEY})) as (server, client):
            with pytest.raises(ModelError) as caught:
                await client.complete(PRICED, USER)  # the server echoes the key in its 401
            server.config.rejected_keys.clear()
            server.fail_next(1, status=429, retry_after=0)
            server.fail_next(1, status=500, message=f"upstream rejected {KEY}")
            await client.complete(PRICED, USER)
    out, err = capsys.readouterr()
    logged = " ".join([repr(events), caplog.text, out, err, str(caught.value), repr(caught.value.__dict__),
                       repr(client.usage.records)])
    assert any(e["event"] == "llm_retry" for e in events) and any(e["event"] == "llm_failed" for e in events)
    assert KEY not in logged


BASH = {"type": "function", "function": {"name": "bash", "description": "run a command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


async def test_a_key_the_provider_echoes_is_redacted_from_everything_it_returns(setup: Callable[..., Any]) -> None:
    config = ServerConfig(echo_key=True, default_answer="ls",
                          default_tool_calls=[ScriptedToolCall(name="bash", arguments='{"command": "ls"}')])
    async with setup(config) as (server, client):
        result = await client.complete(PRICED, USER, tools=[BASH])
    assert server.requests[0].api_key == KEY  # sent, and echoed: the marker stands where it was
    assert (result.text, result.usage.served_model) == ("ls\n***", "Bearer ***")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("bash", '{"command": "ls", "api_key": "***"}')]
    assert KEY not in repr(result) and KEY not in repr(client.usage.records)


def test_a_key_is_redacted_in_the_forms_a_provider_echoes_it_and_a_short_one_is_left_alone() -> None:
    key = 'k"ey/with+plus ü'
    echoed = f'Bearer {key} {json.dumps({"k": key})} {json.dumps({"k": key}, ensure_ascii=False)} ' \
             f'{urllib.parse.quote(key, safe="")} {urllib.parse.quote_plus(key)}'
    assert redact(echoed, [key]) == 'Bearer *** {"k": "***"} {"k": "***"} *** ***'
    assert redact("a cat sat on the mat", ["at"]) == "a cat sat on the mat"  # a "key" of 2 characters
