"""The connection to the Docker engine, checked once and translated into our errors.

One client serves builds, the pool and the drivers. Each driver holds an upgraded HTTP connection
for its container's whole life, so the connector has no connection limit (aiohttp's default of
100 would stall a pool of more than 100 containers).

`engine_call` is the boundary: whatever the engine's transport raises (aiohttp's connection
errors, aiodocker's stream assertions, a 5xx answer) leaves it as one of our SandboxErrors, so an
engine that restarts mid-run is an infrastructure failure, never a task's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import aiodocker
import aiohttp

from foundation.errors import EngineLost, EngineUnavailable, SandboxError

PING_TIMEOUT = 10.0  # seconds; a healthy engine answers in milliseconds
DEFAULT_HOST = "unix:///var/run/docker.sock"
CANNOT_CONNECT = 900  # the status aiodocker gives a DockerError when no connection could be made
# What the engine's transport raises when the engine goes away: aiohttp's connection errors (also
# OSError), aiodocker's stream writing to a closed transport (a bare AssertionError or
# RuntimeError), and a request that timed out on the socket.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, AssertionError, RuntimeError,
                                                     TimeoutError)


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


@contextmanager
def engine_call(what: str, *, container_id: str | None = None, image: str | None = None) -> Iterator[None]:
    """Errors of the engine's transport, and its 5xx answers, as our infra errors. A 4xx answer
    (no such container or image, a conflict) stays an aiodocker.DockerError for the caller."""
    try:
        yield
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


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
