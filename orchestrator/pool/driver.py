"""Host side of the in-container driver: one aiodocker exec stream per container, framed JSON.

The driver (images/driver/icdriver.py) is started once per container; every action afterwards is
one frame each way over that stream, instead of a `docker exec` per action. Requests on one
container are serialised by a lock; the driver answers them in order.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiodocker
from aiodocker.containers import DockerContainer
from aiodocker.stream import Stream

from orchestrator.engine import TRANSPORT_ERRORS, describe, engine_call
from orchestrator.errors import ContainerDied, DriverLost, SandboxError

DRIVER_ARGV = ["python3", "-B", "/usr/lib/intercode/icdriver.py"]
HEADER = struct.Struct(">I")
HELLO_TIMEOUT = 30.0


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


class DriverClient:
    """A started driver. Use `await DriverClient.start(container)`; `close()` ends it."""

    def __init__(self, container: DockerContainer, stream: Stream, pid: int) -> None:
        self.container_id: str = container.id
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
    async def start(cls, container: DockerContainer) -> DriverClient:
        try:
            with engine_call("start the driver", container_id=container.id):
                execution = await container.exec(DRIVER_ARGV, stdin=True, stdout=True, stderr=True, tty=False)
                stream = execution.start(detach=False)
                await stream._init()  # noqa: SLF001 — opening the upgraded connection is the readiness check
        except aiodocker.DockerError as exc:  # 4xx: the container is gone or not running
            raise ContainerDied(f"could not start the driver: {exc.message}", container_id=container.id) from exc
        client = cls(container, stream, pid=0)
        try:
            hello = await asyncio.wait_for(client._read_frame(), HELLO_TIMEOUT)
        except TRANSPORT_ERRORS as exc:
            await client.close()
            raise DriverLost(f"the driver did not say hello: {describe(exc)}", container_id=container.id) from exc
        except BaseException:
            await client.close()
            raise
        client.pid = int(hello["pid"])
        client.roots = list(hello.get("roots", []))
        return client

    async def request(self, op: str, *, wait: float | None = None, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its answer. `wait` bounds the wait on the host side;
        the driver enforces the action's own deadline, so this is only a guard against a hung driver."""
        if self._closed:
            raise DriverLost("driver is closed", container_id=self.container_id)
        async with self._lock:
            rid, self._next_id = self._next_id, self._next_id + 1
            body = json.dumps({"id": rid, "op": op, **fields}).encode()
            try:
                await self._stream.write_in(HEADER.pack(len(body)) + body)
                reply = await asyncio.wait_for(self._read_frame(), wait)
            except asyncio.CancelledError:
                self._closed = True  # the answer would arrive out of turn: this stream is spent
                raise
            except TRANSPORT_ERRORS as exc:  # a timeout, or the stream failed (the engine went away)
                self._closed = True
                raise DriverLost(f"driver did not answer {op!r}: {describe(exc)}",
                                 container_id=self.container_id) from exc
        if reply.get("id") != rid:
            self._closed = True
            raise DriverLost(f"driver answered request {reply.get('id')} to {rid}", container_id=self.container_id)
        if not reply.get("ok"):
            raise SandboxError(f"driver failed {op!r}: {reply.get('error')}", container_id=self.container_id)
        return reply

    async def exec(self, argv: list[str], *, cwd: str = "/", timeout: float = 10.0, cap: int = 65536,
                   flood: int = 8 << 20, env: dict[str, str] | None = None) -> ExecResult:
        reply = await self.request("exec", wait=timeout + 15.0, argv=argv, cwd=cwd, timeout=timeout,
                                   cap=cap, flood=flood, env=env or {})
        return _result(reply)

    async def session(self, cmd: str, *, timeout: float = 10.0, cap: int = 65536) -> ExecResult:
        reply = await self.request("session", wait=timeout + 15.0, cmd=cmd, timeout=timeout, cap=cap)
        return _result(reply)

    async def python(self, codes: Sequence[str], *, timeout: float = 10.0, cap: int = 65536, name: str = "main",
                     fresh: bool = False, close: bool = False) -> PythonRun:
        """Run `codes` one after the other in the persistent interpreter `name` (started on first
        use; `fresh` empties its namespace first, `close` stops it afterwards). Each code has its own
        timeout; one that times out ends the interpreter, and the codes after it are not run."""
        reply = await self.request("python", wait=timeout * max(len(codes), 1) + 15.0, codes=list(codes),
                                   timeout=timeout, cap=cap, name=name, fresh=fresh, close=close)
        return PythonRun(tuple(PythonResult(**r) for r in reply["results"]), bool(reply["restarted"]))

    async def _read_frame(self) -> dict[str, Any]:
        while True:
            if len(self._buf) >= HEADER.size:
                (size,) = HEADER.unpack_from(self._buf)
                if len(self._buf) >= HEADER.size + size:
                    frame = bytes(self._buf[HEADER.size:HEADER.size + size])
                    del self._buf[:HEADER.size + size]
                    return json.loads(frame)
            message = await self._stream.read_out()
            if message is None:
                self._closed = True
                detail = self.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["stream closed"]
                raise DriverLost(f"driver exited: {detail[0]}", container_id=self.container_id)
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


def _result(reply: dict[str, Any]) -> ExecResult:
    return ExecResult(exit_code=reply["exit"], output=reply["output"], omitted=reply["omitted"],
                      timed_out=reply["timed_out"], flooded=reply["flooded"], elapsed=reply["elapsed"],
                      cwd=reply.get("cwd"), valid_utf8=reply.get("utf8", True))
