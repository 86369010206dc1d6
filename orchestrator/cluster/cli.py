"""`python -m orchestrator cluster status --ray ADDRESS`: the host agents of a Ray cluster, each
with its images (and their ids), its pools and its environments in flight.

A node is a host when it has a custom resource `intercode_host_N`; its agent is the one running
there, or one started for the command (it ends with it). An unreachable cluster, or Ray not
installed, is one line and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from foundation.errors import ConfigError, UserError
from orchestrator.cluster import require_ray

CONNECT_TIMEOUT = 5.0  # seconds for the cluster's address to accept a connection
CLIENT_ATTEMPTS = 3  # tries to join through Ray Client, whose server may fail to start a client's session once
CLIENT_PAUSE = 2.0  # seconds before the second try (twice that before the third)
DOWN_TIMEOUT = 60.0  # seconds for an agent to remove its containers
STATUS_TIMEOUT = 10.0  # seconds for a sweep's agent to say what it holds


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("cluster", help="host agents on a Ray cluster (docs/cluster.md)")
    cmds = parser.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    status = cmds.add_parser("status", help="each host: its images with their ids, pools and episodes in flight")
    status.add_argument("--ray", required=True, metavar="ADDRESS", help="the cluster's head, HOST:PORT")
    status.set_defaults(handler=_status)
    down = cmds.add_parser("down", help="stop the hosts' shared agents (trainers' environments), removing their containers")
    down.add_argument("--ray", required=True, metavar="ADDRESS", help="the cluster's head, HOST:PORT")
    down.set_defaults(handler=_down)


async def _status(args: argparse.Namespace) -> int:
    await connect(args.ray)
    import ray

    try:
        from orchestrator.cluster.agent import host_resources, spawn

        resources = await asyncio.to_thread(host_resources)  # asks the cluster's control service
        if not resources:
            print(f"no hosts on {args.ray}: no node has an intercode_host_N resource")
            return 1
        sweeps = await asyncio.to_thread(sweep_agents)
        statuses = await asyncio.gather(*(spawn(resource).status.remote() for resource in resources))
        for resource, status in zip(resources, statuses):
            mine = {name: agent for name, agent in sweeps.items() if name.startswith(f"agent-{resource}-")}
            answers = await asyncio.gather(*(asyncio.wait_for(agent.status.remote(), STATUS_TIMEOUT)
                                             for agent in mine.values()), return_exceptions=True)
            print(describe(status, dict(zip(mine, answers))))
        return 0
    finally:
        await asyncio.to_thread(ray.shutdown)


def sweep_agents() -> dict[str, Any]:
    """The agents sweeps started (`agent-intercode_host_N-RUN-K`), by name."""
    import ray
    from ray.util import list_named_actors

    from orchestrator.cluster.agent import NAMESPACE

    found = {}
    for entry in list_named_actors(all_namespaces=True):
        if entry["namespace"] == NAMESPACE and entry["name"].count("-") > 1:
            try:
                found[entry["name"]] = ray.get_actor(entry["name"], namespace=NAMESPACE)
            except ValueError:  # ended meanwhile
                continue
    return found


async def _down(args: argparse.Namespace) -> int:
    """Each host's shared agent (the one trainers and `cluster status` use), if it runs: its
    environments closed and its containers removed, then the actor ended. A sweep's own agents
    end with their sweep."""
    await connect(args.ray)
    import ray

    from orchestrator.cluster.agent import NAMESPACE, agent_name, host_resources

    try:
        stopped = 0
        for resource in await asyncio.to_thread(host_resources):
            try:
                agent = await asyncio.to_thread(ray.get_actor, agent_name(resource), namespace=NAMESPACE)
            except ValueError:  # none runs there
                continue
            try:
                await asyncio.wait_for(agent.shutdown.remote(), DOWN_TIMEOUT)
            finally:
                await asyncio.to_thread(ray.kill, agent, no_restart=True)
            await _name_freed(agent_name(resource), NAMESPACE)
            print(f"{resource}: shared agent stopped")
            stopped += 1
        print(f"{stopped} shared agents stopped")
        return 0
    finally:
        await asyncio.to_thread(ray.shutdown)


async def _name_freed(name: str, namespace: str) -> None:
    """Until the killed actor's name is free (a later spawn then makes a new agent)."""
    import ray

    async with asyncio.timeout(DOWN_TIMEOUT):
        while True:
            try:
                await asyncio.to_thread(ray.get_actor, name, namespace=namespace)
            except ValueError:
                return
            await asyncio.sleep(0.05)  # between two looks at the name


async def connect(address: str | None) -> bool:
    """Join the Ray cluster at `address` unless this process has already joined one (a trainer's
    job, a test); True when this call joined (and so leaves at the end). One line when nothing
    answers, or when there is no address to join."""
    require_ray("the cluster")
    import ray

    if ray.is_initialized():
        return False
    if address is None:
        raise ConfigError("Ray is not initialized: call ray.init(address=...) first or pass address=HOST:PORT")
    if address != "auto":
        await reachable(address)
    attempt = 1
    while True:
        try:
            await asyncio.to_thread(ray.init, address=address, logging_level=logging.ERROR, log_to_driver=False)
            return True
        except (ConnectionError, RuntimeError, ValueError) as exc:
            text = str(exc).strip().splitlines()
            # Ray Client's server starts a process per client; on a loaded head that start can
            # fail once ("Initialization failure from server"): asked again, after a pause.
            if not (address.startswith("ray://") and "Initialization failure" in str(exc) and attempt < CLIENT_ATTEMPTS):
                raise UserError(f"cannot join the Ray cluster {address}: "
                                f"{text[0] if text else type(exc).__name__}") from None
        await asyncio.to_thread(ray.shutdown)
        await asyncio.sleep(CLIENT_PAUSE * attempt)
        attempt += 1


async def reachable(address: str) -> None:
    """One line instead of Ray's long retries when nothing listens at `address`."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray {address!r}: expected HOST:PORT")
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            _, writer = await asyncio.open_connection(host, int(port))
    except (OSError, TimeoutError) as exc:
        raise UserError(f"no Ray cluster at {address}: {exc.strerror or 'no answer'}") from None
    writer.close()
    await writer.wait_closed()


def describe(status: dict[str, Any], sweeps: dict[str, dict[str, Any] | BaseException] | None = None) -> str:
    """A host's status as lines: the host, its engine and its episodes in flight (of every agent
    on it), its images, the pools of its shared agent, then each sweep's agent with its own (or
    why it did not answer)."""
    sweeps = sweeps or {}
    answered = {name: other for name, other in sweeps.items() if not isinstance(other, BaseException)}
    in_flight = status["in_flight"] + sum(other["in_flight"] for other in answered.values())
    lines = [f"{status['host']}  engine {status['engine']}  in flight {in_flight}"]
    lines += [f"  image {name}  {image_id}" for name, image_id in sorted(status["images"].items())]
    lines += _pools(status["pools"], "  ")
    for name, other in sorted(sweeps.items(), key=lambda item: item[0]):
        if isinstance(other, BaseException):
            lines.append(f"  sweep agent {name}  no answer ({type(other).__name__}: its sweep ended or its node is lost)")
            continue
        lines.append(f"  sweep agent {name}  in flight {other['in_flight']}")
        lines += _pools(other["pools"], "    ")
    return "\n".join(lines)


def _pools(pools: dict[str, dict[str, int]], indent: str) -> list[str]:
    return [f"{indent}pool {image}  " + " ".join(f"{state}={count}" for state, count in counts.items())
            for image, counts in sorted(pools.items())]
