"""The pieces of litellm's per-call work we skip (agents/llm/_litellm_lean.py) are skipped only
where that changes nothing: real litellm, the scripted server over real HTTP."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from litellm.integrations.custom_logger import CustomLogger
from litellm.litellm_core_utils.litellm_logging import Logging

from agents.llm import _litellm_lean
from agents.llm._litellm import litellm
from agents.llm.server import ScriptedLLMServer
from agents.llm.transport import InProcessTransport, Request

USER = [{"role": "user", "content": "hello"}]


def _models_called(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[str]:
    """`owner.name`, called with keywords, now also notes each call's `model` in the list returned."""
    seen: list[str] = []
    original = getattr(owner, name)

    def counting(**kwargs: Any) -> Any:
        seen.append(kwargs["model"])
        return original(**kwargs)

    monkeypatch.setattr(owner, name, counting)
    return seen


@pytest.fixture
def priced_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The models litellm's own cost calculation ran for, one entry per run."""
    return _models_called(monkeypatch, litellm, "response_cost_calculator")


async def _calls(server: ScriptedLLMServer, model: str, n: int, **params: Any) -> list[float | None]:
    transport = InProcessTransport()
    request = Request(model=model, messages=USER, params=params, api_base=f"{server.base_url}/v1", api_key="k")
    return [(await transport.call(request)).cost_usd for _ in range(n)]


async def test_an_unmapped_model_is_priced_once_then_known_unpriced(priced_calls: list[str]) -> None:
    model = f"openai/local-{uuid.uuid4().hex[:8]}"
    async with ScriptedLLMServer() as server:
        assert await _calls(server, model, 3) == [None, None, None]
    assert len(priced_calls) >= 1 and priced_calls.count(priced_calls[0]) == len(priced_calls)
    first = len(priced_calls)
    async with ScriptedLLMServer() as server:
        await _calls(server, model, 2)
    assert len(priced_calls) == first  # no attempt after the first call's


async def test_mapped_models_and_custom_prices_are_priced_every_call(priced_calls: list[str]) -> None:
    async with ScriptedLLMServer() as server:
        costs = await _calls(server, "openai/gpt-4o-mini", 3)
        assert all(c is not None and c > 0 for c in costs) and len(priced_calls) >= 3
        model = f"openai/local-{uuid.uuid4().hex[:8]}"
        assert await _calls(server, model, 1) == [None]
        custom = await _calls(server, model, 2, input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    assert all(c is not None and c > 0 for c in custom)  # the caller's own prices still count


async def test_success_logging_runs_only_for_registered_callbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    handled: list[str] = []
    original = Logging.async_success_handler

    async def spy(self: Logging, *args: Any, **kwargs: Any) -> Any:
        handled.append(self.model)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Logging, "async_success_handler", spy)

    class Recorder(CustomLogger):
        def __init__(self) -> None:
            super().__init__()
            self.responses: list[Any] = []

        async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            self.responses.append(response_obj)

    async with ScriptedLLMServer() as server:
        await _calls(server, "openai/gpt-4o-mini", 2)
        await asyncio.sleep(0.2)
        assert handled == [] and not _litellm_lean.callbacks_registered()
        recorder = Recorder()
        monkeypatch.setattr(litellm, "callbacks", [recorder])
        await _calls(server, "openai/gpt-4o-mini", 2)
        for _ in range(50):  # litellm delivers success events from a background task
            if len(recorder.responses) == 2:
                break
            await asyncio.sleep(0.05)
    assert len(handled) == 2 and len(recorder.responses) == 2
    assert all(r.choices[0].message.content == "OK" for r in recorder.responses)


async def test_cookies_are_still_kept_when_a_response_sets_them() -> None:
    from aiohttp import web

    async def handler(request: web.Request) -> web.Response:
        response = web.Response(text="ok")
        if request.path == "/set":
            response.set_cookie("session", "abc123")
        return response

    app = web.Application()
    app.router.add_get("/set", handler)
    app.router.add_get("/plain", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await client.get("/plain")
            assert dict(client.cookies) == {}
            await client.get("/set")
            assert dict(client.cookies) == {"session": "abc123"}
    finally:
        await runner.cleanup()


async def test_an_unmapped_model_is_looked_up_once_until_the_map_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    lookups = _models_called(monkeypatch, _litellm_lean, "_original_model_info")
    name = f"local-{uuid.uuid4().hex[:8]}"
    async with ScriptedLLMServer() as server:
        assert await _calls(server, f"openai/{name}", 3) == [None, None, None]
        assert lookups.count(name) == 1  # the pre-call lookup failed once, then was known to fail
        await _calls(server, "openai/gpt-4o-mini", 2)
        assert lookups.count("gpt-4o-mini") >= 2  # a mapped model is looked up on every call
        litellm.register_model({name: {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
                                       "litellm_provider": "openai", "mode": "chat"}})
        try:
            costs = await _calls(server, f"openai/{name}", 1)
            assert lookups.count(name) >= 2  # the map changed: looked up again, and found
            assert _litellm_lean._model_info(name, "openai")["input_cost_per_token"] == 1e-6
        finally:
            litellm.model_cost.pop(name, None)
            litellm.utils._invalidate_model_cost_lowercase_map()
    assert costs[0] is not None and costs[0] > 0
