"""The host's side of the in-container driver, whatever reaches it: framed JSON over one stream
(an aiodocker exec stream: foundation/pool/driver.py; a local process's pipes: foundation/local.py),
and the values its answers are. No Docker here: the Docker-free seam (foundation/sandbox.py,
foundation/local.py) stands on it.

Requests on one driver are serialised by a lock; the driver answers them in order. The frames, the
ops, their typed requests and replies, and the version are icdriver.protocol's; a driver of another
version is refused.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, overload

import aiohttp

from foundation.errors import DriverExited, DriverLost, SandboxError
from icdriver import protocol

HELLO_TIMEOUT = 30.0
# What a stream to a driver (or to the engine) raises when its transport fails: aiohttp's connection
# errors (also OSError), aiodocker's stream writing to a closed transport (a bare AssertionError or
# RuntimeError), and a request that timed out on the socket.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, AssertionError, RuntimeError,
                                                     TimeoutError)


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What one action produced. `output` is stdout and stderr merged, as the original had it."""

    exit_code: int
    output: str
    omitted: int = 0
    timed_out: bool = False
    flooded: bool = False
    elapsed: float = 0.0
    cwd: str | None = None
    valid_utf8: bool = True  # False: the output was not UTF-8 and was decoded with replacements

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.flooded


@dataclass(frozen=True, slots=True)
class PythonResult:
    """One code run by the persistent interpreter, captured as the original python_server did:
    `output` and `error` are stdout and stderr, stripped; when the code raised, `error` is
    "Error: <exception>" and `output` holds what it printed before (which the original dropped)."""

    output: str
    error: str
    raised: bool
    omitted: int = 0  # characters beyond the cap, not kept
    timed_out: bool = False  # killed at the timeout: the interpreter and its state are gone
    died: bool = False  # the interpreter exited while running it (os._exit, a crash, the OOM killer)
    elapsed: float = 0.0


@dataclass(frozen=True, slots=True)
class PythonRun:
    results: tuple[PythonResult, ...]
    restarted: bool  # the interpreter was lost (timeout, exit) since the last call: this one is fresh


class StreamChunk(Protocol):
    """One piece of what a driver wrote: on its stdout (stream 1) or its stderr (2)."""

    @property
    def stream(self) -> int: ...

    @property
    def data(self) -> bytes: ...


class DriverStream(Protocol):
    """What the client needs of the connection to its driver: an aiodocker exec stream, or pipes."""

    async def write_in(self, data: bytes) -> None: ...

    async def read_out(self) -> StreamChunk | None: ...  # None at the end

    async def close(self) -> None: ...


class OtherVersion(DriverLost):
    """The driver speaks another protocol version than this checkout (`mismatch` says which)."""

    def __init__(self, mismatch: str, *, container_id: str) -> None:
        super().__init__(f"the driver {mismatch}", container_id=container_id)
        self.mismatch = mismatch


class DriverClient:
    """A started driver: `await DriverClient.over(stream, name)`, or in a container
    `await start_driver(container)` (foundation/pool/driver.py); `close()` ends it."""

    def __init__(self, container_id: str, stream: DriverStream, pid: int) -> None:
        self.container_id = container_id
        self._stream = stream
        self.pid = pid
        self._buf = bytearray()
        self._lock = asyncio.Lock()
        self._next_id = 1
        self._closed = False
        self.stderr = bytearray()
        self.roots: list[str] = []  # top-level paths the driver's reset restores

    @property
    def closed(self) -> bool:
        return self._closed

    @classmethod
    async def over(cls, stream: DriverStream, name: str) -> DriverClient:
        """A driver reached another way than a container's exec (a local process: foundation/local.py)."""
        client = cls(name, stream, pid=0)
        try:
            await asyncio.wait_for(client.greet(), HELLO_TIMEOUT)
        except BaseException:
            await client.close()
            raise
        return client

    async def request(self, op: str, *, wait: float | None = None, **fields: Any) -> protocol.Reply:
        """Send one request named by its op, its fields as keywords, and wait for its answer; `call`
        takes the op's typed request and gives its typed reply."""
        return await self._exchange(op, {protocol.OP: op, **fields}, wait)

    @overload
    async def call(self, message: protocol.HelloRequest, *, wait: float | None = None) -> protocol.HelloReply: ...
    @overload
    async def call(self, message: protocol.ExecRequest, *, wait: float | None = None) -> protocol.ExecReply: ...
    @overload
    async def call(self, message: protocol.SessionRequest, *, wait: float | None = None) -> protocol.SessionReply: ...
    @overload
    async def call(self, message: protocol.ResetRequest, *, wait: float | None = None) -> protocol.ResetReply: ...
    @overload
    async def call(self, message: protocol.PythonRequest, *, wait: float | None = None) -> protocol.PythonReply: ...
    @overload
    async def call(self, message: protocol.PutRequest, *, wait: float | None = None) -> protocol.PutReply: ...

    async def call(self, message: protocol.Request, *, wait: float | None = None) -> protocol.Reply:
        """Send one request and wait for its reply, of the type its op answers with (icdriver.protocol).
        `wait` bounds the wait on the host side; the driver enforces the action's own deadline, so this
        is only a guard against a hung driver."""
        return await self._exchange(message["op"], message, wait)

    async def _exchange(self, op: str, message: Mapping[str, object], wait: float | None) -> protocol.Reply:
        if self._closed:
            raise DriverLost("driver is closed", container_id=self.container_id)
        async with self._lock:
            rid, self._next_id = self._next_id, self._next_id + 1
            frame = protocol.encode({protocol.ID: rid, **message})
            try:
                await self._stream.write_in(frame)
                reply = await asyncio.wait_for(self.read_frame(), wait)
            except asyncio.CancelledError:
                self._closed = True  # the answer would arrive out of turn: this stream is spent
                raise
            except TRANSPORT_ERRORS as exc:  # a timeout, or the stream failed (the engine went away)
                self._closed = True
                raise DriverLost(f"driver did not answer {op!r}: {describe(exc)}",
                                 container_id=self.container_id) from exc
        if reply.get(protocol.ID) != rid:
            self._closed = True
            raise DriverLost(f"driver answered request {reply.get(protocol.ID)} to {rid}",
                             container_id=self.container_id)
        if not reply.get(protocol.OK):
            raise SandboxError(f"driver failed {op!r}: {reply.get(protocol.ERROR)}", container_id=self.container_id)
        return cast(protocol.Reply, reply)  # the driver answers each op with that op's reply (icdriver/server.py)

    async def exec(self, argv: list[str], *, cwd: str = "/", timeout: float = 10.0, cap: int = 65536,
                   flood: int = 8 << 20, env: dict[str, str] | None = None, linger: float = 0.0,
                   user: str | None = None) -> ExecResult:
        request = protocol.ExecRequest(op=protocol.EXEC, argv=argv, cwd=cwd, timeout=timeout, cap=cap, flood=flood,
                                       env=env or {}, linger=linger)
        if user:
            request["user"] = user
        reply = await self.call(request, wait=timeout + 15.0)
        return _result(reply, valid_utf8=reply.get("utf8", True))

    async def session(self, cmd: str, *, timeout: float = 10.0, cap: int = 65536, user: str | None = None) -> ExecResult:
        request = protocol.SessionRequest(op=protocol.SESSION, cmd=cmd, timeout=timeout, cap=cap)
        if user:
            request["user"] = user
        reply = await self.call(request, wait=timeout + 15.0)
        return _result(reply, cwd=reply["cwd"])

    async def python(self, codes: Sequence[str], *, timeout: float = 10.0, cap: int = 65536, name: str = "main",
                     fresh: bool = False, close: bool = False) -> PythonRun:
        """Run `codes` one after the other in the persistent interpreter `name` (started on first
        use; `fresh` empties its namespace first, `close` stops it afterwards). Each code has its own
        timeout; one that times out ends the interpreter, and the codes after it are not run."""
        request = protocol.PythonRequest(op=protocol.PYTHON, codes=list(codes), timeout=timeout, cap=cap, name=name,
                                         fresh=fresh, close=close)
        reply = await self.call(request, wait=timeout * max(len(codes), 1) + 15.0)
        return PythonRun(tuple(PythonResult(**r) for r in reply["results"]), reply["restarted"])

    async def put(self, dest: str, tar: bytes, *, timeout: float = 60.0) -> int:
        """Unpack the uncompressed tar `tar` under `dest` in the container; how many members it had."""
        request = protocol.PutRequest(op=protocol.PUT, dest=dest, tar=base64.b64encode(tar).decode("ascii"))
        reply = await self.call(request, wait=timeout)
        return reply["files"]

    async def greet(self) -> None:
        """Read the hello a driver sends unasked as it starts: its pid and the roots its reset
        restores. A driver of another protocol version is refused (OtherVersion)."""
        hello = cast(protocol.HelloReply, await self.read_frame())
        if (mismatch := version_mismatch(hello)) is not None:
            raise OtherVersion(mismatch, container_id=self.container_id)
        self.pid = int(hello[protocol.PID])
        self.roots = list(hello.get(protocol.ROOTS, []))

    async def read_frame(self) -> protocol.Frame:
        while True:
            frame = protocol.decode(self._buf)
            if frame is not None:
                return frame
            message = await self._stream.read_out()
            if message is None:
                self._closed = True
                detail = self.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["stream closed"]
                raise DriverExited(f"driver exited: {detail[0]}", container_id=self.container_id)
            if message.stream == 2:
                self.stderr += message.data
                del self.stderr[:-4096]
            else:
                self._buf += message.data

    async def close(self) -> None:
        """Close the stream; one whose connection is already gone closes quietly."""
        self._closed = True
        try:
            await self._stream.close()
        except TRANSPORT_ERRORS:
            pass  # nothing is left to close


def version_mismatch(hello: protocol.HelloReply) -> str | None:
    """What is wrong with a driver's hello: another protocol version than this checkout's; None if nothing."""
    version = hello.get(protocol.VERSION_KEY)
    if version == protocol.VERSION:
        return None
    return f"carries driver version {version}, this checkout speaks version {protocol.VERSION}"


def _result(reply: protocol.OutputReply, *, cwd: str | None = None, valid_utf8: bool = True) -> ExecResult:
    return ExecResult(exit_code=reply["exit"], output=reply["output"], omitted=reply["omitted"],
                      timed_out=reply["timed_out"], flooded=reply["flooded"], elapsed=reply["elapsed"],
                      cwd=cwd, valid_utf8=valid_utf8)
