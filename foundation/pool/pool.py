"""The warm pool: leases of ready containers per image, with resets off the critical path.

    async with Pool(docker, {"intercode/nl2bash-fs1": ImagePoolConfig(min_idle=4)}) as pool:
        async with pool.lease("intercode/nl2bash-fs1") as sandbox:
            result = await sandbox.run("ls /testbed")

A lease takes an idle container without awaiting anything when one is there. When the lease ends,
the container is reset in the background and handed to the next waiter (first come, first
served) or put back as idle (foundation/pool/image_pool.py). On start the pool reaps containers
of dead owners; on exit it removes every container it made, also on an exception or cancellation
(Ctrl-C, SIGTERM), and only those: its run label is its own.

When the engine goes away (see foundation.engine_watch), `suspend` fails the waiting leases and
stops creating; `recover`, once the engine is back, forgets every container (they died with the
engine, or their drivers' streams did) and removes what is left of them. A container the pool
could not remove keeps its label, so the next recovery or the close finds it again; if the engine
never answers again, the next start on this host reaps it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import aiodocker
import structlog

from foundation.concurrency import TaskOwner, all_of
from foundation.engine import engine_call
from foundation.errors import EngineLost, ImageError, SandboxError
from foundation.pool.config import ActionLimits, ImagePoolConfig
from foundation.pool.cpu import CpuGauge
from foundation.pool.disk import DiskCaps
from foundation.pool.disk import probe as probe_disk
from foundation.pool.image_pool import ImagePool, PoolClosed
from foundation.pool.ownership import (
    RUN,
    Owner,
    labels_for,
    reap_orphans,
    remove_networks,
    remove_quietly,
)
from foundation.pool.container_sandbox import ContainerSandbox

log = structlog.get_logger(__name__)


class Pool:
    """Warm containers for several images. Use as `async with Pool(...) as pool`."""

    def __init__(self, docker: aiodocker.Docker, images: dict[str, ImagePoolConfig] | None = None, *,
                 run_id: str | None = None, limits: ActionLimits | None = None,
                 default_config: ImagePoolConfig | None = None, cpu: CpuGauge | None = None) -> None:
        self.docker = docker
        self.default_config = default_config or ImagePoolConfig()  # an image's that was not configured
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.owner = Owner.me()
        self.limits = limits or ActionLimits()
        self._closer = TaskOwner(f"pool-{self.run_id}-close")  # the close, which outlives a Ctrl-C
        self.tasks = TaskOwner(f"pool-{self.run_id}")
        self._configs = dict(images or {})
        self._pools: dict[str, ImagePool] = {}
        self._health: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None
        self._suspended: str | None = None
        self.disk: DiskCaps | None = None  # found on entry: how this engine caps a container's disk
        self.cpu = cpu or CpuGauge()

    async def __aenter__(self) -> Pool:
        await reap_orphans(self.docker)
        self.disk = await probe_disk(self.docker)
        if self.disk.mode == "none":
            log.warning("pool.disk_not_capped", reason=self.disk.reason,
                        hint="an agent can fill the host's disk; see the README's disk cap section")
        for image in self._configs:
            await self._check_image(image)
            self._pool_for(image).grow()
        self._health = self.tasks.spawn(self._health_loop(), name="health")
        self.tasks.spawn(self._cpu_loop(), name="cpu")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _check_image(self, image: str) -> None:
        try:
            async with engine_call(f"inspect image {image}", image=image):
                await self.docker.images.inspect(image)
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                raise ImageError(f"image {image} is not built: run `python -m orchestrator images build`") from exc
            raise

    def _pool_for(self, image: str) -> ImagePool:
        pool = self._pools.get(image)
        if pool is None:
            config = self._configs.setdefault(image, self.default_config)
            pool = self._pools[image] = ImagePool(self.docker, image, config,
                                                  labels_for(self.owner, self.run_id, image), self.tasks, self.cpu,
                                                  self.disk)
            if self._suspended is not None:
                pool.suspend(self._suspended)
        return pool

    def configure(self, image: str, config: ImagePoolConfig, *, replace: bool = True) -> None:
        """The containers of `image` made by `config` from now on, instead of the default's (before
        its first lease: the pool of an image that served keeps its config). `replace=False`: only
        for an image that has none yet."""
        if image not in self._pools and (replace or image not in self._configs):
            self._configs[image] = config

    @asynccontextmanager
    async def lease(self, image: str) -> AsyncIterator[ContainerSandbox]:
        """Hold one container of `image` for the block. A SandboxError inside marks it broken."""
        if self._closing is not None:
            raise PoolClosed("the pool is closed")
        if self._suspended is not None:
            raise EngineLost(f"no container while the engine is away ({self._suspended})", image=image)
        pool = self._pool_for(image)
        member = await pool.acquire()
        sandbox = ContainerSandbox(member, self.limits)
        broken: str | None = None
        try:
            yield sandbox
        except SandboxError as exc:
            broken = str(exc)
            raise
        finally:
            sandbox.close()
            pool.release(member, broken or sandbox.broken)

    def capacity(self, image: str) -> int:
        """How many containers of `image` serve, or soon will (0 before its first lease)."""
        pool = self._pools.get(image)
        return pool.capacity if pool is not None else 0

    def stats(self) -> dict[str, dict[str, int]]:
        return {image: pool.counts() for image, pool in self._pools.items()}

    async def probe(self) -> None:
        """Whether the engine makes containers again: create one (never started) of an image this
        pool serves, and remove it, each within its deadline (EngineStalled past it). The container
        carries the run's label, so one whose creation is answered late is reaped with the others."""
        image = next(iter(self._pools), None)
        if image is None:
            async with engine_call("ask the engine's version"):
                await self.docker.version()
            return
        name = f"intercode-probe-{uuid.uuid4().hex[:10]}"
        async with engine_call("create a probe container", image=image):
            probe = await self.docker.containers.create(
                {"Image": image, "Labels": labels_for(self.owner, self.run_id, image),
                 "HostConfig": {"NetworkMode": "none"}}, name=name)
        await remove_quietly(self.docker, probe.id)

    async def warm(self, image: str, count: int, timeout: float = 120.0) -> None:
        """Create containers until `count` of the image are idle, without keeping that many idle
        afterwards (a sweep warms its pools before its episodes start)."""
        pool = self._pool_for(image)
        before = pool.min_idle
        try:
            await self.wait_idle(image, min(count, pool.config.max_size), timeout)
        finally:
            pool.min_idle = before

    async def wait_idle(self, image: str, count: int, timeout: float = 120.0) -> None:
        """Wait until `count` containers of the image are idle (for warm-up before a benchmark)."""
        pool = self._pool_for(image)
        pool.min_idle = max(pool.min_idle, count)
        pool.grow()
        try:
            async with asyncio.timeout(timeout):
                while len(pool.idle) < count:
                    pool.idle_added.clear()
                    await pool.idle_added.wait()
        except TimeoutError:
            raise SandboxError(f"only {len(pool.idle)} of {count} containers warm after {timeout:.0f} s",
                               image=image) from None

    async def _cpu_loop(self) -> None:
        """Sample the CPUs; when they have room again, let pools with waiting leases grow."""
        while True:
            self.cpu.sample()
            if not self.cpu.saturated():
                for pool in list(self._pools.values()):
                    if pool.waiters:
                        pool.grow()
            await asyncio.sleep(0.25)

    async def _health_loop(self) -> None:
        """Runs for the pool's life: one round's failure is logged, and the next round comes."""
        while True:
            await asyncio.sleep(min((p.config.health_interval for p in self._pools.values()), default=30.0) / 2)
            for pool in list(self._pools.values()):
                if pool.suspended is None:
                    try:
                        await pool.check_health()
                    except Exception as exc:  # noqa: BLE001 — the checks must go on for the other containers
                        log.warning("pool.health_check_failed", image=pool.image, error=repr(exc))

    def suspend(self, reason: str) -> None:
        """The engine went away: no new containers, waiting leases fail with EngineLost."""
        self._suspended = reason
        for pool in self._pools.values():
            pool.suspend(reason)

    async def recover(self) -> None:
        """The engine is back: forget every container of this run and remove what is left of them
        (and of those we could not remove before), then serve leases again. SandboxError when the
        engine went away again meanwhile."""
        await all_of(pool.forget() for pool in self._pools.values())
        removed = await self._remove_leftovers()  # before any new container carries the label
        self._suspended = None
        for pool in self._pools.values():
            pool.resume()
        log.info("pool.recovered", run=self.run_id, leftovers_removed=removed)

    async def aclose(self) -> None:
        """Remove every container of this run. Runs to the end even if cancelled again meanwhile."""
        if self._closing is None:
            self._closing = self._closer.start(self._close(), name="close")
        try:
            await asyncio.shield(self._closing)
        except asyncio.CancelledError:
            await self._closing  # a second Ctrl-C: finish removing, then let the cancellation through
            raise

    async def _close(self) -> None:
        for pool in self._pools.values():
            pool.closed = True
        await self.tasks.aclose()
        await asyncio.gather(*(pool.close() for pool in self._pools.values()), return_exceptions=True)
        try:
            removed = await self._remove_leftovers()
        except SandboxError as exc:
            lost = sum(len(pool.lost) for pool in self._pools.values())
            log.warning("pool.containers_left", run=self.run_id, containers=lost or "unknown", error=str(exc),
                        hint="the engine does not answer; the next start on this host removes them")
            return
        log.debug("pool.closed", run=self.run_id, leftovers=removed)

    async def _remove_leftovers(self) -> int:
        """Remove every container labelled with this run that the pool no longer holds: those
        whose creation was cancelled before we learnt their id, and those we could not remove."""
        async with engine_call("list the run's containers"):
            found = await self.docker.containers.list(all=True, filters={"label": [f"{RUN}={self.run_id}"]})
        held = {member_id for pool in self._pools.values() for member_id in pool.members}
        leftovers = [c.id for c in found if c.id not in held]
        results = await asyncio.gather(*(remove_quietly(self.docker, cid) for cid in leftovers),
                                       return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        for pool in self._pools.values():
            pool.lost.difference_update(leftovers)
        if not failed:  # the networks of groups the pool no longer holds (their containers are gone now)
            networks = {m.group.network for pool in self._pools.values() for m in pool.members.values() if m.group}
            try:
                await remove_networks(self.docker, run=self.run_id, keep=networks)
            except SandboxError as exc:
                failed.append(exc)
        if failed:  # still labelled: the next listing (a recovery, the close) or the next start finds them
            log.warning("pool.remove_failed", containers=len(failed), error=str(failed[0]))
        return len(leftovers) - len(failed)


if TYPE_CHECKING:  # the type checker holds the pool to the protocol
    from foundation.sandbox import SandboxProvider

    _provider: type[SandboxProvider] = Pool
