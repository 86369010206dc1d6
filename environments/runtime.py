"""What environments share within a run: the pool, the gold cache, the data dir, the reward mode,
and services started on first use (the SQL server). One Runtime per sweep or command.

    async with Runtime.open(data_dir=path) as runtime:
        async with make_environment("bash", runtime) as env:
            ...

With `engine_wait`, the runtime watches the engine (foundation.engine_watch): when it goes away,
the pool is suspended; when it is back, `recover` forgets every container and every service (the
SQL server died with the engine), and they are made again on first use.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import aiodocker
import structlog

from environments.gold import GoldCache
from foundation.concurrency import SharedWork
from foundation.engine import CALL_TIMEOUT, EngineSettings, engine, engine_call, engine_host, engine_settings
from foundation.engine_watch import EngineWatch
from foundation.errors import SandboxError
from foundation.pool import ActionLimits, Hardening, ImagePoolConfig, Pool
from foundation.sandbox import SandboxProvider

log = structlog.get_logger(__name__)
SERVICE_CLOSE_TIMEOUT = 10.0  # seconds for closing a service whose container died with the engine
RewardMode = Literal["original", "strict"]

def is_service(image: str) -> bool:
    """Whether the image's one container serves many episodes at once and the host must reach it:
    the SQL images (ours, and those loaded from your dumps: intercode/sql-*)."""
    return image == "intercode/sql" or image.startswith("intercode/sql-")


PLAIN_POOL = ImagePoolConfig(min_idle=0, max_size=16)  # an image of an agent's containers, unless its tasks ask more


def default_pool_config(image: str) -> ImagePoolConfig:
    if is_service(image):  # a database server: reachable from the host, reset by its own means
        return ImagePoolConfig(min_idle=0, max_size=1, reset=False, check_changes=False, keeper=False,
                               hardening=Hardening(network=True, memory_mb=2048, cpus=2.0, pids=2048))  # a thread per connection
    return PLAIN_POOL


POOL_KEYS = ("entrypoint", "services")  # what a task needs of its pool itself, not of its containers' confinement


def pool_configs(images: list[str], needs: dict[str, dict[str, Any]]) -> dict[str, ImagePoolConfig]:
    """Each image's pool: its defaults with what its tasks need (a Harbor task's resources and
    network; its CPUs no more than this machine has, which the engine would refuse)."""
    configs = {}
    for image in images:
        config = default_pool_config(image)
        if image in needs:
            wanted = {k: v for k, v in needs[image].items() if k not in POOL_KEYS}
            wanted["cpus"] = min(float(wanted.get("cpus", 1.0)), float(os.cpu_count() or 1))
            pool = {k: v for k, v in needs[image].items() if k in POOL_KEYS}
            config = ImagePoolConfig.model_validate({**config.model_dump(), **pool,
                                                     "hardening": {**config.hardening.model_dump(), **wanted}})
        configs[image] = config
    return configs


_S = TypeVar("_S")  # what a shared service is

class Runtime:
    def __init__(self, docker: aiodocker.Docker | None, pool: SandboxProvider, *, data_dir: Path | None = None,
                 reward_mode: RewardMode = "original", gold: GoldCache | None = None) -> None:
        self.docker = docker
        self.pool = pool
        self.data_dir = data_dir
        self.reward_mode: RewardMode = reward_mode
        self.gold = gold or GoldCache()
        self.watch: EngineWatch | None = None
        self.engine_settings = EngineSettings()  # its engine calls' deadline, and whom a stalled one tells
        self._services: dict[str, tuple[Any, AsyncExitStack]] = {}
        self._starting: SharedWork[str, Any] = SharedWork("service")
        self._digests: dict[str, str] = {}
        self._workdirs: dict[str, str] = {}
        self._stack = AsyncExitStack()
        # Closed last of the runtime's own (before the pool): shared work still running is stopped.
        self._stack.push_async_callback(self.gold.aclose)
        self._stack.push_async_callback(self._starting.aclose)

    @classmethod
    @asynccontextmanager
    async def open(cls, *, data_dir: Path | None = None, reward_mode: RewardMode = "original",
                   images: dict[str, ImagePoolConfig] | None = None, limits: ActionLimits | None = None,
                   run_id: str | None = None, gold_dir: Path | None = None,
                   engine_wait: float | None = None, engine_timeout: float = CALL_TIMEOUT) -> AsyncIterator[Runtime]:
        """`gold_dir` keeps gold results across runs (keyed by image digest, so a rebuilt image
        recomputes them). `engine_wait`: seconds to wait for an engine that went away (None: no
        watching; an engine error is then only the episode's). `engine_timeout`: seconds an engine
        call may take; past it the engine is taken for hung (watched: an outage until it makes a
        container again)."""
        watches: list[EngineWatch] = []  # the watch, once it runs: told of every call that stalled

        def stalled(reason: str) -> None:
            for watch in watches:
                watch.stalled(reason)

        settings = EngineSettings(call_timeout=engine_timeout, on_stall=stalled)
        with engine_settings(settings):
            async with engine() as docker:
                async with Pool(docker, {}, run_id=run_id, limits=limits, default_config=PLAIN_POOL) as pool:
                    for image, config in (images or {}).items():  # configured, not yet warmed
                        pool.configure(image, config)
                    runtime = cls(docker, pool, data_dir=data_dir, reward_mode=reward_mode, gold=GoldCache(gold_dir))
                    runtime.engine_settings = settings
                    async with runtime._stack:
                        if engine_wait is not None:
                            runtime.watch = await runtime._stack.enter_async_context(EngineWatch(
                                docker, engine_host(), limit=engine_wait, on_lost=pool.suspend,
                                on_back=runtime.recover, probe=pool.probe, call_timeout=engine_timeout))
                            watches.append(runtime.watch)
                        yield runtime

    @classmethod
    @asynccontextmanager
    async def local(cls, provider: SandboxProvider, *, data_dir: Path | None = None,
                    reward_mode: RewardMode = "original") -> AsyncIterator[Runtime]:
        """A runtime without Docker: `provider` leases the sandboxes (foundation.local.LocalProvider
        for tests of environment logic and strategies); images are known by name only."""
        runtime = cls(None, provider, data_dir=data_dir, reward_mode=reward_mode)
        async with runtime._stack:
            yield runtime

    @property
    def generation(self) -> int:
        """How many times the engine came back; an episode that began in an earlier generation
        lost its containers with the engine."""
        return self.watch.generation if self.watch is not None else 0

    async def engine_lost_since(self, generation: int) -> bool:
        """After an infra error: whether the engine went away since `generation` (waiting for it
        to come back first, if it is away now). EngineUnavailable once it stays away too long."""
        return self.watch is not None and await self.watch.lost_since(generation)

    async def recover(self) -> None:
        """The engine is back: forget the services (their containers died) and the containers."""
        services, self._services = list(self._services.values()), {}
        for _, stack in services:
            await self._close_service(stack)
        await self.pool.recover()

    async def _inspect(self, image: str) -> dict[str, Any]:
        if self.docker is None:  # a local provider's image is a name: no digest of its own, "/" its workdir
            return {"Id": f"local:{image}", "Config": {"WorkingDir": "/"}}
        async with engine_call(f"inspect image {image}", image=image):
            return await self.docker.images.inspect(image)

    async def image_digest(self, image: str) -> str:
        """The image's id: gold results are cached per image, since an image change can change them."""
        if image not in self._digests:
            self._digests[image] = (await self._inspect(image))["Id"]
        return self._digests[image]

    async def image_workdir(self, image: str) -> str:
        """The image's WORKDIR: where the original's un-cd'ed commands (gold, git status) ran."""
        if image not in self._workdirs:
            config = (await self._inspect(image)).get("Config") or {}
            self._workdirs[image] = config.get("WorkingDir") or "/"
        return self._workdirs[image]

    def capacity(self, image: str) -> int | None:
        """How many of `image`'s containers serve, or soon will, for a scheduler to steer by; None
        where there is no limit to steer by (no image: a kind without containers; a shared service)."""
        return None if not image or is_service(image) else self.pool.capacity(image)

    def engine_client(self, needed_for: str) -> aiodocker.Docker:
        """The Docker client, for what only a Docker engine can do (`needed_for`, in words); a
        runtime over a Docker-free provider has none: SandboxError saying so."""
        if self.docker is None:
            raise SandboxError(f"{needed_for} needs a Docker engine; this runtime has none (a local sandbox provider)")
        return self.docker

    def configure_service(self, image: str) -> None:
        """A shared server's pool (a database: reachable from the host, one container, reset by its
        own means), unless the sweep sized it."""
        if isinstance(self.pool, Pool):
            self.pool.configure(image, default_pool_config(image), replace=False)

    async def service(self, name: str, start: Callable[[AsyncExitStack], Awaitable[_S]]) -> _S:
        """A shared service (like the SQL server), started once on first use and stopped with the
        runtime, or when the engine comes back after going away (then started again on next use).
        Its start runs in a task of the runtime's (SharedWork): an episode cancelled while it waits
        stops only its own wait, and a start that fails fails every episode waiting for it."""
        if name in self._services:
            return cast(_S, self._services[name][0])
        return cast(_S, await self._starting.get(name, lambda: self._start_service(name, start)))

    async def _start_service(self, name: str, start: Callable[[AsyncExitStack], Awaitable[Any]]) -> Any:
        stack = AsyncExitStack()
        try:
            value = await start(stack)
        except BaseException:
            await stack.aclose()
            raise
        self._services[name] = (value, stack)
        self._stack.push_async_callback(self._stop_service, name, stack)
        return value

    async def drop_service(self, name: str, value: Any) -> None:
        """Forget the service `value` (its container died): the next use starts it again. A no-op
        when another start has already replaced it."""
        entry = self._services.get(name)
        if entry is None or entry[0] is not value:
            return
        del self._services[name]
        log.warning("service_died", service=name, hint="started again for the next episode")
        await self._close_service(entry[1])

    async def _close_service(self, stack: AsyncExitStack) -> None:
        try:
            async with asyncio.timeout(SERVICE_CLOSE_TIMEOUT):
                await stack.aclose()
        except Exception as exc:  # noqa: BLE001 — a dead service's own close fails: nothing is left to save
            log.info("service_close_failed", error=repr(exc))

    async def _stop_service(self, name: str, stack: AsyncExitStack) -> None:
        if self._services.get(name, (None, None))[1] is stack:
            del self._services[name]
            await stack.aclose()
