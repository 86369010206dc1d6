"""One pooled container: its state machine, its creation with hardening, and its removal."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import time
import uuid
from typing import Any

import aiodocker
import structlog

from foundation.concurrency import SharedWork
from foundation.engine import engine_call
from foundation.errors import ContainerDied, ImageError, SandboxError
from foundation.pool.config import Hardening, ServiceSpec
from foundation.pool.disk import DiskCaps
from foundation.pool.driver import DriverClient, start_driver
from foundation.pool.group import MAIN_ALIAS, ServiceGroup, start_group
from foundation.pool.ownership import remove_quietly
from icdriver import protocol

log = structlog.get_logger(__name__)


class ContainerState(enum.Enum):
    WARMING = "warming"
    IDLE = "idle"
    LEASED = "leased"
    RESETTING = "resetting"
    BROKEN = "broken"
    REMOVED = "removed"


# The only transitions there are. Anything may break; only a broken container is removed.
TRANSITIONS: dict[ContainerState, frozenset[ContainerState]] = {
    ContainerState.WARMING: frozenset({ContainerState.IDLE, ContainerState.LEASED, ContainerState.BROKEN}),
    ContainerState.IDLE: frozenset({ContainerState.LEASED, ContainerState.RESETTING, ContainerState.BROKEN}),
    ContainerState.LEASED: frozenset({ContainerState.RESETTING, ContainerState.BROKEN}),
    ContainerState.RESETTING: frozenset({ContainerState.IDLE, ContainerState.LEASED, ContainerState.BROKEN}),
    ContainerState.BROKEN: frozenset({ContainerState.REMOVED}),
    ContainerState.REMOVED: frozenset(),
}


# Reasons a container is taken out of service that are no one's fault (the pool's own cleanup, a
# shutdown among them): no `pool.container_broken`, only its removal, at debug.
REMOVED_BY_POOL, SERVED_ONCE = "removed by pool", "served its one lease"
POOL_CLOSED, MAX_USES = "pool closed", "reached max_uses"
ROUTINE_ENDS = frozenset({REMOVED_BY_POOL, SERVED_ONCE, POOL_CLOSED, MAX_USES})


class IllegalTransition(RuntimeError):
    pass


class PooledContainer:
    """A container of the pool, with its driver. All state changes go through `move_to`."""

    def __init__(self, docker: aiodocker.Docker, image: str, container: aiodocker.containers.DockerContainer):
        self.docker = docker
        self.image = image
        self.container = container
        self.id: str = container.id
        self.state = ContainerState.WARMING
        self.driver: DriverClient | None = None
        self.uses = 0
        self.broken_reason: str | None = None
        self.last_checked = time.monotonic()
        # Paths in the engine's diff from the start (docker-init's mount point, for one): not the agent's.
        self.initial_changes: frozenset[str] = frozenset()
        self.upper_dir: str | None = None
        self.group: ServiceGroup | None = None  # the services beside it, if its image has any
        self.single_use = False  # what it started beside the agent would not survive a reset: never reset
        self._removal: SharedWork[str, None] = SharedWork(f"remove {self.id[:12]}")

    def move_to(self, new: ContainerState, reason: str | None = None) -> None:
        if new not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"container {self.id[:12]}: {self.state.value} -> {new.value}")
        if new is ContainerState.BROKEN:
            self.broken_reason = reason
            if reason not in ROUTINE_ENDS:  # a container gone bad, not the pool's own doing
                log.info("pool.container_broken", image=self.image, container=self.id[:12], reason=reason)
        if new is ContainerState.REMOVED:
            log.debug("pool.container_removed", image=self.image, container=self.id[:12], reason=self.broken_reason)
        if new is ContainerState.LEASED:
            self.uses += 1
        self.state = new

    @property
    def usable(self) -> bool:
        return self.state not in (ContainerState.BROKEN, ContainerState.REMOVED)

    async def ping(self) -> None:
        if self.driver is None:
            raise SandboxError("container has no driver", container_id=self.id, image=self.image)
        await self.driver.request(protocol.HELLO, wait=10.0)

    async def changed_paths(self, prune: tuple[str, ...] = ()) -> set[str]:
        """Paths added, changed or deleted against the image, not descending into `prune`.

        The engine's diff API takes ~0.5 s and serialises in dockerd, so when the engine is local
        we read the container's overlay2 upper directory instead: it holds exactly what changed.
        """
        if self.upper_dir is not None:
            return await asyncio.to_thread(_walk_upper, self.upper_dir, prune)
        async with engine_call("diff the container", container_id=self.id, image=self.image):
            changes = await self.docker._query_json(f"containers/{self.id}/changes")  # noqa: SLF001 — no public API
        return {change["Path"] for change in changes or []}

    async def running(self) -> bool:
        """Whether the container still runs (its first process lives)."""
        async with engine_call("inspect the container", container_id=self.id, image=self.image):
            info = await self.container.show()
        return bool((info.get("State") or {}).get("Running"))

    async def restart_driver(self) -> None:
        """A driver in place of one that was killed (the container still running)."""
        if self.driver is not None:
            await self.driver.close()
        self.driver = await start_driver(self.container, image=self.image)

    async def locate_upper_dir(self) -> None:
        async with engine_call("inspect the container", container_id=self.id, image=self.image):
            info = await self.container.show()
        driver = info.get("GraphDriver") or {}
        upper = (driver.get("Data") or {}).get("UpperDir") if driver.get("Name") == "overlay2" else None
        self.upper_dir = upper if upper and os.access(upper, os.R_OK | os.X_OK) else None

    async def remove(self) -> None:
        """Close the driver and force-remove the container. Safe to call twice, or from several
        tasks at once: they all wait for the one removal, which a cancellation does not stop.
        A removal that failed (SandboxError: the engine is away) is tried afresh by the next call."""
        await self._removal.get("removal", self._remove)

    async def _remove(self) -> None:
        if self.state is ContainerState.REMOVED:
            return
        if self.state is not ContainerState.BROKEN:
            self.move_to(ContainerState.BROKEN, REMOVED_BY_POOL)
        if self.driver is not None:
            await self.driver.close()
        await remove_quietly(self.docker, self.id)
        if self.group is not None:
            await self.group.remove()
        self.move_to(ContainerState.REMOVED)


# The first process of an agent's container: a bash that only waits (and reaps what is orphaned to
# it). As PID 1 it is the one process a `kill -9 -1` inside the container spares, so the container
# outlives an agent that kills everything; docker-init's child, `sleep infinity`, would not. It
# ignores the signals it could be sent from inside (SIGKILL to a namespace's init is ignored by the
# kernel); the pool removes its containers with SIGKILL from outside.
KEEPER = ["/usr/lib/intercode/bash", "-c", "trap '' TERM INT HUP QUIT USR1 USR2; while :; do sleep 86400 & wait $!; done"]


def container_config(image: str, hardening: Hardening, labels: dict[str, str], disk: DiskCaps | None = None,
                     *, keeper: bool = True, entrypoint: bool = False, network: str | None = None) -> dict[str, Any]:
    """The engine's create body: our keeper as PID 1 (else the image's own CMD under docker-init;
    with `entrypoint`, the image's ENTRYPOINT with our keeper its arguments), and confinement.
    `network`: a group's own network (its services reach the container as `main`)."""
    host_config: dict[str, Any] = {
        "Init": not keeper,
        "NetworkMode": network or ("bridge" if hardening.network else "none"),
        "Memory": hardening.memory_mb << 20,
        "MemorySwap": hardening.memory_mb << 20,
        "NanoCpus": int(hardening.cpus * 1e9),
        "PidsLimit": hardening.pids,
        "CapDrop": hardening.cap_drop,
        "CapAdd": hardening.cap_add,
        "Privileged": False,
        "SecurityOpt": ["no-new-privileges"],
        "AutoRemove": False,
    }
    if not hardening.network and network is None:
        # Without a network the host's resolver can't answer: name lookups (dig, curl, ping) would
        # wait out their retries, often past the action timeout. Pointing them at an address where
        # nothing listens makes them fail at once, as they would on an offline machine.
        host_config["Dns"] = ["127.0.0.1"]
    if hardening.binds:
        host_config["Binds"] = list(hardening.binds)
    if hardening.tmpfs:
        host_config["Tmpfs"] = dict(hardening.tmpfs)
    storage_opt = disk.storage_opt(hardening.disk_mb) if disk is not None else None
    if storage_opt:
        host_config["StorageOpt"] = storage_opt
    body: dict[str, Any] = {"Image": image, "Hostname": hardening.hostname, "Labels": labels, "HostConfig": host_config,
                            "AttachStdin": False, "AttachStdout": False, "AttachStderr": False, "Tty": False}
    if network is not None:
        body["NetworkingConfig"] = {"EndpointsConfig": {network: {"Aliases": [MAIN_ALIAS]}}}
    if not keeper:
        return body
    # Our keeper and driver run as root, whatever the image's USER: the driver starts the agent's
    # processes as that user (icdriver/users.py)
    body["User"] = "0:0"
    return {**body, "Cmd": KEEPER} if entrypoint else {**body, "Entrypoint": [], "Cmd": KEEPER}


async def create_container(docker: aiodocker.Docker, image: str, hardening: Hardening,
                           labels: dict[str, str], disk: DiskCaps | None = None, *, keeper: bool = True,
                           entrypoint: bool = False, services: list[ServiceSpec] | None = None) -> PooledContainer:
    """Create (after its services, when it has some), cap its disk, start and connect the driver.
    On any failure the container, and its services, are removed again."""
    name = f"intercode-{image.split('/')[-1].replace(':', '-')}-{uuid.uuid4().hex[:10]}"
    group = (await start_group(docker, image, services, labels, internet=hardening.network, pids=hardening.pids,
                               memory_mb=hardening.memory_mb, cpus=hardening.cpus) if services else None)
    try:
        async with engine_call("create a container", image=image):
            raw = await docker.containers.create(
                container_config(image, hardening, labels, disk, keeper=keeper, entrypoint=entrypoint,
                                 network=group.network if group else None), name=name)
    except BaseException as exc:
        if group is not None:
            with contextlib.suppress(SandboxError):
                await asyncio.shield(group.remove())
        if isinstance(exc, aiodocker.DockerError):  # a 4xx answer; engine_call made the rest our infra errors
            if exc.status == 404:
                raise ImageError(f"image {image} is not built: run `python -m orchestrator images build`") from exc
            raise SandboxError(f"could not create a container: {exc.message}", image=image) from exc
        raise
    pooled = PooledContainer(docker, image, raw)
    pooled.group = group
    pooled.single_use = group is not None
    try:
        async with engine_call("start the container", container_id=raw.id, image=image):
            if disk is not None:
                await disk.cap(raw, hardening.disk_mb, hardening.inode_bytes)
            await raw.start()
        pooled.driver = await start_driver(raw, image=image)
        if entrypoint and await _has_entrypoint(pooled):
            pooled.single_use = True
            await _entrypoint_done(pooled)
        await pooled.locate_upper_dir()
        if disk is not None:
            await disk.verify(pooled.upper_dir, raw.id)
        pooled.initial_changes = frozenset(await pooled.changed_paths())
    except BaseException as exc:
        pooled.move_to(ContainerState.BROKEN, f"start failed: {exc!r}")
        with contextlib.suppress(SandboxError):  # the engine is away: the pool's close or next start reaps it
            await asyncio.shield(pooled.remove())
        if isinstance(exc, aiodocker.DockerError):
            raise ContainerDied(f"container did not start: {exc.message}", container_id=raw.id, image=image) from exc
        raise
    return pooled


async def _has_entrypoint(pooled: PooledContainer) -> bool:
    async with engine_call("inspect the container", container_id=pooled.id, image=pooled.image):
        info = await pooled.container.show()
    return bool((info.get("Config") or {}).get("Entrypoint"))


ENTRYPOINT_WAIT = 60.0  # seconds an image's entrypoint may take before it runs our keeper
# Our keeper's command line, found in /proc: the pattern's bracket keeps grep from finding itself.
KEEPER_SEEN = ["/usr/lib/intercode/bash", "-c", "grep -qs 'while :; do slee[p] 86400' /proc/[0-9]*/cmdline"]


async def _entrypoint_done(pooled: PooledContainer) -> None:
    """Wait until the image's entrypoint has run our keeper (its setup done: what it starts runs,
    as it does before Harbor's agent starts); an entrypoint that never runs it is waited for
    ENTRYPOINT_WAIT seconds, then taken as it is."""
    assert pooled.driver is not None
    deadline = time.monotonic() + ENTRYPOINT_WAIT
    while time.monotonic() < deadline:
        seen = await pooled.driver.exec(KEEPER_SEEN, cwd="/", timeout=10.0)
        if seen.exit_code == 0:
            return
        await asyncio.sleep(0.05)
    log.info("pool.entrypoint_still_running", image=pooled.image, container=pooled.id[:12], seconds=ENTRYPOINT_WAIT)


def _walk_upper(upper: str, prune: tuple[str, ...]) -> set[str]:
    """Every path present in an overlay upper directory (whiteouts included), as container paths."""
    found: set[str] = set()
    stack = [upper]
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                path = entry.path[len(upper):]
                found.add(path)
                if entry.is_dir(follow_symlinks=False) and path not in prune:
                    stack.append(entry.path)
    return found
