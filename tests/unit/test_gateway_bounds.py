"""Every byte and second an agent sends the gateway is bounded on our side (issue 45): a compressed
body, a body past the cap, a body that never finishes arriving, and more calls at once than a token
may make are each refused in the provider's error form, and the other tokens' calls are answered
meanwhile."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
from collections.abc import Sequence
from typing import Any

import aiohttp
import pytest

import agents.gateway.server as server
from agents.gateway import LLMGateway
from agents.models import OracleModel
from agents.strategies.external import ModelHandle
from tasks import load_tasks

CHAT = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}


class SlowModel:
    """Answers after `delay` seconds; counts the calls it is answering at once."""

    name = "slow"

    def __init__(self, delay: float) -> None:
        self.delay, self.now, self.most = delay, 0, 0

    async def complete(self, messages: Sequence[Any], *, task: Any, turn: int, style: str = "fenced") -> str:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.now -= 1
        return "an answer"


def task() -> Any:
    return load_tasks("starter-bash")[0]


async def post(session: aiohttp.ClientSession, url: str, token: str, data: bytes, **headers: str) -> tuple[int, dict]:
    async with session.post(f"{url}/v1/chat/completions", data=io.BytesIO(data),
                            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **headers}) as r:
        return r.status, await r.json()


async def test_a_compressed_or_oversized_body_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(server, "MAX_BODY", 1 << 20)
    async with LLMGateway.serve() as gateway, aiohttp.ClientSession() as session:
        door = gateway.open(ModelHandle(SlowModel(0), task()))
        bomb = gzip.compress(json.dumps({**CHAT, "pad": "0" * (64 << 20)}).encode())  # 64 MB in 64 KB
        status, body = await post(session, gateway.url, door.token, bomb, **{"Content-Encoding": "gzip"})
        assert status == 415 and "uncompressed" in body["error"]["message"]
        status, body = await post(session, gateway.url, door.token, json.dumps({**CHAT, "pad": "0" * (2 << 20)}).encode())
        assert status == 413 and "larger than 1 MB" in body["error"]["message"]
        status, body = await post(session, gateway.url, door.token, json.dumps(CHAT).encode())
        assert status == 200 and body["choices"][0]["message"]["content"] == "an answer"


async def test_a_body_that_never_finishes_is_refused_after_its_time(monkeypatch):
    monkeypatch.setattr(server, "BODY_TIMEOUT", 0.5)
    async with LLMGateway.serve() as gateway:
        door = gateway.open(ModelHandle(SlowModel(0), task()))
        host, port = gateway.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {door.token}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\"").encode())
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout=30)
        writer.close()
        assert status_line.split()[1] == b"408", status_line


async def test_a_token_has_at_most_its_calls_in_flight_and_the_others_are_answered_meanwhile():
    async with LLMGateway.serve() as gateway, aiohttp.ClientSession() as session:
        greedy, honest = SlowModel(1.0), SlowModel(0)
        greedy_door = gateway.open(ModelHandle(greedy, task()))
        honest_door = gateway.open(ModelHandle(honest, task()))
        data = json.dumps(CHAT).encode()
        flood = [asyncio.create_task(post(session, gateway.url, greedy_door.token, data)) for _ in range(12)]
        await asyncio.sleep(0.3)
        assert (await post(session, gateway.url, honest_door.token, data))[0] == 200  # while the flood waits
        statuses = sorted(status for status, _ in await asyncio.gather(*flood))
    assert statuses.count(200) == server.MAX_IN_FLIGHT and statuses.count(429) == 12 - server.MAX_IN_FLIGHT, statuses
    assert greedy.most == server.MAX_IN_FLIGHT


@pytest.mark.parametrize("name", ["KEEPALIVE", "BODY_TIMEOUT", "MAX_BODY", "MAX_IN_FLIGHT"])
def test_every_bound_is_finite_and_small(name):
    assert 0 < getattr(server, name) <= {"KEEPALIVE": 60, "BODY_TIMEOUT": 60, "MAX_BODY": 32 << 20,
                                          "MAX_IN_FLIGHT": 16}[name]


@pytest.mark.parametrize(("route", "tool"), [
    ("/v1/chat/completions", {"type": "web_search_preview"}),
    ("/v1/chat/completions", {"type": "mcp", "server_label": "x", "server_url": "http://169.254.169.254/"}),
    ("/v1/chat/completions", {"type": "code_interpreter", "container": {"type": "auto"}}),
    ("/v1/messages", {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}),
    ("/v1/messages", {"type": "code_execution_20250522", "name": "code_execution"}),
])
async def test_a_providers_hosted_tool_is_refused_and_function_tools_are_served(route, tool):
    """A hosted tool would browse or run code at the provider, outside the container's network and
    the budget (litellm maps them): only function (client) tools pass."""
    function = ({"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
                if route == "/v1/chat/completions" else {"name": "bash", "input_schema": {"type": "object"}})
    async with LLMGateway.serve() as gateway, aiohttp.ClientSession() as session:
        door = gateway.open(ModelHandle(OracleModel(), task()))
        headers = {"Authorization": f"Bearer {door.token}", "anthropic-version": "2023-06-01"}
        body = {**CHAT, "max_tokens": 10}
        async with session.post(f"{gateway.url}{route}", json={**body, "tools": [function, tool]}, headers=headers) as r:
            refused = (r.status, json.dumps(await r.json()))
        async with session.post(f"{gateway.url}{route}", json={**body, "tools": [function]}, headers=headers) as r:
            served = r.status
    assert refused[0] == 400 and ("only function tools" in refused[1] or "the provider runs" in refused[1]), refused
    assert served == 200
