"""A scripted LLM provider: OpenAI's chat completions and Anthropic's Messages API, served over real HTTP
to the `local` models of a sweep (no key, no network), to tests and to benchmarks.

It plays the provider: a fixed latency, an enforced requests-per-minute limit (429 + Retry-After),
failures scripted per request or per API key, and answers (text, tool calls) chosen by regex on the
last user message. It records every request it saw so tests can assert on what the client really
sent. With `echo_key` it also plays a provider that misbehaves: it echoes the request's key into
everything it returns. Only ever binds 127.0.0.1. Its replies and error bodies are built by
agents/wire, as the gateway's are: a client meets the same bodies, and the same error type for a
status, from either server.

    async with ScriptedLLMServer(ServerConfig(rules=[Rule(pattern="ls", answer="ls -la")])) as server:
        ...  # litellm "openai/<any>" with api_base=f"{server.base_url}/v1",
             # or "anthropic/<any>" with api_base=server.base_url (litellm appends /v1/messages)

Standalone: `python -m agents.llm.server --port 8123 --rpm 120 --latency 0.2` (both formats).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import itertools
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from aiohttp import web
from pydantic import BaseModel, Field

from agents.llm.transport import ToolCall
from agents.own import Answer
from agents.wire import anthropic_messages, openai_chat
from agents.wire.calls import Usage

HOST = "127.0.0.1"
MAX_BODY = 1 << 20  # bytes of a request's body (aiohttp's default); a larger one is a 413 in the API's form


class ScriptedToolCall(BaseModel):
    """A tool call the server answers with. `arguments` is the raw JSON text: the OpenAI format
    sends it as it is (so a test can script invalid JSON); the Anthropic format sends it parsed as
    the block's `input`, and text that is not a JSON object as `{"_raw": arguments}` (agents/wire)."""

    name: str
    arguments: str


class Rule(BaseModel):
    """Answer `answer`, and call `tool_calls`, when `pattern` (re.search) matches the last user message."""

    pattern: str
    answer: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)


class Failure(BaseModel):
    """One scripted failure, consumed by the next request that reaches the server.

    The body is the API's (agents/wire), its error type following the status (on /v1/messages
    529: overloaded_error).
    """

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
                                    description="answer by the request's user (`user`, or Anthropic's "
                                                "`metadata.user_id`), before the rules")
    default_answer: str = "OK"
    default_tool_calls: list[ScriptedToolCall] = Field(default_factory=list, description="with the default answer")
    tool_answers: dict[str, list[ScriptedToolCall]] = Field(default_factory=dict,
                                                            description="tool calls by the request's user, before "
                                                                        "`answers`")
    served_model: str | None = Field(None, description="model name to report; default: the requested one")
    rejected_keys: set[str] = Field(default_factory=set, description="API keys answered with 401")
    echo_key: bool = Field(False, description="echo the request's key into every answer: the Authorization header "
                                              "as sent (`Bearer <key>`) as the model name and in a response header, "
                                              "the key alone after the text and in each tool call's arguments")
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


@dataclass(frozen=True)
class _Answer:
    """What the server says to one request, in either format."""

    text: str
    tool_calls: list[ScriptedToolCall]
    number: int  # the server's count of answers, for unique ids

    @property
    def words(self) -> int:
        return _words(" ".join([self.text, *(call.arguments for call in self.tool_calls)]))

    def echoing(self, key: str) -> _Answer:
        """This answer with `key` after its text and in every tool call's arguments: in a JSON
        object as one more field (so the call stays valid and its tool still reads it), else after them."""
        calls = [ScriptedToolCall(name=call.name, arguments=_with_key(call.arguments, key)) for call in self.tool_calls]
        return _Answer(f"{self.text}\n{key}" if self.text else key, calls, self.number)

    def wire(self, prefix: str) -> Answer:
        """This answer as the wire modules take it, each call's id `{prefix}_{number}_{index}`:
        deterministic, so tests can name the ids a client sends back."""
        calls = tuple(ToolCall(f"{prefix}_{self.number}_{i}", call.name, call.arguments)
                      for i, call in enumerate(self.tool_calls))
        return Answer(self.text, calls)


def _with_key(arguments: str, key: str) -> str:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        parsed = None
    return json.dumps({**parsed, "api_key": key}) if isinstance(parsed, dict) else f"{arguments} {key}"


def _words(text: str) -> int:
    # A stable, dependency-free stand-in for a tokenizer: the client only needs consistent counts.
    return max(1, len(text.split()))


def _text(content: Any) -> str:
    """The text of a message's content: a string, OpenAI content parts, or Anthropic blocks
    (`tool_result` blocks count with their own content)."""
    if not isinstance(content, list):
        return str(content or "")
    parts = (_text(p.get("content")) if p.get("type") == "tool_result" else str(p.get("text", ""))
             for p in content if isinstance(p, dict))
    return " ".join(parts)


def _last_user_text(body: dict[str, Any], roles: tuple[str, ...]) -> str:
    messages = body.get("messages") or []
    return next((_text(m.get("content")) for m in reversed(messages) if m.get("role") in roles), "")


def _user(body: dict[str, Any]) -> str:
    """Whom the request is for: OpenAI's `user` (also what an `extra_body` adds), or litellm's
    `user` as Anthropic's `metadata.user_id`."""
    metadata = body.get("metadata")
    return str(body.get("user") or (metadata.get("user_id") if isinstance(metadata, dict) else None))


def _prompt_words(body: dict[str, Any]) -> int:
    system = body.get("system")  # Anthropic's; OpenAI's is one of the messages
    return sum(_words(_text(m.get("content"))) for m in body.get("messages") or []) + (_words(_text(system)) if system else 0)


class _OpenAI:
    """OpenAI's chat-completions format."""

    paths = ("/v1/chat/completions", "/chat/completions")
    broken = '{"id": "chatcmpl-broken", "choices": ['  # a body cut short
    user_roles = ("user", "tool")  # a tool's result is what the model answers next, as a user's message is

    @staticmethod
    def key(headers: Mapping[str, str]) -> str | None:
        return headers.get("Authorization", "").removeprefix("Bearer ").strip() or None

    @staticmethod
    def error(status: int, message: str, code: str | None = None, *, retry_after: float | None = None) -> web.Response:
        body = openai_chat.error(status, message, code)
        return web.json_response(body, status=status, headers=_retry_after(retry_after))

    @staticmethod
    def reply(body: dict[str, Any], model: str, answer: _Answer) -> dict[str, Any]:
        return openai_chat.completion(answer.wire("call_scripted"), model, Usage(_prompt_words(body), answer.words),
                                      reply_id=f"chatcmpl-scripted-{answer.number}")


class _Anthropic:
    """Anthropic's Messages API, the subset litellm's `anthropic/` provider uses."""

    paths = ("/v1/messages", "/messages")
    broken = '{"id": "msg_broken", "type": "message", "content": ['
    user_roles = ("user",)  # tool results come as a user's tool_result blocks

    @staticmethod
    def key(headers: Mapping[str, str]) -> str | None:
        return headers.get("x-api-key") or _OpenAI.key(headers)  # litellm can send a Bearer to a custom base

    @staticmethod
    def error(status: int, message: str, code: str | None = None, *, retry_after: float | None = None) -> web.Response:
        body = anthropic_messages.error(status, message)  # Anthropic's errors carry no code
        return web.json_response(body, status=status, headers=_retry_after(retry_after))

    @staticmethod
    def reply(body: dict[str, Any], model: str, answer: _Answer) -> dict[str, Any]:
        return anthropic_messages.message(answer.wire("toolu_scripted"), model,
                                          Usage(_prompt_words(body), answer.words),
                                          message_id=f"msg_scripted_{answer.number}")


_Format = type[_OpenAI] | type[_Anthropic]


def _retry_after(seconds: float | None) -> dict[str, str] | None:
    """Whole seconds, as providers send it (a wait under a second is rounded up; 0 stays 0)."""
    return {"Retry-After": str(max(0, math.ceil(seconds)))} if seconds is not None else None


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

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=MAX_BODY)
        for fmt in (_OpenAI, _Anthropic):
            for path in fmt.paths:
                app.router.add_post(path, functools.partial(self._handle, fmt=fmt))
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

    async def _handle(self, request: web.Request, fmt: _Format) -> web.StreamResponse:
        self.arrived += 1
        key = fmt.key(request.headers)
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._record(request, key, None, fmt.error(400, "request body is not JSON"))
        except web.HTTPRequestEntityTooLarge:
            return self._record(request, key, None, fmt.error(413, f"the body is larger than {MAX_BODY >> 20} MB"))
        if key in self.config.rejected_keys:
            # Echo the key as some providers do, so clients' redaction is tested for real.
            return self._record(request, key, body, fmt.error(401, f"Incorrect API key provided: {key}", "invalid_api_key"))
        if self.config.failures:
            return self._record(request, key, body, _scripted(self.config.failures.pop(0), fmt))
        if (wait := self._over_rpm()) is not None:
            return self._record(request, key, body, fmt.error(429, "rate limit exceeded", "rate_limit_exceeded",
                                                              retry_after=wait))
        await asyncio.sleep(self.config.latency)  # the simulated provider's thinking time
        model = self.config.served_model or body.get("model", "scripted")
        answer, headers = self._answer(body, fmt), None
        if self.config.echo_key and key:
            credentials = request.headers.get("Authorization") or key  # Anthropic's x-api-key is the key alone
            answer, model, headers = answer.echoing(key), credentials, {"X-Echoed-Authorization": credentials}
        return self._record(request, key, body, web.json_response(fmt.reply(body, model, answer), headers=headers))

    def _record(self, request: web.Request, key: str | None, body: Any, response: web.StreamResponse) -> web.StreamResponse:
        if self._keep:
            self.requests.append(SeenRequest(request.path, key, body if isinstance(body, dict) else None,
                                             response.status, user_agent=request.headers.get("User-Agent")))
        return response

    def _over_rpm(self) -> float | None:
        """Seconds until the rpm limit takes another request, or None when it takes this one."""
        if self.config.rpm is None:
            return None
        now = time.monotonic()
        while self._accepted and self._accepted[0] <= now - self.config.window:
            self._accepted.popleft()
        if len(self._accepted) >= self.config.rpm:
            return self._accepted[0] + self.config.window - now
        self._accepted.append(now)
        return None

    def _answer(self, body: dict[str, Any], fmt: _Format) -> _Answer:
        """The answer by the request's user, else the first rule matching the last user text, else the default."""
        number = next(self._ids)
        calls = self.config.tool_answers.get(_user(body))
        if calls is not None:
            return _Answer("", calls, number)
        text = self.config.answers.get(_user(body))
        if text is not None:
            return _Answer(text, [], number)
        last_user = _last_user_text(body, fmt.user_roles)
        rule = next((r for r in self.config.rules if re.search(r.pattern, last_user)), None)
        if rule is None:
            return _Answer(self.config.default_answer, self.config.default_tool_calls, number)
        return _Answer(rule.answer, rule.tool_calls, number)


def _scripted(failure: Failure, fmt: _Format) -> web.Response:
    if failure.kind == "malformed":
        return web.Response(status=200, text=fmt.broken, content_type="application/json")
    return fmt.error(failure.status, failure.message, retry_after=failure.retry_after)


async def _serve(config: ServerConfig, port: int) -> None:
    async with ScriptedLLMServer(config, port=port, keep_requests=False) as server:
        print(f"scripted LLM server on {server.base_url}/v1 (api_base of openai/*; of anthropic/*: without /v1)", flush=True)
        await asyncio.Event().wait()  # until Ctrl-C cancels the loop


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI- and Anthropic-compatible server (127.0.0.1 only)")
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
