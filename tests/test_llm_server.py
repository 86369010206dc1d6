"""The scripted provider itself, over raw HTTP: answers, failures, rpm limit, records, CLI."""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import aiohttp

from agents.llm.server import Rule, ScriptedLLMServer, ServerConfig


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
        async with aiohttp.ClientSession() as http:
            async with http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=_chat("x")) as r:
                assert (await r.json())["choices"][0]["message"]["content"] == "OK"
    finally:
        proc.terminate()
        await proc.wait()
