"""A scripted, OpenAI-compatible chat-completions server for tests and benchmarks.

It plays the provider: a fixed latency, an enforced requests-per-minute limit (429 + Retry-After),
failures scripted per request or per API key, and answers chosen by regex on the last user
message. It records every request it saw so tests can assert on what the client really sent.
Only ever binds 127.0.0.1.

    async with ScriptedLLMServer(ServerConfig(rules=[Rule(pattern="ls", answer="ls -la")])) as server:
        ...  # litellm model "openai/<any>", api_base=f"{server.base_url}/v1"

Standalone: `python -m agents.llm.server --port 8123 --rpm 120 --latency 0.2`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, Field

HOST = "127.0.0.1"


class Rule(BaseModel):
    """Answer `answer` when `pattern` (re.search) matches the last user message."""

    pattern: str
    answer: str


class Failure(BaseModel):
    """One scripted failure, consumed by the next request that reaches the server."""

    kind: Literal["status", "malformed"] = "status"
    status: int = Field(500, description="HTTP status for kind='status'")
    retry_after: float | None = Field(None, description="Retry-After header, seconds")
    message: str = "scripted failure"


class ServerConfig(BaseModel):
    """How the simulated provider behaves; every field may be changed between requests."""

    latency: float = Field(0.0, ge=0, description="seconds each answered request takes")
    rpm: int | None = Field(None, ge=1, description="requests accepted per sliding minute; None = unlimited")
    window: float = Field(60.0, gt=0, description="length of the rpm window in seconds")
    rules: list[Rule] = Field(default_factory=list)
    answers: dict[str, str] = Field(default_factory=dict,
                                    description="answer by the request's `user` field, before the rules")
    default_answer: str = "OK"
    served_model: str | None = Field(None, description="model name to report; default: the requested one")
    rejected_keys: set[str] = Field(default_factory=set, description="API keys answered with 401")
    failures: list[Failure] = Field(default_factory=list, description="queue for the next requests")


@dataclass(frozen=True)
class SeenRequest:
    """What the server received (after routing), in arrival order."""

    path: str
    api_key: str | None
    body: dict[str, Any] | None
    status: int
    at: float = field(default_factory=time.monotonic)
    user_agent: str | None = None  # which HTTP client sent it


def _words(text: str) -> int:
    # A stable, dependency-free stand-in for a tokenizer: the client only needs consistent counts.
    return max(1, len(text.split()))


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


class ScriptedLLMServer:
    """An aiohttp server on 127.0.0.1; `async with` starts it on a free port and stops it."""

    def __init__(self, config: ServerConfig | None = None, *, port: int = 0, keep_requests: bool = True) -> None:
        self.config = config or ServerConfig()
        self.requests: list[SeenRequest] = []  # every request, unless keep_requests is False
        self.arrived = 0  # requests that reached a handler, answered or not (yet)
        # A server nobody asks (standalone, a sweep's local model) keeps none: over a long run the
        # log would grow without bound, and with it the garbage collector's pauses.
        self._keep = keep_requests
        self._port = port
        self._accepted: collections.deque[float] = collections.deque()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    def fail_next(self, n: int = 1, **failure: Any) -> None:
        """Queue `n` identical failures, e.g. `fail_next(2, status=429, retry_after=1)`."""
        self.config.failures.extend(Failure(**failure) for _ in range(n))

    async def __aenter__(self) -> ScriptedLLMServer:
        app = web.Application()
        for path in ("/v1/chat/completions", "/chat/completions"):
            app.router.add_post(path, self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, self._port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://{HOST}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.arrived += 1
        key = request.headers.get("Authorization", "").removeprefix("Bearer ").strip() or None
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._record(request, key, None, _error(400, "request body is not JSON"))
        if key in self.config.rejected_keys:
            # Echo the key as some providers do, so clients' redaction is tested for real.
            return self._record(request, key, body, _error(401, f"Incorrect API key provided: {key}", "invalid_api_key"))
        if self.config.failures:
            return self._record(request, key, body, _scripted(self.config.failures.pop(0)))
        limited = self._over_rpm()
        if limited is not None:
            return self._record(request, key, body, limited)
        await asyncio.sleep(self.config.latency)  # the simulated provider's thinking time
        return self._record(request, key, body, web.json_response(self._completion(body)))

    def _record(self, request: web.Request, key: str | None, body: Any, response: web.StreamResponse) -> web.StreamResponse:
        if self._keep:
            self.requests.append(SeenRequest(request.path, key, body if isinstance(body, dict) else None,
                                             response.status, user_agent=request.headers.get("User-Agent")))
        return response

    def _over_rpm(self) -> web.Response | None:
        if self.config.rpm is None:
            return None
        now = time.monotonic()
        while self._accepted and self._accepted[0] <= now - self.config.window:
            self._accepted.popleft()
        if len(self._accepted) >= self.config.rpm:
            wait = self._accepted[0] + self.config.window - now
            return _error(429, "rate limit exceeded", "rate_limit_exceeded", retry_after=wait)
        self._accepted.append(now)
        return None

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        last_user = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        answer = self.config.answers.get(str(body.get("user")))
        if answer is None:
            answer = next((r.answer for r in self.config.rules if re.search(r.pattern, last_user)),
                          self.config.default_answer)
        prompt = sum(_words(_text(m.get("content"))) for m in messages)
        completion = _words(answer)
        return {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.config.served_model or body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }


def _error(status: int, message: str, code: str | None = None, *, retry_after: float | None = None) -> web.Response:
    headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if retry_after is not None else None
    payload = {"error": {"message": message, "type": "scripted_error", "code": code or str(status)}}
    return web.json_response(payload, status=status, headers=headers)


def _scripted(failure: Failure) -> web.Response:
    if failure.kind == "malformed":
        return web.Response(status=200, text='{"id": "chatcmpl-broken", "choices": [', content_type="application/json")
    return _error(failure.status, failure.message, retry_after=failure.retry_after)


async def _serve(config: ServerConfig, port: int) -> None:
    async with ScriptedLLMServer(config, port=port, keep_requests=False) as server:
        print(f"scripted LLM server on {server.base_url}/v1", flush=True)
        await asyncio.Event().wait()  # until Ctrl-C cancels the loop


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server (127.0.0.1 only)")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--rpm", type=int, default=None, help="requests per minute before 429")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    parser.add_argument("--answer", default="OK", help="default answer text")
    args = parser.parse_args(argv)
    config = ServerConfig(latency=args.latency, rpm=args.rpm, default_answer=args.answer)
    try:
        asyncio.run(_serve(config, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
