"""The scripted provider itself, over raw HTTP: answers, failures, rpm limit, records, CLI."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time

import aiohttp

from agents.llm.server import Rule, ScriptedLLMServer, ScriptedToolCall, ServerConfig


def _chat(text: str, model: str = "m") -> dict[str, object]:
    return {"model": model, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]}


async def test_rules_pick_the_answer_and_requests_are_recorded() -> None:
    config = ServerConfig(rules=[Rule(pattern=r"list files", answer="ls -la")], default_answer="echo hi")
    async with ScriptedLLMServer(config) as server, aiohttp.ClientSession() as http:
        assert server.base_url.startswith("http://127.0.0.1:")
        async with http.post(f"{server.base_url}/v1/chat/completions", json=_chat("please list files"),
                             headers={"Authorization": "Bearer k1"}) as r:
            body = await r.json()
        async with http.post(f"{server.base_url}/chat/completions", json=_chat("other")) as r2:
            other = await r2.json()
    assert body["object"] == "chat.completion" and body["model"] == "m"
    assert body["choices"][0]["message"]["content"] == "ls -la"
    assert body["choices"][0]["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert other["choices"][0]["message"]["content"] == "echo hi"
    assert [(r.path, r.api_key, r.status) for r in server.requests] == [
        ("/v1/chat/completions", "k1", 200), ("/chat/completions", None, 200)]


async def test_a_server_nobody_asks_keeps_no_log_but_still_answers_and_limits() -> None:
    config = ServerConfig(rpm=2, default_answer="echo hi")
    async with ScriptedLLMServer(config, keep_requests=False) as server, aiohttp.ClientSession() as http:
        statuses = []
        for _ in range(3):
            async with http.post(f"{server.base_url}/v1/chat/completions", json=_chat("x")) as r:
                statuses.append(r.status)
                if r.status == 200:
                    assert (await r.json())["choices"][0]["message"]["content"] == "echo hi"
    assert statuses == [200, 200, 429] and server.requests == []


async def test_scripted_failures_are_consumed_in_order() -> None:
    async with ScriptedLLMServer(ServerConfig(rejected_keys={"bad"})) as server, aiohttp.ClientSession() as http:
        server.fail_next(1, status=429, retry_after=3)
        server.fail_next(1, kind="malformed")
        url = f"{server.base_url}/v1/chat/completions"
        async with http.post(url, json=_chat("x")) as r:
            assert (r.status, r.headers["Retry-After"]) == (429, "3")
        async with http.post(url, json=_chat("x")) as r:
            assert r.status == 200 and (await r.text()).endswith("[")
        async with http.post(url, json=_chat("x"), headers={"Authorization": "Bearer bad"}) as r:
            assert r.status == 401
        async with http.post(url, data=b"not json") as r:
            assert r.status == 400
        async with http.post(url, json=_chat("x")) as r:
            assert r.status == 200


async def test_rpm_limit_answers_429_with_retry_after() -> None:
    async with ScriptedLLMServer(ServerConfig(rpm=2, window=60)) as server, aiohttp.ClientSession() as http:
        statuses = []
        for _ in range(3):
            async with http.post(f"{server.base_url}/v1/chat/completions", json=_chat("x")) as r:
                statuses.append((r.status, r.headers.get("Retry-After")))
    assert statuses[:2] == [(200, None), (200, None)]
    assert statuses[2][0] == 429 and 59 <= int(statuses[2][1]) <= 60


async def test_latency_is_applied() -> None:
    async with ScriptedLLMServer(ServerConfig(latency=0.3)) as server, aiohttp.ClientSession() as http:
        started = time.monotonic()
        async with http.post(f"{server.base_url}/v1/chat/completions", json=_chat("x")) as r:
            assert r.status == 200
        assert time.monotonic() - started >= 0.3


async def test_runs_as_a_module() -> None:
    with socket.socket() as s:  # a free port; the tiny race with other binders is acceptable in tests
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agents.llm.server", "--port", str(port), "--rpm", "5", "--latency", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        assert f"127.0.0.1:{port}" in line.decode()
        async with aiohttp.ClientSession() as http, \
                http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=_chat("x")) as r:
            assert (await r.json())["choices"][0]["message"]["content"] == "OK"
    finally:
        proc.terminate()
        await proc.wait()


def _messages(content: object, **extra: object) -> dict[str, object]:
    """An Anthropic Messages API request, as litellm's `anthropic/` provider sends one."""
    return {"model": "claude-m", "system": [{"type": "text", "text": "be brief"}], "max_tokens": 64,
            "messages": [{"role": "user", "content": content}], **extra}


async def test_anthropic_messages_are_answered_in_anthropic_format() -> None:
    config = ServerConfig(rules=[Rule(pattern=r"list files", answer="ls -la"), Rule(pattern=r"sunny", answer="nice")],
                          answers={"task-7": "echo seven"})
    async with ScriptedLLMServer(config) as server, aiohttp.ClientSession() as http:
        async with http.post(f"{server.base_url}/v1/messages", json=_messages("please list files"),
                             headers={"x-api-key": "k1", "anthropic-version": "2023-06-01"}) as r:
            body = await r.json()
        result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]}]
        async with http.post(f"{server.base_url}/messages", json=_messages(result)) as r2:
            after_tool = await r2.json()
        async with http.post(f"{server.base_url}/v1/messages", json=_messages("list files", metadata={"user_id": "task-7"})) as r3:
            by_user = await r3.json()
    assert {k: body[k] for k in ("type", "role", "model", "content", "stop_reason", "stop_sequence")} == {
        "type": "message", "role": "assistant", "model": "claude-m", "content": [{"type": "text", "text": "ls -la"}],
        "stop_reason": "end_turn", "stop_sequence": None}
    assert body["id"].startswith("msg_") and body["usage"] == {"input_tokens": 3 + 2, "output_tokens": 2}
    assert after_tool["content"] == [{"type": "text", "text": "nice"}]  # a tool_result's text is matched
    assert by_user["content"] == [{"type": "text", "text": "echo seven"}]  # litellm sends `user` as metadata.user_id
    assert [(r.path, r.api_key) for r in server.requests] == [("/v1/messages", "k1"), ("/messages", None), ("/v1/messages", None)]


async def test_anthropic_errors_have_anthropic_bodies() -> None:
    async with ScriptedLLMServer(ServerConfig(rejected_keys={"bad"}, rpm=1)) as server, aiohttp.ClientSession() as http:
        url = f"{server.base_url}/v1/messages"
        server.fail_next(1, status=529, message="Overloaded")
        server.fail_next(1, kind="malformed")
        seen = []
        for headers in ({}, {}, {"x-api-key": "bad"}, {}, {}):
            async with http.post(url, json=_messages("x"), headers=headers) as r:
                seen.append((r.status, r.headers.get("Retry-After"), await r.text()))
    (overloaded, _, body), (malformed, _, broken), (auth, _, refused), (ok, _, _), (limited, wait, slow) = seen
    assert (overloaded, json.loads(body)) == (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert malformed == 200 and broken.endswith("[")
    assert auth == 401 and json.loads(refused)["error"] == {"type": "authentication_error",
                                                           "message": "Incorrect API key provided: bad"}
    assert ok == 200 and limited == 429 and 59 <= int(wait) <= 60
    assert json.loads(slow) == {"type": "error", "error": {"type": "rate_limit_error", "message": "rate limit exceeded"}}


async def test_scripted_tool_calls_in_both_formats() -> None:
    calls = [ScriptedToolCall(name="ls", arguments='{"path": "/tmp"}'), ScriptedToolCall(name="run", arguments="{not json")]
    rules = [Rule(pattern="files", tool_calls=calls), Rule(pattern="weather", answer="Looking.", tool_calls=calls[:1])]
    config = ServerConfig(rules=rules, default_tool_calls=[ScriptedToolCall(name="submit", arguments="[1]")])
    async with ScriptedLLMServer(config) as server, aiohttp.ClientSession() as http:
        async def post(path: str, body: dict[str, object]) -> dict[str, object]:
            async with http.post(f"{server.base_url}{path}", json=body) as r:
                return await r.json()

        openai = await post("/v1/chat/completions", _chat("list files"))
        anthropic = await post("/v1/messages", _messages("list files"))
        with_text = await post("/v1/messages", _messages("weather?"))
        default = await post("/v1/messages", _messages("anything else"))
    choice = openai["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert [(c["type"], c["function"]) for c in choice["message"]["tool_calls"]] == [
        ("function", {"name": "ls", "arguments": '{"path": "/tmp"}'}), ("function", {"name": "run", "arguments": "{not json"})]
    assert anthropic["stop_reason"] == "tool_use"
    assert [(b["type"], b["name"], b["input"]) for b in anthropic["content"]] == [
        ("tool_use", "ls", {"path": "/tmp"}), ("tool_use", "run", {"_raw": "{not json"})]
    assert [b["type"] for b in with_text["content"]] == ["text", "tool_use"] and with_text["content"][0]["text"] == "Looking."
    assert [(b["type"], b.get("text"), b.get("input")) for b in default["content"]] == [
        ("text", "OK", None), ("tool_use", None, {"_raw": "[1]"})]
    ids = [b["id"] for b in anthropic["content"]] + [c["id"] for c in choice["message"]["tool_calls"]]
    assert len(set(ids)) == 4


async def test_a_tool_message_is_what_openai_rules_match_when_it_is_last() -> None:
    config = ServerConfig(rules=[Rule(pattern="^sunny", answer="nice"), Rule(pattern="weather", answer="calling")])
    turn = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                   "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    async with ScriptedLLMServer(config) as server, aiohttp.ClientSession() as http:
        async with http.post(f"{server.base_url}/v1/chat/completions", json={"model": "m", "messages": turn}) as r:
            after_tool = await r.json()
        async with http.post(f"{server.base_url}/v1/chat/completions", json={"model": "m", "messages": turn[:1]}) as r:
            before = await r.json()
    assert after_tool["choices"][0]["message"]["content"] == "nice"
    assert before["choices"][0]["message"]["content"] == "calling"


async def test_a_server_that_echoes_the_key_puts_it_into_everything_it_returns() -> None:
    calls = [ScriptedToolCall(name="bash", arguments='{"command": "ls"}'), ScriptedToolCall(name="run", arguments="{x")]
    config = ServerConfig(echo_key=True, default_answer="ls", default_tool_calls=calls)
    async with ScriptedLLMServer(config) as server, aiohttp.ClientSession() as http:
        async with http.post(f"{server.base_url}/v1/chat/completions", json=_chat("x"),
                             headers={"Authorization": "Bearer k-echo"}) as r:
            openai, openai_header = await r.json(), r.headers["X-Echoed-Authorization"]
        async with http.post(f"{server.base_url}/v1/messages", json=_messages("x"), headers={"x-api-key": "k-echo"}) as r:
            anthropic, anthropic_header = await r.json(), r.headers["X-Echoed-Authorization"]
        async with http.post(f"{server.base_url}/v1/chat/completions", json=_chat("x")) as r:
            keyless = await r.json()  # nothing to echo
    message = openai["choices"][0]["message"]
    assert (openai["model"], openai_header, message["content"]) == ("Bearer k-echo", "Bearer k-echo", "ls\nk-echo")
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"command": "ls", "api_key": "k-echo"}',
                                                                           "{x k-echo"]
    assert (anthropic["model"], anthropic_header) == ("k-echo", "k-echo")
    assert [b.get("text") or b["input"] for b in anthropic["content"]] == [
        "ls\nk-echo", {"command": "ls", "api_key": "k-echo"}, {"_raw": "{x k-echo"}]
    assert keyless["model"] == "m" and keyless["choices"][0]["message"]["content"] == "ls"
