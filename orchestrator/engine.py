"""The connection to the Docker engine, checked once and translated into our errors.

aiodocker finds the engine itself (DOCKER_HOST, the Docker context, then the usual sockets). This
module only adds a ping, so that a missing engine fails at start with one clear line instead of
deep inside the first build or container creation.
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


async def connect() -> aiodocker.Docker:
    """A client for the engine, pinged; the caller closes it (or use `engine()`)."""
    where = os.environ.get("DOCKER_HOST") or "the default socket"
    try:
        docker = aiodocker.Docker()
    except ValueError as exc:  # aiodocker found no socket and no DOCKER_HOST
        raise _unavailable(where, exc) from exc
    try:
        async with asyncio.timeout(PING_TIMEOUT):
            await docker.version()
    except (aiohttp.ClientError, OSError, aiodocker.DockerError, TimeoutError) as exc:
        await docker.close()
        raise _unavailable(where, exc) from exc
    except BaseException:
        await docker.close()
        raise
    return docker


@asynccontextmanager
async def engine() -> AsyncIterator[aiodocker.Docker]:
    """`async with engine() as docker:` — connect, and always close."""
    docker = await connect()
    try:
        yield docker
    finally:
        await docker.close()


def _unavailable(where: str, exc: BaseException) -> EngineUnavailable:
    reason = str(exc) or type(exc).__name__
    return EngineUnavailable(
        f"no Docker engine answers at {where} ({reason}): run scripts/ensure-engine.sh or set DOCKER_HOST")
