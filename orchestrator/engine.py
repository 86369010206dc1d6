"""The connection to the Docker engine, checked once and translated into our errors.

One client serves builds, the pool and the drivers. Each driver holds an upgraded HTTP connection
for its container's whole life, so the connector has no connection limit (aiohttp's default of
100 would stall a pool of more than 100 containers).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiodocker
import aiohttp

from orchestrator.errors import EngineUnavailable

PING_TIMEOUT = 10.0  # seconds; a healthy engine answers in milliseconds
DEFAULT_HOST = "unix:///var/run/docker.sock"


def _client(host: str) -> tuple[aiodocker.Docker, aiohttp.BaseConnector]:
    if host.startswith("unix://"):
        connector: aiohttp.BaseConnector = aiohttp.UnixConnector(host[len("unix://"):], limit=0)
        return aiodocker.Docker(url="unix://localhost", connector=connector), connector
    connector = aiohttp.TCPConnector(limit=0)
    return aiodocker.Docker(url=host, connector=connector), connector


@asynccontextmanager
async def engine() -> AsyncIterator[aiodocker.Docker]:
    """`async with engine() as docker:` — the engine at DOCKER_HOST or the default socket, pinged."""
    host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
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
