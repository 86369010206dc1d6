"""One container's network released at a time on an engine, across this machine's processes.

Debian's dockerd 20.10 deadlocks when two network endpoints go at once (moby#42545, fixed in
libnetwork only after Debian's 20.10.24): a container's exit leaves its network (`sbLeave` takes
the network's lock, then the controller's) while the engine's watch loop handles another
endpoint's deletion (the controller's lock, then the network's). After that the engine answers
`docker ps` but no create, start or removal again: every sweep on it stalls. The test tiers met
it beside many removals at once (the engine's goroutine dump showed exactly those two waits).

So every call that ends a running container's endpoints (a forced removal, a kill waited for)
passes through `releasing_network(docker)`: one at a time per client in this process (a FIFO
lock), and one at a time per engine across processes (a `flock` on a file named after the
engine's address: the test tiers and two sweeps share one engine). A removal takes ~40 ms here,
so an engine still removes 25 containers a second. Starting a container needs no gate: the
watch loop's handling of a new endpoint was mended in 20.10 (moby#42569).

The wait is bounded: a holder holds the gate for one engine call, which has its own deadline
(`engine_call`), and a wait for another process's hold lasts at most that deadline too (GateHeld:
a process stopped while it held the gate). When a call or a wait passes it (the engine half-hung),
the calls queued behind it in this process fail at once (EngineLost, not tried) rather than each
waiting out a deadline of its own in turn (a pool of 60 would close in an hour). The engine's
watch takes the stall for an outage; what they would have removed is removed when the engine is
back, or by the next start.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from weakref import WeakKeyDictionary

import aiodocker

from foundation.engine import call_timeout, engine_host
from foundation.errors import EngineLost, EngineStalled

POLL_FIRST, POLL_MOST = 0.002, 0.05  # seconds between two tries of another process's lock (doubling)
# One FIFO lock per client (a client has one event loop and one engine). A cache, not state: a
# client that is gone takes its lock with it.
_LOCKS: WeakKeyDictionary[aiodocker.Docker, asyncio.Lock] = WeakKeyDictionary()
# How many gated calls of each client passed their deadline: a holder that joined the queue before
# the last one did is not tried (a half-hung engine would make each wait out its own deadline).
_STALLS: WeakKeyDictionary[aiodocker.Docker, int] = WeakKeyDictionary()


def gate_path(host: str) -> Path:
    """The file whose `flock` is the engine's gate, the same for every process of this machine."""
    digest = hashlib.sha256(host.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"intercode-engine-{digest}.lock"


@asynccontextmanager
async def releasing_network(docker: aiodocker.Docker) -> AsyncIterator[None]:
    """Hold the engine's gate while a running container's endpoints go (see the module's docstring)."""
    lock = _LOCKS.setdefault(docker, asyncio.Lock())
    stalls = _STALLS.get(docker, 0)
    async with lock:
        if _STALLS.get(docker, 0) != stalls:
            raise EngineLost("not tried: the Docker engine stopped answering the removal queued before this one")
        try:
            async with _across_processes(gate_path(engine_host())):
                yield
        except (EngineStalled, GateHeld):
            _STALLS[docker] = _STALLS.get(docker, 0) + 1
            raise


class GateHeld(EngineLost):
    """Another process held the engine's gate past an engine call's deadline (a process stopped
    while it held it, or an engine too slow to remove anything)."""


@asynccontextmanager
async def _across_processes(path: Path) -> AsyncIterator[None]:
    """An exclusive `flock` on `path`, tried without blocking the loop for at most an engine call's
    deadline (GateHeld). A file this user may not open (another user's engine gate) leaves this
    process's own lock as the only gate."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        yield
        return
    try:
        pause, limit = POLL_FIRST, call_timeout()
        end = time.monotonic() + limit
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
            if time.monotonic() >= end:
                raise GateHeld(f"not tried: another process held the Docker engine's gate ({path}) for {limit:g} s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_MOST)
        yield
    finally:
        os.close(fd)  # releases the lock
