"""What environments share within a run: the pool, the gold cache, the data dir, the reward mode,
and services started on first use (the SQL server). One Runtime per sweep or command.

    async with Runtime.open(data_dir=path) as runtime:
        async with make_environment("bash", runtime) as env:
            ...
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import aiodocker

from environments.gold import GoldCache
from orchestrator.engine import engine
from orchestrator.pool import ActionLimits, Hardening, ImagePoolConfig, Pool

RewardMode = Literal["original", "strict"]

# Images whose containers serve many episodes at once and need the host to reach them.
SERVICE_IMAGES = {"intercode/sql", "intercode/sql-starter"}


def default_pool_config(image: str) -> ImagePoolConfig:
    if image in SERVICE_IMAGES:  # a database server: reachable from the host, reset by its own means
        return ImagePoolConfig(min_idle=0, max_size=1, reset=False, check_changes=False,
                               hardening=Hardening(network=True, memory_mb=2048, cpus=2.0, pids=2048))  # a thread per connection
    return ImagePoolConfig(min_idle=0, max_size=16)


class Runtime:
    def __init__(self, docker: aiodocker.Docker, pool: Pool, *, data_dir: Path | None = None,
                 reward_mode: RewardMode = "original", gold: GoldCache | None = None) -> None:
        self.docker = docker
        self.pool = pool
        self.data_dir = data_dir
        self.reward_mode: RewardMode = reward_mode
        self.gold = gold or GoldCache()
        self._services: dict[str, Any] = {}
        self._service_locks: dict[str, asyncio.Lock] = {}
        self._digests: dict[str, str] = {}
        self._stack = AsyncExitStack()

    @classmethod
    @asynccontextmanager
    async def open(cls, *, data_dir: Path | None = None, reward_mode: RewardMode = "original",
                   images: dict[str, ImagePoolConfig] | None = None, limits: ActionLimits | None = None,
                   run_id: str | None = None, gold_dir: Path | None = None) -> AsyncIterator[Runtime]:
        """`gold_dir` keeps gold results across runs (keyed by image digest, so a rebuilt image
        recomputes them)."""
        configs = dict(images or {})

        def config_for(image: str) -> ImagePoolConfig:
            return configs.get(image) or default_pool_config(image)

        async with engine() as docker:
            async with Pool(docker, {}, run_id=run_id, limits=limits, default_config=config_for) as pool:
                runtime = cls(docker, pool, data_dir=data_dir, reward_mode=reward_mode, gold=GoldCache(gold_dir))
                async with runtime._stack:
                    yield runtime

    async def image_digest(self, image: str) -> str:
        """The image's id: gold results are cached per image, since an image change can change them."""
        if image not in self._digests:
            self._digests[image] = (await self.docker.images.inspect(image))["Id"]
        return self._digests[image]

    async def image_workdir(self, image: str) -> str:
        """The image's WORKDIR: where the original's un-cd'ed commands (gold, git status) ran."""
        key = f"workdir:{image}"
        if key not in self._digests:
            config = (await self.docker.images.inspect(image)).get("Config") or {}
            self._digests[key] = config.get("WorkingDir") or "/"
        return self._digests[key]

    async def service(self, name: str, start: Callable[[AsyncExitStack], Awaitable[Any]]) -> Any:
        """A shared service (like the SQL server), started once on first use and stopped with the runtime."""
        lock = self._service_locks.setdefault(name, asyncio.Lock())
        async with lock:
            if name not in self._services:
                self._services[name] = await start(self._stack)
            return self._services[name]
