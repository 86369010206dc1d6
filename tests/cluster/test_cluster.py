"""Host agents on a local Ray cluster of three nodes, each with its own Docker engine
(tests/cluster_fixture.py): the oracle's Try Again over nl2bash fs1 and the SQL starter tasks, spread
round-robin over the three hosts, earns the rewards of a local run; every host runs episodes; each
agent's status lists the main engine's images with the same ids; no container is left anywhere."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agents.base import get_strategy
from agents.models import OracleModel
from environments import make_environment
from environments.runtime import Runtime
from tasks import Task
from tasks.registry import load_tasks
from tests.cluster_fixture import LocalCluster, containers_of, killed
from tests.second_engine import image_id
from tests.processes import ended_async

# A Ray cluster of three nodes, each with an engine of its own, beside the suite's: ./dev test-long
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cluster, pytest.mark.long]
ray = pytest.importorskip("ray")

IMAGES = ["intercode/nl2bash-fs1", "intercode/sql-starter"]
STRATEGY = "try_again"
MAX_TURNS = 3


def the_tasks(data_dir: Path) -> list[Task]:
    return load_tasks("nl2bash-fs1", data_dir)[:10] + load_tasks("starter-sql")


async def local_rewards(tasks: list[Task], data_dir: Path) -> dict[str, float]:
    rewards = {}
    async with Runtime.open(data_dir=data_dir) as runtime:
        for task in tasks:
            async with make_environment(task.kind, runtime) as env:
                outcome = await get_strategy(STRATEGY).run(env, task, OracleModel(), max_turns=MAX_TURNS)
            rewards[task.id] = outcome.reward
    return rewards


async def remote_episode(agent: Any, task: Task) -> tuple[float, set[str]]:
    from orchestrator.cluster.remote import RemoteEnvironment

    async with RemoteEnvironment(agent, task.kind) as env:
        outcome = await get_strategy(STRATEGY).run(env, task, OracleModel(), max_turns=MAX_TURNS)
    return outcome.reward, set(env.hosts)


async def cluster_status(address: str) -> subprocess.CompletedProcess[str]:
    """`python -m orchestrator cluster status --ray ADDRESS`, run while the test's agents live."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator", "cluster", "status", "--ray", address,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await ended_async(process, 120)
    return subprocess.CompletedProcess(["cluster", "status"], process.returncode, out.decode(), err.decode())


async def test_oracle_across_three_hosts_earns_the_local_rewards(cluster: LocalCluster, data_dir: Path) -> None:
    from orchestrator.cluster.agent import host_resources, spawn

    tasks = the_tasks(data_dir)
    expected = await local_rewards(tasks, data_dir)
    assert 0 < sum(expected.values()) <= len(tasks)  # the oracle solves tasks here: a reward to compare
    run_id = f"cluster-{uuid.uuid4().hex[:8]}"
    resources = host_resources()
    assert resources == ["intercode_host_0", "intercode_host_1", "intercode_host_2"]
    agents = [spawn(resource, data_dir, run_id) for resource in resources]
    try:
        engines = await asyncio.gather(*(agent.start.remote() for agent in agents))
        assert engines == cluster.engine_hosts  # each agent talks to its own node's engine
        episodes = [remote_episode(agents[i % len(agents)], task) for i, task in enumerate(tasks)]
        results = await asyncio.gather(*episodes)
        assert {task.id: reward for task, (reward, _) in zip(tasks, results)} == expected
        for i, (_, hosts) in enumerate(results):
            assert hosts == {resources[i % len(agents)]}
        statuses = await asyncio.gather(*(agent.status.remote() for agent in agents))
        for status in statuses:
            assert status["in_flight"] == 0
            for image in IMAGES:
                assert status["images"][f"{image}:latest"] == image_id(cluster.engine_hosts[0], image)
        listed = await cluster_status(cluster.address)
        assert listed.returncode == 0, listed.stderr
        for resource, status in zip(resources, statuses):
            assert f"{resource}  engine {status['engine']}  in flight 0" in listed.stdout
            sql_id = status["images"]["intercode/sql-starter:latest"]
            assert f"image intercode/sql-starter:latest  {sql_id}" in listed.stdout
            assert "pool intercode/nl2bash-fs1" in listed.stdout
    finally:
        await asyncio.gather(*(agent.shutdown.remote() for agent in agents))
        await killed(dict(zip(resources, agents)))
    for host in cluster.engine_hosts:
        assert containers_of(host, run_id) == []
    for engine in cluster.engines:
        assert engine.docker("ps", "-aq").split() == []


async def gone(agent: Any) -> None:
    """Until a call to the killed `agent` fails as its death."""
    async with asyncio.timeout(30):
        while True:
            try:
                await agent.ping.remote()
            except ray.exceptions.RayActorError:
                return
            await asyncio.sleep(0.05)  # between two calls to the dying agent


async def test_errors_reach_the_driver_as_ours(cluster: LocalCluster, data_dir: Path) -> None:
    """An environment's error is raised as itself; a host agent that dies mid-episode is HostLost,
    and leaving the episode still works. (Reaping the dead agent's containers is a later slice:
    here the test removes them by their run label.)"""
    from environments.base import EpisodeError
    from orchestrator.cluster.agent import spawn
    from orchestrator.cluster.remote import HostLost, RemoteEnvironment

    task = the_tasks(data_dir)[0]
    run_id = f"cluster-{uuid.uuid4().hex[:8]}"
    agent = spawn("intercode_host_1", data_dir, run_id)
    host = cluster.engine_hosts[1]
    try:
        async with RemoteEnvironment(agent, task.kind) as env:
            with pytest.raises(EpisodeError):
                await env.step("ls")  # before reset
            await env.reset(task)
            assert (await env.step("ls /")).done is False
            ray.kill(agent)
            await gone(agent)  # ray.kill returns before the agent is dead: a fast step could still be served
            with pytest.raises(HostLost):
                await env.step("ls /")
    finally:
        await killed({"intercode_host_1": agent})
        left = containers_of(host, run_id)
        if left:
            subprocess.run(["docker", "-H", host, "rm", "-f", *left], capture_output=True, check=True)
    assert containers_of(host, run_id) == []


async def held(agent: Any) -> tuple[int, int]:
    """(environments open on the agent's host, containers leased there)."""
    status = await agent.status.remote()
    return status["in_flight"], sum(counts.get("leased", 0) for counts in status["pools"].values())


async def test_a_reset_given_up_or_failed_holds_nothing_on_its_host(cluster: LocalCluster, data_dir: Path) -> None:
    """A first reset that the sweep stops waiting for (its episode cancelled mid-reset) is closed on
    the host when its late answer comes; one that fails on the host is closed there at once. No
    environment, lease or container is left."""
    from dataclasses import replace

    from orchestrator.cluster.agent import spawn
    from orchestrator.cluster.remote import RemoteEnvironment
    from orchestrator.cluster.trainer import open_channel

    task = the_tasks(data_dir)[0]
    slow = replace(task, gold="sleep 4; ls /testbed")  # its reset waits 4 s for this gold's run
    run_id = f"cluster-{uuid.uuid4().hex[:8]}"
    agent = spawn("intercode_host_2", data_dir, run_id)
    channel = await open_channel("intercode_host_2", agent)
    try:
        for _ in range(3):  # given up mid-reset, three times: each late answer gives its lease back
            env = RemoteEnvironment(agent, task.kind, channel=channel)
            env.begin_reset(slow)
            await asyncio.sleep(0.5)
            await env.close()  # the episode ends (cancelled) before the reset answered
        assert (await held(agent))[0] >= 1  # the host is still resetting them
        for _ in range(200):
            if await held(agent) == (0, 0):
                break
            await asyncio.sleep(0.1)
        assert await held(agent) == (0, 0)
        env = RemoteEnvironment(agent, task.kind, channel=channel)
        with pytest.raises(Exception, match="unavailable"):
            await env.reset(replace(task, unavailable="a test says so"))
        assert await held(agent) == (0, 0)  # closed on the host as the reset failed
        await env.close()
    finally:
        await channel.close()
        await agent.shutdown.remote()  # its runtime closed: its containers removed
        await killed({"intercode_host_2": agent})
    assert containers_of(cluster.engine_hosts[2], run_id) == []


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1"])  # Ray's own port, Ray Client's
def test_an_unreachable_cluster_is_one_line_and_exit_2(address: str) -> None:
    result = subprocess.run([sys.executable, "-m", "orchestrator", "cluster", "status", "--ray", address],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: no Ray cluster at {address}: Connect call failed "
                                                  "('127.0.0.1', 1)"]
