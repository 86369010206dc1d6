"""A half-hung Docker engine, made of a real one: a Unix socket in front of the engine's that passes
every byte through, but holds the requests that match `hold` (creating a container) while it
"hangs", and lets them through when the hang is over, late, as a half-deadlocked dockerd
(moby#42545) does: ping, `docker ps` and the event stream answer meanwhile.

    proxy = HangingProxy(engine.socket, tmp_path / "proxy.sock")
    proxy.start()
    proxy.hang_at_first(20.0)        # the first create request starts a 20 s hang
    ... DOCKER_HOST=unix://<proxy.socket> ...
    proxy.close()

It runs its own event loop in a thread, so a test drives it from outside the sweep it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from pathlib import Path

CREATE = re.compile(rb"^POST /(?:v[\d.]+/)?containers/create", re.MULTILINE)
CHUNK = 1 << 16


class HangingProxy:
    def __init__(self, upstream: Path, socket: Path, hold: re.Pattern[bytes] = CREATE) -> None:
        self.upstream, self.socket, self.hold = upstream, socket, hold
        self.host = f"unix://{socket}"
        self.held = 0  # requests held back, in all
        self.first_held_at: float | None = None  # time.time() of the first request held
        self._until = 0.0  # monotonic end of the hang
        self._armed: float | None = None  # a hang this long begins at the next matching request
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hanging-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        # Each connection's task, held here: the stream protocol lets go of it when its client goes,
        # and a pending task nobody holds is collected with its sockets open. close() ends them all.
        self._connections: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_unix_server(self._serve, path=str(self.socket)), self._loop).result(10)

    def hang_at_first(self, seconds: float) -> None:
        """The next request that matches starts a hang of `seconds`."""
        self._armed = seconds

    def close(self) -> None:
        """Stop serving, end every connection (each closes its sockets), then the loop."""
        async def shut() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
            # Every other task of this loop serves a connection, one accepted just before the close
            # too (whose task may not have run yet, so not be in _connections): end them all, until
            # no new one came meanwhile.
            me = asyncio.current_task()
            while pending := [task for task in asyncio.all_tasks() if task is not me]:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
            self._connections.clear()
        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self.socket.unlink(missing_ok=True)

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._relay(client_in, client_out)
        finally:
            self._connections.discard(task)

    async def _relay(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        try:
            engine_in, engine_out = await asyncio.open_unix_connection(str(self.upstream))
        except OSError:
            await _closed(client_out)
            return
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._pipe(client_in, engine_out, hold=True))
                group.create_task(self._pipe(engine_in, client_out, hold=False))
        except* (ConnectionError, OSError):
            pass  # one side went away: the other is closed below
        finally:
            await _closed(engine_out, client_out)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, hold: bool) -> None:
        while data := await reader.read(CHUNK):
            if hold and self.hold.search(data):
                await self._maybe_hold()
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()

    async def _maybe_hold(self) -> None:
        if self._armed is not None:
            self._until, self._armed = time.monotonic() + self._armed, None
            self.first_held_at = time.time()
        delay = self._until - time.monotonic()
        if delay > 0:
            self.held += 1
            await asyncio.sleep(delay)


async def _closed(*writers: asyncio.StreamWriter) -> None:
    """Close each connection and wait until its transport is gone (else the loop may close first,
    and the transport is reported unclosed when it is collected)."""
    for writer in writers:
        writer.close()
    for writer in writers:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(writer.wait_closed(), 5.0)
