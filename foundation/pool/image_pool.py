"""The containers of one image: its leases, waiters, growth, background resets and retirements.

Only the owning `Pool` (foundation/pool/pool.py) calls into an ImagePool. A lease takes an idle
container without awaiting anything when one is there; otherwise it waits, first come first
served, while containers are created up to `max_size`. A released container is reset in the
background and offered to the oldest waiter. Any failure of a background step retires the
container (and the pool grows again): no container stays `resetting` for good.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

import aiodocker
import structlog

from foundation.concurrency import TaskOwner
from foundation.errors import EngineLost, OrchestratorError, SandboxError
from foundation.pool.config import ImagePoolConfig
from foundation.pool.container import (MAX_USES, POOL_CLOSED, SERVED_ONCE, ContainerState, PooledContainer,
                                      create_container)
from foundation.pool.cpu import CpuGauge
from foundation.pool.disk import DiskCaps

log = structlog.get_logger(__name__)


class PoolClosed(OrchestratorError):
    pass


class ImagePool:
    """The containers of one image. Only the owning Pool calls into it."""

    def __init__(self, docker: aiodocker.Docker, image: str, config: ImagePoolConfig, labels: dict[str, str],
                 tasks: TaskOwner, cpu: CpuGauge | None = None, disk: DiskCaps | None = None) -> None:
        self.docker, self.image, self.config, self.labels = docker, image, config, labels
        self.disk = disk
        self.tasks = tasks
        self.cpu = cpu
        self.members: dict[str, PooledContainer] = {}
        self.idle: deque[PooledContainer] = deque()
        self.waiters: deque[asyncio.Future[PooledContainer]] = deque()
        self.creating = 0
        # Containers kept idle: the config's, raised while the pool warms (Pool.warm). The pool's
        # own: its config may be shared with other pools (environments/runtime.py's PLAIN_POOL).
        self.min_idle = config.min_idle
        self.closed = False
        self.suspended: str | None = None  # why no container can be made now (the engine is away)
        self.epoch = 0  # moves on at each recovery: a container made before it is not trusted
        self.lost: set[str] = set()  # containers we could not remove (the engine was away)
        self.idle_added = asyncio.Event()
        self.replacements = 0  # single-use containers given back, whose successors are not yet being made

    @property
    def size(self) -> int:
        return len(self.members) + self.creating

    @property
    def capacity(self) -> int:
        """Containers that serve, or soon will: leased, idle, being reset or being created."""
        serving = (ContainerState.IDLE, ContainerState.LEASED, ContainerState.RESETTING)
        return self.creating + sum(1 for m in self.members.values() if m.state in serving)

    def counts(self) -> dict[str, int]:
        by_state = {state.value: 0 for state in ContainerState if state is not ContainerState.REMOVED}
        for member in self.members.values():
            if member.state is not ContainerState.REMOVED:  # removed, its retirement not yet resumed to forget it
                by_state[member.state.value] += 1
        by_state["warming"] += self.creating
        return by_state

    # ------------------------------------------------------------------ acquiring

    async def acquire(self) -> PooledContainer:
        if self.closed:
            raise PoolClosed("the pool is closed")
        if self.suspended is not None:
            raise EngineLost(f"no container while the engine is away ({self.suspended})", image=self.image)
        while self.idle:  # fast path: no await at all
            member = self.idle.popleft()
            if member.state is ContainerState.IDLE:
                member.move_to(ContainerState.LEASED)
                return member
        waiter: asyncio.Future[PooledContainer] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        self.grow()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release(waiter.result())  # handed over just as we were cancelled
            else:
                self._forget(waiter)
            raise

    def _forget(self, waiter: asyncio.Future[PooledContainer]) -> None:
        try:
            self.waiters.remove(waiter)
        except ValueError:
            pass

    def grow(self) -> None:
        """Start creating containers for the waiters and the idle minimum, within max_size."""
        live_waiters = sum(1 for w in self.waiters if not w.done())
        # A container being reset is idle again in milliseconds, a new one takes hundreds: count
        # resets as on their way (a failed reset retires its container, which grows the pool again).
        resetting = sum(1 for m in self.members.values() if m.state is ContainerState.RESETTING)
        if live_waiters and self._wait_instead():
            # Every lease ends, and each end hands its container to the oldest waiter; the
            # pool's CPU sampler calls grow() again once the CPUs have room.
            live_waiters = 0
        wanted = live_waiters + max(self.min_idle - len(self.idle), 0) - self.creating - resetting
        # A single-use container given back is made again (release), as a reset one would be idle again.
        wanted = max(wanted, self.replacements)
        while wanted > 0 and self.size < self.config.max_size and not self.closed and self.suspended is None:
            self.creating += 1
            wanted -= 1
            self.replacements = max(self.replacements - 1, 0)
            self.tasks.spawn(self._create(), name=f"create {self.image}")

    def _wait_instead(self) -> bool:
        """Saturated CPUs and 2 or more containers serving: another one costs CPU (about 0.4 s to
        create) and adds no throughput, so a waiter is better off with the next one to come back."""
        return (self.config.wait_when_cpu_busy and self.cpu is not None and self.capacity >= 2
                and self.cpu.saturated())

    async def _create(self) -> None:
        epoch, started = self.epoch, time.monotonic()
        try:
            member = await create_container(self.docker, self.image, self.config.hardening, self.labels, self.disk,
                                            keeper=self.config.keeper, entrypoint=self.config.entrypoint,
                                            services=self.config.services)
        except Exception as exc:
            self.creating -= 1
            if self.suspended is None:
                log.warning("pool.create_failed", image=self.image, error=str(exc))
            self._fail_one_waiter(exc)
            return
        self.creating -= 1
        self.members[member.id] = member
        log.debug("pool.created", image=self.image, container=member.id[:12], seconds=round(time.monotonic() - started, 3))
        if self.closed or epoch != self.epoch or self.suspended is not None:
            await self._retire(member, POOL_CLOSED if self.closed else "made before the engine came back")
            return
        self._offer(member)

    def _fail_one_waiter(self, exc: Exception) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(exc)
                return

    def _offer(self, member: PooledContainer) -> None:
        """Hand a ready container to the oldest waiter, or keep it idle."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                member.move_to(ContainerState.LEASED)
                waiter.set_result(member)
                return
        member.move_to(ContainerState.IDLE)
        self.idle.append(member)
        self.idle_added.set()

    # ------------------------------------------------------------------ releasing

    def release(self, member: PooledContainer, broken_reason: str | None = None) -> None:
        """Synchronous on purpose: it can't be interrupted half-way by a cancellation."""
        if member.state is ContainerState.REMOVED:
            return
        if member.single_use and broken_reason is None and member.state is not ContainerState.BROKEN:
            # Its services (or what its entrypoint started) hold the episode's state: it is made anew
            # instead of reset, its successor at once, as a reset one would be idle again.
            broken_reason = SERVED_ONCE
            self.replacements += 1
            self.grow()
        # Broken already: the pool forgot it while it was leased (the engine went away; its removal
        # may still be under way), so it is retired, never reset
        if (broken_reason is not None or member.state is ContainerState.BROKEN or member.driver is None
                or member.driver.closed):
            if member.state is not ContainerState.BROKEN:
                member.move_to(ContainerState.BROKEN, broken_reason or "driver lost")
            self.tasks.spawn(self._retire(member, member.broken_reason), name=f"retire {member.id[:12]}")
            return
        member.move_to(ContainerState.RESETTING)
        self.tasks.spawn(self._reset(member), name=f"reset {member.id[:12]}")

    async def _reset(self, member: PooledContainer) -> None:
        """In the background. Whatever goes wrong retires the container: this task never dies with
        a container stuck in `resetting`, which would shrink the pool for good."""
        started = time.monotonic()
        try:
            if self.config.reset:
                if member.driver is None:
                    raise SandboxError("container has no driver", container_id=member.id, image=self.image)
                await member.driver.request("reset", wait=120.0)
            reset = time.monotonic()
            if self.config.check_changes:
                await self._check_changes(member)
            log.debug("pool.reset", image=self.image, container=member.id[:12], reset_s=round(reset - started, 3),
                      check_s=round(time.monotonic() - reset, 3))
        except Exception as exc:  # noqa: BLE001 — any failure (OSError of the upper-dir walk too) retires it
            await self._retire(member, f"reset failed: {exc!r}")
            return
        if member.state is not ContainerState.RESETTING:  # forgotten meanwhile (the engine went away)
            return
        if member.uses >= self.config.max_uses:
            await self._retire(member, MAX_USES)
        elif self.closed:
            await self._retire(member, POOL_CLOSED)
        else:
            self._offer(member)

    async def _check_changes(self, member: PooledContainer) -> None:
        """Files the reset can't restore (outside its roots) changed: the container is tainted."""
        assert member.driver is not None
        roots = member.driver.roots
        changed = await member.changed_paths(prune=tuple(roots)) - member.initial_changes
        tainted = sorted(path for path in changed if not _restorable(path, roots))
        if tainted:
            raise ChangedSystem(f"{len(tainted)} system paths changed, e.g. {tainted[0]}")

    async def _retire(self, member: PooledContainer, reason: str | None) -> None:
        """Mark broken (if it is not yet), remove, and grow again. A removal the engine can't do
        now is remembered in `lost`, and the container is no longer counted against max_size."""
        if member.state not in (ContainerState.BROKEN, ContainerState.REMOVED):
            member.move_to(ContainerState.BROKEN, reason)
        # It stays a member until removed: a pool closing meanwhile (which cancels this task)
        # finds it there and waits for this same removal.
        try:
            await member.remove()
        except SandboxError as exc:
            self.lost.add(member.id)
            log.info("pool.remove_failed", image=self.image, container=member.id[:12], error=str(exc))
        self.members.pop(member.id, None)
        log.debug("pool.retired", image=self.image, container=member.id[:12], reason=reason)
        self.grow()

    # ------------------------------------------------------------------ health

    async def check_health(self) -> None:
        """Ping idle containers that were not used for a while; retire those that don't answer."""
        now = time.monotonic()
        for member in list(self.idle):
            if now - member.last_checked < self.config.health_interval or member.state is not ContainerState.IDLE:
                continue
            try:
                await member.ping()
                member.last_checked = time.monotonic()
            except SandboxError as exc:
                if member.state is ContainerState.IDLE:
                    self.idle.remove(member)
                    await self._retire(member, f"health check failed: {exc}")

    def _fail_waiters(self, error: Exception) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)

    def suspend(self, reason: str) -> None:
        """The engine is away: fail the waiting leases (their episodes wait for the engine
        instead) and make no container until `recover`."""
        self.suspended = reason
        self._fail_waiters(EngineLost(f"no container while the engine is away ({reason})", image=self.image))

    async def forget(self) -> None:
        """The engine is back: forget every container (they died with it, or their drivers'
        streams did) and remove what is left of them. The pool stays suspended until `resume`."""
        self.epoch += 1
        self.idle.clear()
        members, self.members = list(self.members.values()), {}
        for member in members:
            if member.state not in (ContainerState.BROKEN, ContainerState.REMOVED):
                member.move_to(ContainerState.BROKEN, "the engine went away")
        results = await asyncio.gather(*(m.remove() for m in members), return_exceptions=True)
        self.lost.update(m.id for m, r in zip(members, results) if isinstance(r, BaseException))

    def resume(self) -> None:
        self.suspended = None
        self.grow()

    async def close(self) -> None:
        self.closed = True
        self._fail_waiters(PoolClosed("the pool closed while waiting for a container"))
        self.idle.clear()
        members = list(self.members.values())
        results = await asyncio.gather(*(m.remove() for m in members), return_exceptions=True)
        self.lost.update(m.id for m, r in zip(members, results) if isinstance(r, BaseException))
        self.members.clear()


class ChangedSystem(Exception):
    pass


def _restorable(path: str, roots: list[str]) -> bool:
    return path == "/" or any(path == r or path.startswith(r + "/") for r in roots)
