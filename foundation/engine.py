"""The connection to the Docker engine, checked once and translated into our errors.

One client serves builds, the pool and the drivers. Each driver holds an upgraded HTTP connection
for its container's whole life, so the connector has no connection limit (aiohttp's default of
100 would stall a pool of more than 100 containers).

`engine_call` is the boundary: whatever the engine's transport raises (aiohttp's connection
errors, aiodocker's stream assertions, a 5xx answer) leaves it as one of our SandboxErrors, so an
engine that restarts mid-run is an infrastructure failure, never a task's. It is also where every
call gets its deadline: Debian's dockerd 20.10 can half-deadlock (moby#42545: ping and `docker ps`
answer, create, start, exec, inspect and remove hang), and a call past its deadline is
`EngineStalled`, reported to whoever watches the engine (`engine_settings(on_stall=...)`), which
handles it as an engine that went away.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import aiodocker
import aiohttp

from foundation.driver_client import TRANSPORT_ERRORS, describe
from foundation.errors import EngineLost, EngineStalled, EngineUnavailable, SandboxError

PING_TIMEOUT = 10.0  # seconds; a healthy engine answers in milliseconds
CALL_TIMEOUT = 60.0  # seconds an engine call may take (create, start, inspect, remove): a loaded engine takes a few
DEFAULT_HOST = "unix:///var/run/docker.sock"
CANNOT_CONNECT = 900  # the status aiodocker gives a DockerError when no connection could be made
# What the engine's transport raises when the engine goes away (TRANSPORT_ERRORS, the driver
# client's: aiohttp's connection errors (also OSError), aiodocker's stream writing to a closed
# transport (a bare AssertionError or RuntimeError), and a request that timed out on the socket),
# or the engine refusing: what any call to it may raise.
ENGINE_ERRORS: tuple[type[BaseException], ...] = (aiodocker.DockerError, *TRANSPORT_ERRORS)


def engine_host() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


def _client(host: str, *, fresh_connections: bool = False) -> tuple[aiodocker.Docker, aiohttp.BaseConnector]:
    """`fresh_connections`: a new connection per request (no keep-alive), for probing an engine
    that may be shutting down: it still answers on connections it has open, not on new ones."""
    if host.startswith("unix://"):
        connector: aiohttp.BaseConnector = aiohttp.UnixConnector(host[len("unix://"):], limit=0,
                                                                 force_close=fresh_connections)
        return aiodocker.Docker(url="unix://localhost", connector=connector), connector
    connector = aiohttp.TCPConnector(limit=0, force_close=fresh_connections)
    return aiodocker.Docker(url=host, connector=connector), connector


@asynccontextmanager
async def probe_client(host: str) -> AsyncIterator[aiodocker.Docker]:
    """A client that opens a new connection for each request: whether the engine answers now."""
    docker, connector = _client(host, fresh_connections=True)
    try:
        yield docker
    finally:
        await docker.close()
        await connector.close()


@asynccontextmanager
async def engine() -> AsyncIterator[aiodocker.Docker]:
    """`async with engine() as docker:` — the engine at DOCKER_HOST or the default socket, pinged."""
    host = engine_host()
    docker, connector = _client(host)
    try:
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                await docker.version()
        except (aiohttp.ClientError, OSError, aiodocker.DockerError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise EngineUnavailable(f"no Docker engine answers at {host} ({reason}): "
                                    "run scripts/ensure-engine.sh or set DOCKER_HOST") from exc
        yield docker
    finally:
        await docker.close()
        await connector.close()


@dataclass(frozen=True)
class EngineSettings:
    """How long an engine call may take, and whom to tell when one took longer."""

    call_timeout: float = CALL_TIMEOUT
    on_stall: Callable[[str], object] | None = None


_SETTINGS: ContextVar[EngineSettings] = ContextVar("engine_settings", default=EngineSettings())


@contextmanager
def engine_settings(settings: EngineSettings) -> Iterator[None]:
    """Every engine call made from here (and from the tasks started meanwhile) has these settings.
    Left from another task than the one that entered it (an actor's calls), it restores the
    settings that task had before."""
    previous = _SETTINGS.get()
    _SETTINGS.set(settings)
    try:
        yield
    finally:
        _SETTINGS.set(previous)


def use_engine_settings(settings: EngineSettings) -> None:
    """These settings for the rest of the current task (a host agent's call, served in a task of
    its own, takes its runtime's)."""
    _SETTINGS.set(settings)


def call_timeout() -> float:
    return _SETTINGS.get().call_timeout


@asynccontextmanager
async def engine_call(what: str, *, container_id: str | None = None, image: str | None = None,
                      timeout: float | None = None) -> AsyncIterator[None]:
    """Errors of the engine's transport, and its 5xx answers, as our infra errors; past its deadline
    (`timeout`, else the settings'), EngineStalled. A 4xx answer (no such container or image, a
    conflict) stays an aiodocker.DockerError for the caller."""
    settings = _SETTINGS.get()
    limit = timeout or settings.call_timeout
    try:
        async with asyncio.timeout(limit) as deadline:
            yield
    except TimeoutError as exc:
        if not deadline.expired():
            raise EngineLost(f"{what}: lost the Docker engine ({describe(exc)})",
                             container_id=container_id, image=image) from exc
        stalled = EngineStalled(f"the Docker engine at {engine_host()} stopped answering ({what} took longer than "
                                f"{limit:g} s): restart it", container_id=container_id, image=image)
        if settings.on_stall is not None:
            settings.on_stall(str(stalled))
        raise stalled from None
    except aiodocker.DockerError as exc:
        if exc.status == CANNOT_CONNECT:
            raise EngineLost(f"{what}: lost the Docker engine ({exc.message})",
                             container_id=container_id, image=image) from exc
        if exc.status < 500:
            raise
        raise SandboxError(f"{what}: the engine answered {exc.status}: {exc.message}",
                           container_id=container_id, image=image) from exc
    except TRANSPORT_ERRORS as exc:
        raise EngineLost(f"{what}: lost the Docker engine ({describe(exc)})",
                         container_id=container_id, image=image) from exc


@asynccontextmanager
async def engine_deadline(what: str, timeout: float | None = None) -> AsyncIterator[None]:
    """A deadline for a one-shot command's engine call (an image's inspect, build or removal): past
    it, one EngineUnavailable line that says to restart the engine. Errors stay the caller's."""
    limit = timeout or call_timeout()
    try:
        async with asyncio.timeout(limit) as deadline:
            yield
    except TimeoutError:
        if not deadline.expired():
            raise
        raise EngineUnavailable(f"the Docker engine at {engine_host()} stopped answering ({what} took longer than "
                                f"{limit:g} s): restart it") from None


