"""The Docker client the pool uses: one connection per driver stream, so no connection limit."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiodocker
import aiohttp

from orchestrator.errors import EngineUnavailable

DEFAULT_SOCKET = "/var/run/docker.sock"


@asynccontextmanager
async def docker_client() -> AsyncIterator[aiodocker.Docker]:
    """An aiodocker client for DOCKER_HOST or the default socket, checked with a ping.

    Each driver holds an upgraded HTTP connection for the container's whole life, so aiohttp's
    default limit of 100 connections would stall a pool of more than 100 containers.
    """
    host = os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"
    if host.startswith("unix://"):
        connector: aiohttp.BaseConnector = aiohttp.UnixConnector(host[len("unix://"):], limit=0)
        url = "unix://localhost"
    else:
        connector, url = aiohttp.TCPConnector(limit=0), host
    docker = aiodocker.Docker(url=url, connector=connector)
    try:
        try:
            await docker.version()
        except (aiohttp.ClientError, OSError, aiodocker.DockerError) as exc:
            raise EngineUnavailable(
                f"no Docker engine answers at {host} ({type(exc).__name__}): run `scripts/ensure-engine.sh` "
                "or set DOCKER_HOST") from exc
        yield docker
    finally:
        await docker.close()
        await connector.close()
