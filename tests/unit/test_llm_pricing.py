"""Prices through litellm's public API, with litellm, openai and httpx left as they ship: an unmapped
model costs None (unknown) on every call, mapped models and the caller's own prices are priced,
and a model registered later is priced from then on. Real litellm, the scripted server over HTTP."""

from __future__ import annotations

import uuid
from typing import Any

from agents.llm.server import ScriptedLLMServer
from agents.llm.transport import InProcessTransport, Request
from tests.lazy import lazy

litellm = lazy("agents.llm._litellm", "litellm")

USER = [{"role": "user", "content": "hello"}]


async def _calls(server: ScriptedLLMServer, model: str, n: int, **params: Any) -> list[float | None]:
    transport = InProcessTransport()
    request = Request(model=model, messages=USER, params=params, api_base=f"{server.base_url}/v1", api_key="k")
    return [(await transport.call(request)).cost_usd for _ in range(n)]


async def test_an_unmapped_model_is_unpriced_on_every_call() -> None:
    model = f"openai/local-{uuid.uuid4().hex[:8]}"
    async with ScriptedLLMServer() as server:
        assert await _calls(server, model, 3) == [None, None, None]


async def test_mapped_models_and_custom_prices_are_priced_every_call() -> None:
    async with ScriptedLLMServer() as server:
        costs = await _calls(server, "openai/gpt-4o-mini", 3)
        assert all(c is not None and c > 0 for c in costs)
        model = f"openai/local-{uuid.uuid4().hex[:8]}"
        assert await _calls(server, model, 1) == [None]
        custom = await _calls(server, model, 2, input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    assert all(c is not None and c > 0 for c in custom)  # the caller's own prices still count


async def test_a_model_registered_later_is_priced_from_then_on() -> None:
    name = f"local-{uuid.uuid4().hex[:8]}"
    async with ScriptedLLMServer() as server:
        assert await _calls(server, f"openai/{name}", 2) == [None, None]
        litellm.register_model({name: {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
                                       "litellm_provider": "openai", "mode": "chat"}})
        try:
            costs = await _calls(server, f"openai/{name}", 1)
        finally:
            litellm.model_cost.pop(name, None)
            litellm.utils._invalidate_model_cost_lowercase_map()
    assert costs[0] is not None and costs[0] > 0
