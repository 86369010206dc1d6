"""One error map per API (agents/wire): the gateway that agents of yours call and the scripted
provider that tests and the `local` model use answer the same status with the same error body,
asked over HTTP, because both build it with the same module. Before agents/wire each had its own
map: the gateway's Anthropic map had no 403 or 413, the scripted one no 402, and the scripted
OpenAI errors were all of one made-up type."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

import agents.gateway.server as gateway_server
import agents.llm.server as scripted_server
from agents.base import AnswerStyle, Message
from agents.gateway import LLMGateway
from agents.llm.errors import ModelError
from agents.llm.server import ScriptedLLMServer, ServerConfig
from agents.strategies.external import ModelHandle
from agents.wire import anthropic_messages, openai_chat, openai_responses
from tasks import Task, load_tasks

PATHS = ("/v1/chat/completions", "/v1/messages")
REFUSED_KEY = "sk-refused-key"
CAP = 1 << 20  # the body cap both servers are run with: the scripted server's own
CHAT = {"model": "any", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
# A request of each status both servers can be made to answer: how to ask for it, and with which key.
ASKS = {400: (b"not json", True), 401: (json.dumps(CHAT).encode(), False), 402: (json.dumps(CHAT).encode(), True),
        413: (json.dumps({**CHAT, "pad": "0" * 2 * CAP}).encode(), True)}


class SpentModel:
    """A model whose every call finds the sweep's budget spent, as the LLM client reports it."""

    name = "spent"

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int,
                       style: AnswerStyle = "fenced") -> str:
        raise ModelError(self.name, "the sweep's budget is spent", kind="budget")


async def ask(http: aiohttp.ClientSession, url: str, body: bytes, key: str) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {key}", "x-api-key": key, "Content-Type": "application/json"}
    async with http.post(url, data=io.BytesIO(body), headers=headers) as response:
        return response.status, await response.json(content_type=None)


@asynccontextmanager
async def spent_gateway(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, str]]:
    """The gateway, its base URL and the token of an episode whose model's budget is spent."""
    monkeypatch.setattr(gateway_server, "MAX_BODY", CAP)
    task = load_tasks("starter-bash")[0]
    async with LLMGateway.serve() as served:
        yield served.url, served.open(ModelHandle(SpentModel(), task)).token


async def gateway_errors(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, int], Any]:
    found = {}
    # The client inside the server: its connections close first, so no refused body lingers on.
    async with spent_gateway(monkeypatch) as (url, token), aiohttp.ClientSession() as http:
        for path in PATHS:
            for status, (body, keyed) in ASKS.items():
                found[path, status] = await ask(http, url + path, body, token if keyed else REFUSED_KEY)
    return found


async def scripted_errors() -> dict[tuple[str, int], Any]:
    found = {}
    async with ScriptedLLMServer(ServerConfig(rejected_keys={REFUSED_KEY})) as server, aiohttp.ClientSession() as http:
        for path in PATHS:
            for status, (body, keyed) in ASKS.items():
                if status == 402:  # the scripted provider has no budget: its spent one is scripted
                    server.fail_next(status=402, message="the budget is spent")
                key = "sk-good-key" if keyed else REFUSED_KEY
                found[path, status] = await ask(http, server.base_url + path, body, key)
    return found


def shape(body: Any) -> Any:
    """An error body without its words (`message`, `code`): the keys at each level and the error's type."""
    if not isinstance(body, dict):
        return body
    return {key: shape(value) for key, value in body.items() if key not in ("message", "code")}


async def test_both_servers_answer_a_status_with_the_same_error_body(monkeypatch: pytest.MonkeyPatch) -> None:
    assert scripted_server.MAX_BODY == CAP
    gateway, scripted = await gateway_errors(monkeypatch), await scripted_errors()
    assert gateway.keys() == scripted.keys()
    for (path, status), (gateway_status, gateway_body) in gateway.items():
        scripted_status, scripted_body = scripted[path, status]
        assert (gateway_status, scripted_status) == (status, status), (path, gateway_body, scripted_body)
        assert shape(gateway_body) == shape(scripted_body), (path, status)
        wire = openai_chat.error if path == "/v1/chat/completions" else anthropic_messages.error
        assert shape(gateway_body) == shape(wire(status, "")), (path, status)


def test_the_servers_import_one_map_per_api() -> None:
    for server in (gateway_server, scripted_server):
        assert getattr(server, "openai_chat") is openai_chat
        assert getattr(server, "anthropic_messages") is anthropic_messages
    assert openai_responses.error is openai_chat.error  # the Responses API answers errors as chat completions do
    for module in (gateway_server, scripted_server):  # and neither keeps a map of its own
        assert not [name for name, value in vars(module).items() if name.endswith("ERRORS") and isinstance(value, Mapping)]


def test_the_maps_are_the_providers_documented_types() -> None:
    assert dict(anthropic_messages.ERRORS) == {
        400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
        404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}
    assert anthropic_messages.error(500, "x") == {"type": "error", "error": {"type": "api_error", "message": "x"}}
    assert openai_chat.error(401, "x", "invalid_api_key") == {"error": {
        "message": "x", "type": "authentication_error", "param": None, "code": "invalid_api_key"}}
    assert openai_chat.error(418, "x")["error"]["type"] == "api_error"
