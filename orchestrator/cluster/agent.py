"""The host agent: a Ray actor, one per node, placed by the node's custom resource
`intercode_host_N`. It opens a Runtime against the engine of its node (the DOCKER_HOST that
`ray start` was given) and keeps the environments it opened by id, so a driver elsewhere runs a
strategy against them through `RemoteEnvironment`.

Every reply is a `Reply`: the method's value plus the environment's state the strategies read
without awaiting (`done`, `observation_rows()`), and the host that served it.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import aiodocker
import ray
import structlog

from environments import make_environment
from environments.base import HarnessStep, StepResult
from environments.own import own_kind
from environments.runtime import RewardMode, Runtime
from environments.sql_server import sql_server
from foundation.concurrency import TaskOwner, all_of
from foundation import logs
from foundation.engine import CALL_TIMEOUT, engine, engine_host, use_engine_settings
from foundation.errors import SandboxError
from foundation.pool.ownership import reap_orphans
from foundation.settings import cache_dir
from tasks.own import read_environment
from orchestrator.cluster.remote_calls import CALLS, CLOSE, HARNESS_STEP, OPEN_ENV, OPEN_RESET, RESET, SCORE, STEP, Reply
from orchestrator.cluster.channel import ChannelAddress, ChannelServer
from orchestrator.cluster.images import ImageLoader, image_facts

if TYPE_CHECKING:
    from environments.base import Environment
    from tasks import Task

log = structlog.get_logger(__name__)
T = TypeVar("T")

RESOURCE_PREFIX = "intercode_host_"
NAMESPACE = "intercode"
# An agent takes a sliver of its node's host resource: it is pinned to the node, and the agents of
# several sweeps, trainers and `cluster status` live there side by side.
AGENT_SHARE = 0.001
ENGINE_PING_TIMEOUT = 5.0  # seconds for the node's engine to answer a heartbeat's check
def agent_name(resource: str) -> str:
    """The actor's name on the cluster: one agent per host resource, found again by name."""
    return f"agent-{resource}"


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """What a sweep sets of its hosts' runtimes (sent to each agent at its start)."""

    data_dir: str | None = None
    run_id: str | None = None
    reward_mode: RewardMode = "original"
    pools: dict[str, Any] | None = None  # image -> ImagePoolConfig
    engine_wait: float | None = None
    engine_timeout: float = CALL_TIMEOUT
    node_gold_cache: bool = False  # keep gold results in the node's own cache dir (a sweep's agents do)
    environments: tuple[str, ...] = ()  # directories of environments of your own, registered as kinds here too


class HostAgent:
    """Owns one node's Runtime. `start()` before use, `shutdown()` at the end (closing every
    environment still open and the runtime, so no container is left on the node's engine)."""

    def __init__(self, host: str, data_dir: str | None = None, run_id: str | None = None) -> None:
        logs.configure(0)  # warnings only: what a worker prints, Ray's log monitor ships to the driver
        self.host = host
        self.settings = AgentSettings(data_dir=data_dir, run_id=run_id)
        self.envs: dict[int, Environment] = {}
        self.ids = itertools.count(1)
        self.runtime: Runtime | None = None
        self.stack = AsyncExitStack()
        self.loader = ImageLoader()
        self.docker: aiodocker.Docker | None = None
        self.reaped = 0
        self.services: dict[str, asyncio.Future[Any]] = {}
        self.tasks = TaskOwner(f"agent-{host}")
        self.server: ChannelServer | None = None
        self.address: ChannelAddress | None = None
        self.answers = held_to_the_table(self)  # the calls its channel carries

    async def configure(self, settings: AgentSettings) -> None:
        """The sweep's settings for the runtime this agent opens next (before `start`)."""
        if self.runtime is not None:
            raise RuntimeError(f"{self.host}'s agent is serving already: configure it before its start")
        self.settings = settings

    async def start(self) -> str:
        """Reap the containers of owners that are gone (a killed sweep's, a lost agent's), then open
        the node's Runtime; returns the engine it talks to."""
        if self.runtime is None:
            self.reaped = await reap_orphans(await self._engine())
            settings = self.settings
            for directory in settings.environments:  # a kind of your own is known on every host
                own_kind(read_environment(Path(directory)))
            opened = Runtime.open(data_dir=Path(settings.data_dir) if settings.data_dir else None,
                                  reward_mode=settings.reward_mode, images=settings.pools, run_id=settings.run_id,
                                  gold_dir=cache_dir() / "gold" if settings.node_gold_cache else None,
                                  engine_wait=settings.engine_wait, engine_timeout=settings.engine_timeout)
            self.runtime = await self.stack.enter_async_context(opened)
        return engine_host()

    async def channel(self) -> ChannelAddress:
        """Where the sweep reaches this agent directly for its episodes' calls (started on first ask)."""
        if self.server is None:
            self.server = ChannelServer(self._dispatch)
            self.address = await self.server.start(ray.util.get_node_ip_address())
        assert self.address is not None
        return self.address

    async def _dispatch(self, name: str, args: tuple[Any, ...]) -> Any:
        """A call of the table (orchestrator/cluster/remote_calls.py) that came over the channel."""
        if name not in CALLS:
            raise SandboxError(f"{name} is not a call the channel carries")
        self._engine_settings()
        return await self.answers[name](*args)

    def _engine_settings(self) -> None:
        """This call's engine calls with the runtime's deadline, and its stalls told to its watch
        (each call is served in a task of its own, which Runtime.open's settings never reached)."""
        if self.runtime is not None:
            use_engine_settings(self.runtime.engine_settings)

    async def ping(self) -> bool:
        """The heartbeat: answers while the agent runs; True while its engine answers too."""
        if self.runtime is None or self.runtime.docker is None:
            return False
        try:
            async with asyncio.timeout(ENGINE_PING_TIMEOUT):
                await self.runtime.docker.version()
        except Exception:  # noqa: BLE001 — any failure to answer is an engine away
            return False
        return True

    async def warm(self, containers: dict[str, int], services: list[str]) -> None:
        """Start the shared services (the SQL server) in the background and `containers` idle
        containers per image, so the first episodes don't queue behind start-up. A failure here is
        logged: the episodes meet (and classify) the same trouble."""
        await self.start()
        assert self.runtime is not None
        self._engine_settings()
        for image in services:
            if image not in self.services:
                self.services[image] = self.tasks.start(sql_server(self.runtime, image), name=f"start {image}")
        try:
            await all_of(self.runtime.pool.warm(image, n) for image, n in containers.items())
        except SandboxError as exc:
            log.warning("pool_warm_failed", host=self.host, error=str(exc))

    async def shutdown(self) -> None:
        """Every environment closed and the runtime with them (its containers removed), then the channel."""
        for env_id in list(self.envs):
            await self._close(env_id)
        self.services = {}
        await self.tasks.aclose()  # the services' starts still running
        self.tasks = TaskOwner(f"agent-{self.host}")
        self.runtime = None
        self.docker = None
        await self.stack.aclose()
        if self.server is not None:
            await self.server.close()
            self.server = None

    # ---------------------------------------------------------------- the environment seam

    # Each remote method's body is a plain method of its own, which the others call (a remote
    # method is called through its handle only).

    @ray.method(enable_task_events=False)  # per action: no record for Ray's state API
    async def open_env(self, kind: str) -> int:
        return await self._open_env(kind)

    async def _open_env(self, kind: str) -> int:
        runtime = self.runtime
        if runtime is None:
            await self.start()
            runtime = self.runtime
            assert runtime is not None
        self._engine_settings()
        env_id = next(self.ids)
        self.envs[env_id] = make_environment(kind, runtime)
        return env_id

    @ray.method(enable_task_events=False)  # per action: no record for Ray's state API
    async def reset(self, env_id: int, task: Task, multi_turn: bool = False) -> Reply[str]:
        return await self._reset(env_id, task, multi_turn)

    async def _reset(self, env_id: int, task: Task, multi_turn: bool) -> Reply[str]:
        """A reset; one that fails, or is cancelled, closes its environment here (its lease given
        back): the sweep's episode fails with it, and nobody would close it later."""
        try:
            return self._reply(env_id, await self.envs[env_id].reset(task, multi_turn=multi_turn))
        except BaseException:
            await asyncio.shield(self._close(env_id))
            raise

    @ray.method(enable_task_events=False)  # per action: no record for Ray's state API
    async def open_reset(self, kind: str, task: Task, multi_turn: bool = False) -> Reply[str]:
        """`open_env` and `reset` in one call (an episode's first)."""
        return await self._open_reset(kind, task, multi_turn)

    async def _open_reset(self, kind: str, task: Task, multi_turn: bool) -> Reply[str]:
        return await self._reset(await self._open_env(kind), task, multi_turn)

    @ray.method(enable_task_events=False)  # per action: no record for Ray's state API
    async def step(self, env_id: int, action: str) -> Reply[StepResult]:
        return await self._step(env_id, action)

    async def _step(self, env_id: int, action: str) -> Reply[StepResult]:
        return self._reply(env_id, await self.envs[env_id].step(action))

    @ray.method(enable_task_events=False)  # per action: no record for Ray's state API
    async def score(self, env_id: int) -> Reply[tuple[float, dict[str, Any]]]:
        return await self._score(env_id)

    async def _score(self, env_id: int) -> Reply[tuple[float, dict[str, Any]]]:
        return self._reply(env_id, await self.envs[env_id].score())

    @ray.method(enable_task_events=False)  # per action: no record for Ray's state API
    async def harness_step(self, env_id: int, action: str) -> Reply[HarnessStep]:
        return await self._harness_step(env_id, action)

    async def _harness_step(self, env_id: int, action: str) -> Reply[HarnessStep]:
        return self._reply(env_id, await self.envs[env_id].harness_step(action))

    @ray.method(enable_task_events=False)  # per action: no record for Ray's state API
    async def close(self, env_id: int) -> None:
        await self._close(env_id)

    async def _close(self, env_id: int) -> None:
        env = self.envs.pop(env_id, None)
        if env is not None:
            await env.close()

    # ---------------------------------------------------------------- what it holds

    async def in_flight(self) -> int:
        """The environments open here (cheap: a trainer asks every host before each open)."""
        return len(self.envs)

    async def status(self) -> dict[str, Any]:
        """The node's images (name -> id), its pools (image -> counts) and its environments in flight."""
        if self.runtime is None:
            await self.start()
        assert self.runtime is not None and self.runtime.docker is not None
        images = {tag: image["Id"] for image in await self.runtime.docker.images.list()
                  for tag in image.get("RepoTags") or [] if tag.startswith("intercode/")}
        return {"host": self.host, "node": socket.gethostname(), "engine": engine_host(), "images": images,
                "pools": self.runtime.pool.stats(), "in_flight": len(self.envs), "reaped": self.reaped}

    # ---------------------------------------------------------------- images (orchestrator/cluster/images.py)

    # Before `start`: the runtime's pool refuses to open without its images.

    async def image_facts(self, images: list[str]) -> dict[str, Any]:
        """Each image's id and inputs-hash label on this node's engine (None: not there)."""
        return await image_facts(await self._engine(), images)

    async def load_chunk(self, token: str, chunk: bytes, last: bool) -> list[str] | None:
        """A piece of a `docker save` archive sent by the sweep; the last one loads it into the node's
        engine and returns the images loaded."""
        return await self.loader.feed(await self._engine(), token, chunk, last)

    async def abort_load(self, token: str) -> None:
        """Forget a partly received archive (its sending failed)."""
        self.loader.drop(token)

    async def _engine(self) -> aiodocker.Docker:
        """A client of the node's engine for its images (EngineUnavailable, one line, when none answers)."""
        if self.docker is None:
            self.docker = await self.stack.enter_async_context(engine())
        return self.docker

    def _reply(self, env_id: int, value: T) -> Reply[T]:
        env = self.envs[env_id]
        return Reply(value, env.done, env.observation_rows(), self.host, env_id, env.breakdown(), env.failure,
                     env.pending_step)


def held_to_the_table(agent: HostAgent) -> dict[str, Callable[..., Awaitable[Any]]]:
    """The agent's answer to each call of the table, by its name; the type checker compares each
    method with its entry's arguments and reply (orchestrator/cluster/remote_calls.py)."""
    return {OPEN_ENV.name: OPEN_ENV.check(agent._open_env), OPEN_RESET.name: OPEN_RESET.check(agent._open_reset),
            RESET.name: RESET.check(agent._reset), STEP.name: STEP.check(agent._step),
            SCORE.name: SCORE.check(agent._score), HARNESS_STEP.name: HARNESS_STEP.check(agent._harness_step),
            CLOSE.name: CLOSE.check(agent._close)}


# The actor class; HostAgent stays a plain class, whose methods call each other directly
HostAgentActor = ray.remote(num_cpus=0)(HostAgent)


def spawn(resource: str, data_dir: Path | None = None, run_id: str | None = None, *, name: str | None = None,
          detached: bool = False) -> Any:
    """The agent of host `resource` (`intercode_host_N`), created on the node that has it, or the
    one of that `name` already there (default: the host's shared agent; a sweep names its own).
    `run_id` labels its containers (foundation.pool.ownership.RUN). A `detached` agent outlives the
    job that created it, until its `shutdown()` and `ray.kill` (`cluster down`); otherwise Ray ends it
    with its creator."""
    options = {"name": name or agent_name(resource), "namespace": NAMESPACE, "get_if_exists": True,
               "resources": {resource: AGENT_SHARE}, "max_concurrency": 1000, **({"lifetime": "detached"} if detached else {})}
    return HostAgentActor.options(**options).remote(resource, str(data_dir) if data_dir else None, run_id)


def host_resources() -> list[str]:
    """The cluster's live hosts, by number: intercode_host_0, intercode_host_1, ..."""
    return list(node_cpus())


def node_cpus() -> dict[str, float]:
    """Each live host resource (a node's `intercode_host_N`) with its node's CPUs, by host number."""
    found: dict[str, float] = {}
    for node in ray.nodes():
        if node.get("Alive"):
            resources = node.get("Resources") or {}
            for name in resources:
                if name.startswith(RESOURCE_PREFIX):
                    found[name] = float(resources.get("CPU", 1.0))
    return dict(sorted(found.items(), key=lambda item: _host_number(item[0])))


def _host_number(resource: str) -> tuple[bool, int, str]:
    end = resource.removeprefix(RESOURCE_PREFIX)
    return (not end.isdigit(), int(end) if end.isdigit() else 0, end)
