"""The LLM gateway: OpenAI's chat completions and Responses API and Anthropic's Messages API, served
to the agents of one sweep, each call answered by the sweep's model for the episode its token names.

    async with LLMGateway.serve(unix_socket=path) as gateway:    # loopback TCP, and a socket for containers
        door = gateway.open(model_handle)                         # a token for this episode
        door.access.openai_base_url, door.access.api_key          # what an SDK client is given
        door.close()                                              # the token is refused from now on

Every call goes through the episode's model (agents/strategies/external.py's ModelHandle): the
sweep's limits, retries, budget, pricing and transcript, as for the built-in strategies. A request
carries only its episode's token (as `Authorization: Bearer` or `x-api-key`), never a provider's
key; an unknown token, or one whose episode has ended, is a 401 in the provider's own error form
(every body is built by agents/wire, as the scripted provider's are).
A call still running when its episode ends is cancelled. A model failure (after the sweep's own
retries, or a spent budget) is answered with `x-should-retry: false`, so that SDKs do not retry it.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from agents.llm.errors import ModelError
from agents.own import Answer, GatewayAccess, OutOfTurns
from agents.strategies.external import EpisodeEnded, ModelHandle
from agents.wire import anthropic_messages, openai_chat, openai_responses
from agents.wire.calls import Call, Usage, WireError
from foundation.concurrency import TaskOwner

# What one agent may send, bounded on our side (an agent is a stranger's code; one must not starve
# the others): a request's body (an agent's whole conversation; providers take 32 MB at most), the
# time it may take to send it, its calls in flight at once, how long an idle connection is kept.
MAX_BODY = 16 << 20
BODY_TIMEOUT = 30.0
MAX_IN_FLIGHT = 4  # calls of one token at once; an SDK agent makes one at a time
KEEPALIVE = 30.0  # aiohttp's default keeps an idle connection an hour
LINGER = 1.0  # seconds the rest of a refused body is read before its connection closes (aiohttp's default: 10)
JSON_IN_THREAD = 1 << 16  # bytes of a body from which its JSON is parsed off the event loop
UNREAD = (408, 413, 415)  # refusals that leave a body unread: the connection is closed after them
TOKEN_PREFIX = "icgw-"
CONTAINER_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")  # in a cgroup's path: docker-<id>.scope, /docker/<id>
Reader = Callable[[Any], Call]


class Door:
    """One episode's way in: its token, and the model its calls reach; `container`: the container
    whose processes alone may use the token (an installed agent's), told by the socket's peer."""

    def __init__(self, gateway: LLMGateway, model: ModelHandle, container: str | None = None) -> None:
        self.gateway, self.model, self.container = gateway, model, container
        self.token = TOKEN_PREFIX + secrets.token_urlsafe(24)
        self.calls = TaskOwner(f"gateway-{model.task.id}")
        self.running: set[asyncio.Task[Answer]] = set()
        self.in_flight = 0  # requests of this token being read or answered

    @property
    def access(self) -> GatewayAccess:
        return GatewayAccess(f"{self.gateway.url}/v1", self.gateway.url, self.token)

    def close(self) -> None:
        """Refuse the token from now on, and stop the calls still running."""
        self.gateway.doors.pop(self.token, None)
        self.gateway.ended.add(self.token)
        self.model.closed = True
        for task in list(self.running):
            task.cancel()

    async def answer(self, call: Call) -> tuple[Answer, Usage]:
        before = len(getattr(self.model.model, "calls", []))
        task = self.calls.start(self.model.complete(call.messages, call.tools), name="call")
        self.running.add(task)
        try:
            answer = await task
        finally:
            self.running.discard(task)
        recorded = getattr(self.model.model, "calls", [])
        last = recorded[-1] if len(recorded) > before else None
        return answer, Usage(last.prompt_tokens, last.completion_tokens) if last else Usage()


class LLMGateway:
    def __init__(self) -> None:
        self.doors: dict[str, Door] = {}
        self.ended: set[str] = set()
        self.url = ""
        self.unix_socket: Path | None = None

    @classmethod
    @asynccontextmanager
    async def serve(cls, *, unix_socket: Path | None = None) -> AsyncIterator[LLMGateway]:
        """The gateway on 127.0.0.1 (an ephemeral port) and, when given, on `unix_socket` too."""
        gateway = cls()
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/v1/chat/completions", gateway._openai)
        app.router.add_post("/chat/completions", gateway._openai)
        app.router.add_post("/v1/responses", gateway._responses)
        app.router.add_post("/responses", gateway._responses)
        app.router.add_post("/v1/messages", gateway._anthropic)
        app.router.add_get("/v1/models", gateway._models)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=KEEPALIVE,
                               lingering_time=LINGER)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            host, port = runner.addresses[0][:2]
            gateway.url = f"http://{host}:{port}"
            if unix_socket is not None:
                await web.UnixSite(runner, str(unix_socket)).start()
                unix_socket.chmod(0o666)  # a container's agent runs as whoever its image says
                gateway.unix_socket = unix_socket
            yield gateway
        finally:
            for door in list(gateway.doors.values()):
                door.close()
            await runner.cleanup()

    def open(self, model: ModelHandle, *, container: str | None = None) -> Door:
        door = Door(self, model, container)
        self.doors[door.token] = door
        return door

    def _door(self, request: web.Request) -> Door:
        auth = request.headers.get("Authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else request.headers.get("x-api-key", "").strip()
        if token in self.doors:
            door = self.doors[token]
            if door.container is not None and peer_container(request) != door.container:
                raise WireError(401, "this token was given to another container")
            return door
        if token in self.ended:
            raise WireError(401, "this token's episode has ended")
        raise WireError(401, "unknown token: use the api_key your episode was given")

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, openai_chat.read, openai_chat.error, self._openai_answer)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, openai_responses.read, openai_responses.error, self._responses_answer)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, anthropic_messages.read, anthropic_messages.error, self._anthropic_answer)

    async def _models(self, request: web.Request) -> web.Response:
        try:
            door = self._door(request)
        except WireError as exc:
            return web.json_response(openai_chat.error(exc.status, exc.message), status=exc.status)
        return web.json_response({"object": "list", "data": [{"id": door.model.name, "object": "model", "owned_by": "intercode"}]})

    async def _handle(self, request: web.Request, read: Reader, error: Callable[[int, str], dict[str, Any]],
                      respond: Callable[[web.Request, Call, Answer, Usage, str], Awaitable[web.StreamResponse]],
                      ) -> web.StreamResponse:
        door: Door | None = None
        try:
            door = self._door(request)
            if door.in_flight >= MAX_IN_FLIGHT:
                door = None  # not counted: it is refused before anything is read
                raise WireError(429, f"this token has {MAX_IN_FLIGHT} calls in flight already: wait for one")
            door.in_flight += 1
            call = read(await _body(request))
            answer, usage = await door.answer(call)
        except WireError as exc:
            response = web.json_response(error(exc.status, exc.message), status=exc.status)
            if exc.status in UNREAD:
                response.force_close()  # the rest of its body is read for LINGER at most, then the connection ends
            return response
        except ModelError as exc:
            status = 402 if exc.kind == "budget" else 503
            return web.json_response(error(status, str(exc)), status=status, headers={"x-should-retry": "false"})
        except OutOfTurns as exc:
            return web.json_response(error(400, str(exc)), status=400, headers={"x-should-retry": "false"})
        except (EpisodeEnded, asyncio.CancelledError):
            if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # the server is closing
            return web.json_response(error(401, "this token's episode has ended"), status=401)
        finally:
            if door is not None:
                door.in_flight -= 1
        return await respond(request, call, answer, usage, door.model.name)

    async def _openai_answer(self, request: web.Request, call: Call, answer: Answer, usage: Usage,
                             model: str) -> web.StreamResponse:
        if not call.stream:
            return web.json_response(openai_chat.completion(answer, model, usage))
        return await _stream(request, openai_chat.chunks(answer, model, usage, call.stream_usage))

    async def _responses_answer(self, request: web.Request, call: Call, answer: Answer, usage: Usage,
                                model: str) -> web.StreamResponse:
        if not call.stream:
            return web.json_response(openai_responses.response(answer, model, usage, call))
        return await _stream(request, openai_responses.events(answer, model, usage, call))

    async def _anthropic_answer(self, request: web.Request, call: Call, answer: Answer, usage: Usage,
                                model: str) -> web.StreamResponse:
        if not call.stream:
            return web.json_response(anthropic_messages.message(answer, model, usage))
        return await _stream(request, anthropic_messages.events(answer, model, usage))


def peer_container(request: web.Request) -> str | None:
    """The container of the process at the other end of a request's unix socket (the proxy in an
    installed agent's container): the kernel's word (SO_PEERCRED, its pid in our namespace), then
    that process's cgroup, which names its container. None over TCP, or for a process of no container."""
    sock = request.transport.get_extra_info("socket") if request.transport is not None else None
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    try:
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    found = CONTAINER_ID.search(cgroup)
    return found[0] if found else None


async def _body(request: web.Request) -> Any:
    """The request's JSON, bounded: no compressed body (a small one can unpack to gigabytes), at
    most MAX_BODY bytes, sent within BODY_TIMEOUT; a large one parsed off the event loop."""
    if request.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity"):
        raise WireError(415, "send the body uncompressed (no Content-Encoding)")
    if (request.content_length or 0) > MAX_BODY:
        raise WireError(413, f"the body is larger than {MAX_BODY >> 20} MB")
    try:
        async with asyncio.timeout(BODY_TIMEOUT):
            raw = await request.read()
    except TimeoutError:
        raise WireError(408, f"the body took longer than {BODY_TIMEOUT:g} s to arrive") from None
    except web.HTTPRequestEntityTooLarge:
        raise WireError(413, f"the body is larger than {MAX_BODY >> 20} MB") from None
    try:
        return json.loads(raw) if len(raw) < JSON_IN_THREAD else await asyncio.to_thread(json.loads, raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise WireError(400, "the body is not JSON") from None


async def _stream(request: web.Request, events: Iterator[bytes]) -> web.StreamResponse:
    """The events written as they come; an agent that hangs up meanwhile (it was killed, its time was
    up) ends the answer quietly: its call is recorded already, nothing is left to tell it."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    try:
        await response.prepare(request)
        for event in events:
            await response.write(event)
        await response.write_eof()
    except ConnectionResetError:  # aiohttp's ClientConnectionResetError: "Cannot write to closing transport"
        response.force_close()
    return response
