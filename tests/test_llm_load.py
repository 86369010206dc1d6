"""Many callers against a rate-limited provider: the client's own rpm keeps everyone under it."""

from __future__ import annotations

import asyncio

import pytest

from agents.llm import LLMClient, ModelLimits, ModelSpec, RetryPolicy
from agents.llm.server import ScriptedLLMServer, ServerConfig

MODEL = "openai/gpt-4o-mini"


@pytest.mark.slow
async def test_100_callers_under_120_rpm_all_complete() -> None:
    async with ScriptedLLMServer(ServerConfig(rpm=120, latency=0.05)) as server:
        spec = ModelSpec(name=MODEL, api_base=f"{server.base_url}/v1", api_key="sk-load-test",
                         limits=ModelLimits(rpm=120, max_concurrency=16))
        client = LLMClient([spec], retry=RetryPolicy(max_total_wait=180))
        started = asyncio.get_running_loop().time()
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(client.complete(MODEL, [{"role": "user", "content": f"task {i}"}]))
                     for i in range(100)]
        elapsed = asyncio.get_running_loop().time() - started
    stats = client.stats(MODEL)
    assert all(t.result().text == "OK" for t in tasks)
    assert (stats.succeeded, stats.failed, stats.in_flight, stats.waiting) == (100, 0, 0, 0)
    assert stats.rate_limited <= 2  # paced by the client, so the provider barely ever refuses
    assert len(server.requests) == 100 + stats.rate_limited
    assert 40 < elapsed < 70, elapsed
