"""A sweep's episodes on the hosts of a Ray cluster (`[cluster]` in the sweep file, or `--ray`).

    async with ClusterSite.open(settings, agent=AgentSettings(...), images=[...], ...) as site:
        runner = EpisodeRunner(site, models, ...)      # episodes placed on the hosts

The sweep process stays the one place for everything global: the plan, the store, the LLM calls
with their per-model limits and the budget. Only the environments live on the hosts: one host
agent per node (orchestrator.cluster.agent), named for this sweep, configured with its settings.

- **Joining.** Every node with an `intercode_host_N` resource is a host. At the start all of them
  join: the agent starts (its engine answers, orphans of dead owners are reaped), its images are
  checked against the head's build and shipped where they differ (orchestrator.cluster.images),
  its pools are warmed and its channel opened (orchestrator.cluster.channel: the episodes' calls
  go over it, not as actor calls). A host that cannot join is one line and the sweep does not
  start. Nodes that appear later (or come back) join the same way while the sweep runs.
- **Placement.** An episode goes to a live host with spare capacity (`host_concurrency`, default 8
  per CPU of its node), preferring one with a warm container of its image to spare, then the
  least loaded; a retry avoids the host its earlier attempt failed on.
- **Failures.** Each host is pinged every `heartbeat` seconds. A host that leaves a ping
  unanswered for `host_timeout` seconds (its node died, its agent hangs), or whose channel closes,
  is lost: its episodes in flight end at once with HostLost, an infra failure the runner re-runs
  elsewhere within `infra_retries`. A host whose engine stops answering gets no new episodes until it answers again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiodocker
import ray
import ray.exceptions
import structlog

from foundation.concurrency import TaskOwner, all_of
from foundation.engine import engine
from foundation.errors import UserError
from orchestrator.cluster.agent import AgentSettings, node_cpus, spawn
from orchestrator.cluster.channel import Channel, HostLost
from orchestrator.cluster.cli import connect
from orchestrator.cluster.images import sync_images
from orchestrator.cluster.remote import RemoteEnvironment
from orchestrator.cluster.settings import ClusterSettings
from orchestrator.site import Placed, Site
from tasks import Task

log = structlog.get_logger(__name__)

JOIN_TIMEOUT = 300.0  # seconds for a host to start its agent, receive its images and warm its pools
DISCOVER_EVERY = 5.0  # seconds between two looks for nodes that joined the cluster
SHUTDOWN_TIMEOUT = 60.0  # seconds for a host's agent to remove its containers at the end
PER_CPU = 8  # episodes at once per CPU of a host's node, unless host_concurrency says otherwise


class HostFailed(Exception):
    """A host could not join (the message names it)."""


@dataclass(eq=False)
class Host:
    resource: str
    agent: Any
    capacity: int
    lost: asyncio.Future[None]
    digests: dict[str, str] = field(default_factory=dict)
    warm: collections.Counter[str] = field(default_factory=collections.Counter)
    by_image: collections.Counter[str] = field(default_factory=collections.Counter)
    in_flight: int = 0
    engine_ok: bool = True
    ran: int = 0
    check: asyncio.Event = field(default_factory=asyncio.Event)  # set: ping it now, not at the next beat
    channel: Channel | None = None  # the agent's direct channel for the episodes' calls

    @property
    def serving(self) -> bool:
        return not self.lost.done() and self.engine_ok


class ClusterSite:
    def __init__(self, settings: ClusterSettings, agent: AgentSettings, images: list[str], services: list[str],
                 warm_share: dict[str, float], wait_for_hosts: float, sized: frozenset[str] = frozenset()) -> None:
        self.settings = settings
        self.agent_settings = agent
        self.images = images
        self.services = services
        self.warm_share = warm_share  # image -> containers to warm per unit of a host's capacity
        self.wait_for_hosts = wait_for_hosts
        self.hosts: dict[str, Host] = {}
        self.sized = sized  # images whose pool size the sweep file sets
        self.docker: aiodocker.Docker | None = None
        self._joining: set[str] = set()
        self._joins = 0
        self._changed = asyncio.Event()
        self._tasks = TaskOwner("cluster-site")  # discovery, heartbeats, joins, losses: failures logged
        self._closing: set[asyncio.Future[Any]] = set()  # environments' close calls in flight, awaited at the end

    # ---------------------------------------------------------------- the Site seam (orchestrator.sweep.runner)

    @property
    def generation(self) -> int:
        return 0

    async def engine_lost_since(self, generation: int) -> bool:
        return False  # a host's trouble is the episode's infra failure, re-run on another host

    @asynccontextmanager
    async def environment(self, task: Task, avoid: frozenset[str] = frozenset()) -> AsyncIterator[Placed]:
        host = await self._place(task.image, avoid)
        host.in_flight += 1
        host.by_image[task.image] += 1
        try:
            async with RemoteEnvironment(host.agent, task.kind, host.lost, self._close_later, host.channel) as env:
                yield Placed(env, host.resource, host.digests.get(task.image))
            host.ran += 1
        except Exception:
            host.check.set()  # whatever went wrong there: the heartbeat looks at the host now
            raise
        finally:
            host.in_flight -= 1
            host.by_image[task.image] -= 1
            self._wake()

    # ---------------------------------------------------------------- life cycle

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: ClusterSettings, *, agent: AgentSettings, images: list[str], services: list[str],
                   warm: dict[str, int], concurrency: int, wait_for_hosts: float,
                   sized: frozenset[str] = frozenset()) -> AsyncIterator[ClusterSite]:
        """Connect, let every host join (UserError naming the first that cannot), watch them while
        the sweep runs, and remove every host's containers at the end. `sized`: the images whose
        pool size the sweep file sets; the others' pools grow to each host's capacity."""
        share = {image: n / max(concurrency, 1) for image, n in warm.items()}
        site = cls(settings, agent, images, services, share, wait_for_hosts, sized)
        started_ray = await connect(settings.ray)
        try:
            async with engine() as docker:  # the head's engine: where the images were built, shipped from
                site.docker = docker
                try:
                    await site._join_all()
                    site._spawn(site._discover())
                    yield site
                finally:
                    await site._close()
        finally:
            if started_ray:
                await asyncio.to_thread(ray.shutdown)

    async def _nodes(self) -> dict[str, float]:
        """The live hosts this sweep may use, with their CPUs."""
        nodes = await asyncio.to_thread(node_cpus)
        wanted = self.settings.hosts
        return nodes if wanted is None else {name: cpus for name, cpus in nodes.items() if name in wanted}

    async def _join_all(self) -> None:
        nodes = await self._nodes()
        if self.settings.hosts is not None and (missing := sorted(set(self.settings.hosts) - set(nodes))):
            raise UserError(f"host {missing[0]} of [cluster] hosts is not on the Ray cluster {self.settings.ray}: "
                            f"its hosts are {', '.join(sorted(await asyncio.to_thread(node_cpus))) or 'none'}")
        if not nodes:
            raise UserError(f"no hosts on the Ray cluster {self.settings.ray}: start each node with "
                            "`ray start ... --resources '{\"intercode_host_N\": 1}'` (docs/scale-out.md)")
        try:
            await self._join(nodes)
        except Exception as exc:
            raise UserError(_reason(exc)) from None
        log.info("cluster_hosts", run=self.agent_settings.run_id,
                 hosts={h.resource: h.capacity for h in self.hosts.values()})

    async def _join(self, nodes: dict[str, float]) -> None:
        """Start an agent for this sweep on each node, bring their images up to date (one archive
        per set of images, to every host that needs it), start their runtimes and warm them. The
        first failure is raised, naming its host; every agent started here is then stopped."""
        self._joins += 1
        agents = {resource: spawn(resource, name=f"agent-{resource}-{self.agent_settings.run_id}-{self._joins}")
                  for resource in nodes}
        started = time.monotonic()
        try:
            async with asyncio.timeout(JOIN_TIMEOUT):
                assert self.docker is not None
                digests = await sync_images(self.docker, agents, self.images + self._companions(),
                                            ship=self.settings.ship_images)
                hosts = await all_of(self._start(resource, agents[resource], cpus, digests[resource])
                                    for resource, cpus in nodes.items())
        except BaseException:
            await asyncio.gather(*(_kill(agent) for agent in agents.values()))
            raise
        for host, reaped in hosts:
            self.hosts[host.resource] = host
            self._spawn(self._heartbeat(host))
            log.info("host_joined", host=host.resource, capacity=host.capacity, warm=dict(host.warm), reaped=reaped,
                     seconds=round(time.monotonic() - started, 2))
        self._wake()

    def _companions(self) -> list[str]:
        """The images of the services that run beside the sweep's containers (a Harbor task's
        compose services): each host needs them too."""
        pools = self.agent_settings.pools or {}
        return sorted({s.image for config in pools.values() for s in config.services} - set(self.images))

    async def _start(self, resource: str, agent: Any, cpus: float, digests: dict[str, str]) -> tuple[Host, int]:
        """One host's runtime started (orphans of gone owners reaped first) and its pools warmed."""
        capacity = self.settings.host_concurrency or max(1, int(PER_CPU * cpus))
        warm = {image: min(capacity, math.ceil(share * capacity)) for image, share in self.warm_share.items()}
        pools = {image: config if image in self.sized or not config.reset else config.model_copy(update={"max_size": capacity})
                 for image, config in (self.agent_settings.pools or {}).items()}  # a shared service keeps its one server
        try:
            await agent.configure.remote(dataclasses.replace(self.agent_settings, pools=pools))
            await agent.start.remote()
            await agent.warm.remote(warm, self.services)
            reaped = (await agent.status.remote())["reaped"]
            address = await agent.channel.remote()
        except ray.exceptions.RayTaskError as exc:
            raise HostFailed(f"host {resource} cannot run episodes: {_reason(exc)}") from None
        except ray.exceptions.RayActorError as exc:
            raise HostFailed(f"host {resource} was lost while joining: {type(exc).__name__}") from None
        lost = asyncio.get_running_loop().create_future()
        host = Host(resource, agent, capacity, lost, digests=digests, warm=collections.Counter(warm))
        try:
            host.channel = await Channel.connect(resource, address, lambda reason: self._channel_closed(host, reason))
        except HostLost as exc:
            raise HostFailed(f"host {resource} cannot run episodes: {exc}") from None
        return host, reaped

    def _channel_closed(self, host: Host, reason: str) -> None:
        if not host.lost.done():
            self._spawn(self._lose(host, reason))

    async def _close(self) -> None:
        await self._tasks.aclose()
        closing, self._closing = list(self._closing), set()
        with contextlib.suppress(TimeoutError):  # a lost host's never end; its agent is gone anyway
            async with asyncio.timeout(SHUTDOWN_TIMEOUT):
                await asyncio.gather(*closing, return_exceptions=True)
        # The channels first (the episodes are over), then each agent removes its containers.
        await asyncio.gather(*(h.channel.close() for h in self.hosts.values() if h.channel is not None),
                             return_exceptions=True)
        serving = [h for h in self.hosts.values() if not h.lost.done()]
        results = await asyncio.gather(*(_shutdown(h.agent) for h in serving), return_exceptions=True)
        for host, result in zip(serving, results):
            if isinstance(result, BaseException):
                log.warning("host_shutdown_failed", host=host.resource, error=_reason(result))
        log.info("cluster_episodes", ran={h.resource: h.ran for h in self.hosts.values()})

    # ---------------------------------------------------------------- placement

    async def _place(self, image: str, avoid: frozenset[str]) -> Host:
        deadline: float | None = None
        while True:
            serving = [h for h in self.hosts.values() if h.serving]
            spare = [h for h in serving if h.in_flight < h.capacity]
            # Where the episode failed before only when no other host serves (not when they are busy).
            others = [h for h in serving if h.resource not in avoid]
            choice = [h for h in spare if h.resource not in avoid] if others else spare
            if choice:
                return max(choice, key=lambda h: (h.warm[image] > h.by_image[image], 1 - h.in_flight / h.capacity))
            if serving:
                deadline = None
            elif deadline is None:
                deadline = time.monotonic() + self.wait_for_hosts
            elif time.monotonic() > deadline:
                raise UserError(f"no host of the Ray cluster {self.settings.ray} has answered for "
                                f"{self.wait_for_hosts:g} s: start its nodes again and run the same command to continue")
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None if deadline is None else max(deadline - time.monotonic(), 0)):
                    await changed.wait()

    def _close_later(self, closing: asyncio.Future[Any]) -> None:
        """An environment's close call, off its episode's path (its agent's shutdown closes any left)."""
        self._closing.add(closing)
        closing.add_done_callback(self._closed)

    def _closed(self, closing: asyncio.Future[Any]) -> None:
        self._closing.discard(closing)
        if not closing.cancelled() and (error := closing.exception()) is not None:
            log.info("environment_close_failed", error=_reason(error))  # a lost host's; its containers are reaped

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # ---------------------------------------------------------------- watching the hosts

    async def _heartbeat(self, host: Host) -> None:
        while not host.lost.done():
            try:
                async with asyncio.timeout(self.settings.host_timeout):
                    engine_ok = await host.agent.ping.remote()
            except (TimeoutError, ray.exceptions.RayError) as exc:
                await self._lose(host, "no answer" if isinstance(exc, TimeoutError) else type(exc).__name__)
                return
            if engine_ok != host.engine_ok:
                host.engine_ok = engine_ok
                log.warning("host_engine_back" if engine_ok else "host_engine_away", host=host.resource)
                self._wake()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.heartbeat):  # the heartbeat's period
                    await host.check.wait()
            host.check.clear()

    async def _lose(self, host: Host, reason: str) -> None:
        if host.lost.done():
            return
        log.warning("host_lost", host=host.resource, reason=reason, in_flight=host.in_flight)
        host.lost.set_result(None)
        self._wake()
        if host.channel is not None:
            await host.channel.close()
        await _kill(host.agent)

    async def _discover(self) -> None:
        """Nodes that join the cluster (or come back) while the sweep runs become hosts."""
        while True:
            await asyncio.sleep(DISCOVER_EVERY)  # the look's period
            try:
                nodes = await self._nodes()
            except ray.exceptions.RayError as exc:
                log.warning("cluster_discovery_failed", error=_reason(exc))
                continue
            for resource, cpus in nodes.items():
                host = self.hosts.get(resource)
                if (host is None or host.lost.done()) and resource not in self._joining:
                    self._joining.add(resource)
                    self._spawn(self._join_later(resource, cpus))

    async def _join_later(self, resource: str, cpus: float) -> None:
        try:
            await self._join({resource: cpus})
        except Exception as exc:  # noqa: BLE001 — a node that cannot join yet is tried again at the next look
            log.warning("host_join_failed", host=resource, error=_reason(exc))
        finally:
            self._joining.discard(resource)

    def _spawn(self, coroutine: Any) -> None:
        self._tasks.spawn(coroutine, name=coroutine.__qualname__)


async def _shutdown(agent: Any) -> None:
    try:
        async with asyncio.timeout(SHUTDOWN_TIMEOUT):
            await agent.shutdown.remote()
    finally:
        await _kill(agent)


async def _kill(agent: Any) -> None:
    with contextlib.suppress(ray.exceptions.RayError, ValueError):
        await asyncio.to_thread(ray.kill, agent, no_restart=True)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ray.exceptions.RayTaskError) and exc.cause is not None:
        exc = exc.cause
    if isinstance(exc, TimeoutError):
        return f"the hosts did not join within {JOIN_TIMEOUT:g} s (see the nodes' Ray logs)"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _held_to_the_protocol(site: ClusterSite) -> Site:
    """Never called: the type checker holds the cluster's site to the Site protocol here."""
    return site
