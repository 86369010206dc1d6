"""A trainer's way to the cluster's environments: its own Ray job (the driver, or any task or actor
of it) opens an environment on a host agent and steps it, with the host's lease and reset rules.

    ray.init(address="HEAD:PORT")                   # or pass address= below
    async with open_environment("bash") as env:     # on the host with the fewest in flight, over its own channel
        query = await env.reset(task)
        result = await env.step("ls /")
        reward, info = await env.score()
    env.hosts                                       # the host of every call

The agents are the hosts' shared named actors (`agent-intercode_host_N`, as `cluster status` finds
them): a trainer shares them with other trainers. One a trainer creates is detached, so it outlives
the task that created it; `shutdown()` it (then `ray.kill`) when the cluster's work is done. Leaving
the block gives the container back, after an error or a cancellation too (RemoteEnvironment's close
is shielded).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from environments.kind import kind_spec
from foundation.errors import ConfigError, UserError
from orchestrator.cluster.cli import connect

if TYPE_CHECKING:
    from orchestrator.cluster.channel import Channel
    from orchestrator.cluster.remote import RemoteEnvironment


@asynccontextmanager
async def open_environment(kind: str, *, address: str | None = None, host: str | None = None,
                           data_dir: str | Path | None = None,
                           run_id: str | None = None) -> AsyncIterator[RemoteEnvironment]:
    """An environment of `kind` on host `host` (`intercode_host_N`), or on the host with the fewest
    environments in flight. `address`: the cluster's head (HOST:PORT), used when Ray is not
    initialized in this process yet. `data_dir` and `run_id` (the label of its containers) are
    those of an agent this call creates; an agent already running keeps its own."""
    kind_spec(kind)  # an unknown kind is a ConfigError here, before the cluster is asked
    await connect(address)
    from orchestrator.cluster.remote import RemoteEnvironment

    hosts = await asyncio.to_thread(host_names)  # asks the cluster's control service
    if host is None:
        host = await fewest_in_flight({name: shared_agent(name, data_dir, run_id) for name in hosts})
    elif host not in hosts:
        raise ConfigError(f"unknown host {host!r}: the cluster's hosts are {', '.join(hosts)}")
    agent = shared_agent(host, data_dir, run_id)
    channel = await open_channel(host, agent)
    try:
        async with RemoteEnvironment(agent, kind, channel=channel) as env:
            await env.open()  # in flight there from now: the next trainer's choice sees it
            yield env
    finally:
        await channel.close()


async def open_channel(host: str, agent: Any) -> Channel:
    """The environment's own channel to its host's agent (a websocket: a step costs about 0.05 ms
    on it, against about 1 ms as an actor call)."""
    import ray.exceptions

    from orchestrator.cluster.channel import Channel
    from orchestrator.cluster.remote import HostLost

    try:
        address = await agent.channel.remote()
    except ray.exceptions.RayActorError as exc:
        raise HostLost(f"the host agent of {host} is gone: {type(exc).__name__}") from exc
    return await Channel.connect(host, address, lambda reason: None)  # its calls fail with HostLost


def shared_agent(resource: str, data_dir: str | Path | None, run_id: str | None) -> Any:
    """The agent of host `resource` that every job shares (`agent-intercode_host_N`), found or
    created detached. A trainer's task or actor that created it non-detached would take it down
    when it ends (Ray ends an actor with its creator, or when its handles go), before `shutdown`
    gave its containers back: a detached one lives until its `shutdown()` and `ray.kill`."""
    from orchestrator.cluster.agent import spawn

    return spawn(resource, Path(data_dir) if data_dir else None, run_id, detached=True)


def host_names() -> list[str]:
    """The cluster's hosts (`intercode_host_N`, by number); UserError when it has none."""
    from orchestrator.cluster.agent import host_resources

    hosts = host_resources()
    if not hosts:
        raise UserError("no hosts on the Ray cluster: no node has an intercode_host_N resource")
    return hosts


async def fewest_in_flight(agents: dict[str, Any]) -> str:
    """The host whose agent has the fewest environments in flight (of every job on the cluster);
    a tie goes to a random one, so trainers opening at once spread over the hosts."""
    import ray.exceptions

    from orchestrator.cluster.remote import HostLost

    try:
        counts = await asyncio.gather(*(agent.in_flight.remote() for agent in agents.values()))
    except ray.exceptions.RayActorError as exc:
        raise HostLost(f"a host agent is gone while choosing a host: {type(exc).__name__}") from exc
    fewest = min(counts)
    return random.choice([host for host, count in zip(agents, counts) if count == fewest])
