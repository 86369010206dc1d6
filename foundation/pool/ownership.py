"""Which process owns a container, and reaping the containers of owners that are gone.

Every container the pool makes is labelled with its owner: host, boot id, pid and the pid's start
time (so a recycled pid is not mistaken for the owner). A run killed with SIGKILL cannot clean up;
the next pool start on the same host finds its containers by label and removes them.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import aiodocker
import structlog

from foundation.engine import engine_call
from foundation.engine_gate import releasing_network
from foundation.errors import SandboxError

log = structlog.get_logger(__name__)

MANAGED = "intercode.managed"
OWNER = "intercode.owner"
RUN = "intercode.run"
IMAGE = "intercode.pool-image"


@dataclass(frozen=True, slots=True)
class Owner:
    host: str
    boot_id: str
    pid: int
    start_time: str

    @classmethod
    def me(cls) -> Owner:
        return cls(socket.gethostname(), _boot_id(), os.getpid(), _start_time(os.getpid()) or "?")

    @classmethod
    def parse(cls, label: str) -> Owner | None:
        parts = label.rsplit(":", 3)
        if len(parts) != 4 or not parts[2].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]), parts[3])

    def __str__(self) -> str:
        return f"{self.host}:{self.boot_id}:{self.pid}:{self.start_time}"

    def is_alive(self) -> bool:
        """False only when we can be sure: same host, and the process is gone or was reborn."""
        if self.host != socket.gethostname():
            return True
        if self.boot_id != _boot_id():
            return False
        return _start_time(self.pid) == self.start_time


def labels_for(owner: Owner, run_id: str, image: str) -> dict[str, str]:
    return {MANAGED: "1", OWNER: str(owner), RUN: run_id, IMAGE: image}


async def reap_orphans(docker: aiodocker.Docker) -> int:
    """Remove every managed container whose owner process no longer exists, then such networks
    (a group's: foundation/pool/group.py). Returns the count of containers."""
    async with engine_call("list the pool containers"):
        found = await docker.containers.list(all=True, filters={"label": [MANAGED]})
    reaped = 0
    for container in found:
        owner = Owner.parse(container["Labels"].get(OWNER, ""))
        if owner is not None and owner.is_alive():
            continue
        await remove_quietly(docker, container.id)
        reaped += 1
    networks = await remove_networks(docker)
    if reaped or networks:
        log.info("pool.reaped_orphans", count=reaped, networks=networks)
    return reaped


def _picked(name: str, labels: dict[str, str], run: str | None, keep: Collection[str]) -> bool:
    if run is None:
        return not _alive(labels)
    return labels.get(RUN) == run and name not in keep


def _alive(labels: dict[str, str]) -> bool:
    owner = Owner.parse(labels.get(OWNER, ""))
    return owner is not None and owner.is_alive()


async def remove_networks(docker: aiodocker.Docker, *, run: str | None = None, keep: Collection[str] = ()) -> int:
    """Remove managed networks, their containers gone: run `run`'s but those named in `keep`; with
    no run, those whose owner is dead."""
    async with engine_call("list the pool networks"):
        found = await docker.networks.list(filters={"label": [MANAGED]})
    picked = [n["Id"] for n in found if _picked(n.get("Name", ""), n.get("Labels") or {}, run, keep)]
    for network_id in picked:
        await remove_network_quietly(docker, network_id)
    return len(picked)


ENDPOINTS_WAIT = 10.0  # seconds a network's endpoints may take to go with containers being removed


async def remove_network_quietly(docker: aiodocker.Docker, network: str) -> None:
    """Remove a network; one already gone is not an error. A network whose containers are still
    being removed (a removal in progress elsewhere answers 409 and returns at once) keeps their
    endpoints a moment: it is tried again for up to ENDPOINTS_WAIT. SandboxError when it can't be."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ENDPOINTS_WAIT
    while True:
        try:
            async with engine_call("remove a network"):
                await (await docker.networks.get(network)).delete()
            return
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return
            if "active endpoints" not in str(exc.message) or loop.time() > deadline:
                raise SandboxError(f"could not remove network {network[:40]}: {exc.message}") from exc
        await asyncio.sleep(0.2)  # between two attempts, while the removals finish


async def remove_quietly(docker: aiodocker.Docker, container_id: str) -> None:
    """Force-remove; a container that is already gone is not an error. SandboxError (EngineLost
    when the engine does not answer) when it could not be removed."""
    try:
        async with releasing_network(docker), engine_call("remove the container", container_id=container_id):
            await docker.containers.container(container_id).delete(force=True, v=True)
    except aiodocker.DockerError as exc:
        if exc.status not in (404, 409):  # 409: removal already in progress
            raise SandboxError(f"could not remove the container: {exc.message}", container_id=container_id) from exc


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()[19]  # field 22: start time in clock ticks since boot
