"""The services beside an agent's container: containers on a network of the group's own, each
reached there by its name, started in dependency order and healthy before the group is leased
(what `docker compose up --wait` does for a compose file, without a compose CLI per episode).

    group = await start_group(docker, "intercode/harbor-x", services, labels, internet=False)
    ...the agent's container joins group.network as `main`...
    await group.remove()

The network is internal (no route out) unless the internet is allowed. Every container and the
network carry the pool's labels, so a run killed with SIGKILL leaves nothing the next start does
not reap (ownership.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import aiodocker

from foundation.engine import engine_call
from foundation.errors import ContainerDied, ImageError, SandboxError
from foundation.pool.config import ServiceHealth, ServiceSpec
from foundation.pool.ownership import remove_network_quietly, remove_quietly

POLL = 0.2  # seconds between looks at a service's state
STARTED, HEALTHY, COMPLETED = "service_started", "service_healthy", "service_completed_successfully"
MAIN_ALIAS = "main"  # the agent's container, as the other services reach it (compose's service name)


class ServiceFailed(ContainerDied):
    """A service that exited, or never turned healthy: an infrastructure failure of its episode."""


class ServiceGroup:
    """The services of one agent's container and their network."""

    def __init__(self, docker: aiodocker.Docker, network: str, image: str) -> None:
        self.docker, self.network, self.image = docker, network, image
        self.containers: dict[str, str] = {}  # service -> container id

    async def addresses(self) -> dict[str, str]:
        """Each service's address on the group's network (this machine reaches it there)."""
        found = {}
        for name, container_id in self.containers.items():
            async with engine_call("inspect a service", container_id=container_id, image=self.image):
                info = await self.docker.containers.container(container_id).show()
            network = (info.get("NetworkSettings") or {}).get("Networks", {}).get(self.network) or {}
            if network.get("IPAddress"):
                found[name] = network["IPAddress"]
        return found

    async def remove(self) -> None:
        """Remove the services, then the network. SandboxError when the engine can't now (the pool's
        close, or the next start, reaps them by their labels)."""
        results = await asyncio.gather(*(remove_quietly(self.docker, c) for c in self.containers.values()),
                                       return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise failed[0]
        await remove_network_quietly(self.docker, self.network)


async def start_group(docker: aiodocker.Docker, image: str, services: list[ServiceSpec], labels: dict[str, str],
                      *, internet: bool, pids: int = 1024, memory_mb: int = 1024, cpus: float = 1.0) -> ServiceGroup:
    """The network and every service, each started once what it depends on is met, all running
    (healthy, where they have a healthcheck) on return. Each service has the limits of the agent's
    container beside it (processes, memory, CPUs): a task's service is a stranger's code too. On
    any failure what was made is removed."""
    name = f"intercode-{image.split('/')[-1].replace(':', '-')[:40]}-{uuid.uuid4().hex[:10]}"
    async with engine_call("create a network", image=image):
        await docker.networks.create({"Name": name, "Driver": "bridge", "Internal": not internet,
                                      "Labels": labels, "CheckDuplicate": True})
    group = ServiceGroup(docker, name, image)
    try:
        by_name = {s.name: s for s in services}
        for spec in _in_order(services):
            for needed, condition in spec.depends_on.items():
                await _met(group, by_name[needed], condition)
            group.containers[spec.name] = await _start(docker, group, spec, labels, pids, memory_mb, cpus)
        for spec in services:  # as `up --wait`: every service running, and healthy where it has a healthcheck
            await _met(group, spec, HEALTHY)  # (the compose file's or its image's own)
    except BaseException:
        with contextlib.suppress(SandboxError):
            await asyncio.shield(group.remove())
        raise
    return group


def _in_order(services: list[ServiceSpec]) -> list[ServiceSpec]:
    """Dependencies first (the reader refuses cycles and unknown names; a cycle here is a bug)."""
    by_name, done, order = {s.name: s for s in services}, set[str](), []

    def visit(spec: ServiceSpec, path: tuple[str, ...]) -> None:
        if spec.name in done:
            return
        if spec.name in path:
            raise ValueError(f"services depend on each other in a cycle: {' -> '.join((*path, spec.name))}")
        for needed in spec.depends_on:
            visit(by_name[needed], (*path, spec.name))
        done.add(spec.name)
        order.append(spec)

    for spec in services:
        visit(spec, ())
    return order


async def _start(docker: aiodocker.Docker, group: ServiceGroup, spec: ServiceSpec, labels: dict[str, str],
                 pids: int, memory_mb: int, cpus: float) -> str:
    body: dict[str, Any] = {
        "Image": spec.image, "Hostname": spec.name, "Labels": labels,
        "Env": [f"{key}={value}" for key, value in spec.environment.items()],
        "HostConfig": {"NetworkMode": group.network, "PidsLimit": pids, "SecurityOpt": ["no-new-privileges"],
                       "Memory": memory_mb << 20, "MemorySwap": memory_mb << 20, "NanoCpus": int(cpus * 1e9),
                       "Init": False, "AutoRemove": False},
        "NetworkingConfig": {"EndpointsConfig": {group.network: {"Aliases": [spec.name]}}},
    }
    if spec.command is not None:
        body["Cmd"] = spec.command
    if spec.entrypoint is not None:
        body["Entrypoint"] = spec.entrypoint
    if spec.working_dir:
        body["WorkingDir"] = spec.working_dir
    if spec.user:
        body["User"] = spec.user
    if spec.healthcheck is not None:
        body["Healthcheck"] = _health(spec.healthcheck)
    container_name = f"{group.network}-{spec.name}"[:120]
    try:
        async with engine_call(f"create service {spec.name}", image=spec.image):
            container = await docker.containers.create(body, name=container_name)
    except aiodocker.DockerError as exc:
        if exc.status == 404:
            raise ImageError(f"image {spec.image} of service {spec.name} is not built") from exc
        raise SandboxError(f"could not create service {spec.name}: {exc.message}", image=spec.image) from exc
    group.containers[spec.name] = container.id
    try:
        async with engine_call(f"start service {spec.name}", container_id=container.id, image=spec.image):
            await container.start()
    except aiodocker.DockerError as exc:
        raise ServiceFailed(f"service {spec.name} did not start: {exc.message}", container_id=container.id,
                            image=spec.image) from exc
    return str(container.id)


def _health(check: ServiceHealth) -> dict[str, Any]:
    ns = 1_000_000_000
    return {"Test": check.test, "Interval": int(check.interval * ns), "Timeout": int(check.timeout * ns),
            "Retries": check.retries, "StartPeriod": int(check.start_period * ns)}


def _patience(spec: ServiceSpec) -> float:
    """How long a service may take to meet a condition: its healthcheck's start period and every
    retry (Docker's own verdict comes within it), and a minute for the rest."""
    check = spec.healthcheck or ServiceHealth(test=["NONE"])
    return check.start_period + (check.retries + 1) * (check.interval + check.timeout) + 60.0


async def _met(group: ServiceGroup, spec: ServiceSpec, condition: str) -> None:
    """Wait until the service meets `condition`; ServiceFailed (one line: the service, its state
    and its last healthcheck output or log line) when it can't or doesn't within its patience."""
    container_id = group.containers[spec.name]
    container = group.docker.containers.container(container_id)
    deadline = time.monotonic() + _patience(spec)
    while True:
        async with engine_call(f"inspect service {spec.name}", container_id=container_id, image=spec.image):
            state = (await container.show()).get("State") or {}
        health = state.get("Health") or {}
        status = health.get("Status")
        if condition == COMPLETED:
            if not state.get("Running") and state.get("Status") == "exited":
                if state.get("ExitCode") == 0:
                    return
                raise ServiceFailed(f"service {spec.name} exited {state.get('ExitCode')}: "
                                    f"{await _last_log(group, container_id)}", container_id=container_id)
        elif not state.get("Running"):
            raise ServiceFailed(f"service {spec.name} exited {state.get('ExitCode')} before it was ready: "
                                f"{await _last_log(group, container_id)}", container_id=container_id)
        elif condition == STARTED or (condition == HEALTHY and status is None):
            return  # no healthcheck at all: running is as ready as it gets (compose says the same)
        elif status == "healthy":
            return
        elif status == "unhealthy":
            raise ServiceFailed(f"service {spec.name} is unhealthy: its healthcheck said {_last_check(health)}",
                                container_id=container_id)
        if time.monotonic() > deadline:
            raise ServiceFailed(f"service {spec.name} did not turn healthy within {_patience(spec):.0f} s: its "
                                f"healthcheck said {_last_check(health)}", container_id=container_id)
        await asyncio.sleep(POLL)


def _last_check(health: dict[str, Any]) -> str:
    runs = health.get("Log") or []
    if not runs:
        return "nothing yet (it never ran)"
    last = runs[-1]
    output = " ".join(str(last.get("Output") or "").split())[:200] or "(no output)"
    return f"exit {last.get('ExitCode')}: {output}"


async def _last_log(group: ServiceGroup, container_id: str) -> str:
    try:
        async with engine_call("read a service's log", container_id=container_id, timeout=10.0):
            lines = await group.docker.containers.container(container_id).log(stdout=True, stderr=True, tail=5)
    except (aiodocker.DockerError, SandboxError):
        return "(its log can't be read)"
    text = [line.strip() for line in "".join(lines).splitlines() if line.strip()]
    return text[-1][:200] if text else "(it printed nothing)"
