"""A trainer's own Ray job on the local cluster (tests/cluster_fixture.py): an actor of the job opens
environments on the hosts and earns the oracle's rewards, spread over the hosts; the gymnasium id
`intercode-cluster-bash-v0` runs an episode; leaving after an error or a cancellation gives the
container back; bad input is one line. After each test no container of its run is left anywhere."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import gymnasium
import pytest

from environments.kind import gold_actions
from foundation.errors import ConfigError
from tasks import Task, load_tasks
from tests.cluster_fixture import LocalCluster, containers_of, killed

# A Ray cluster of three nodes, each with an engine of its own, beside the suite's: ./dev test-long
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cluster, pytest.mark.long]
ray = pytest.importorskip("ray")

IMAGES = ["intercode/starter"]  # starter-bash's image: no benchmark data needed
HOSTS = ["intercode_host_0", "intercode_host_1", "intercode_host_2"]


@pytest.fixture
async def run_id(cluster: LocalCluster) -> AsyncIterator[str]:
    """The run label of the test's agents; at the end they are shut down and killed, and none of
    their containers is left on any engine."""
    from orchestrator.cluster.agent import spawn

    run = f"trainer-{uuid.uuid4().hex[:8]}"
    yield run
    agents = [spawn(resource) for resource in HOSTS]  # the test's own, found by name
    await asyncio.gather(*(agent.shutdown.remote() for agent in agents))
    await killed(dict(zip(HOSTS, agents)))
    for host in cluster.engine_hosts:
        assert containers_of(host, run) == []


async def episode(env: Any, task: Task) -> tuple[float, float]:
    """The oracle's episode: the last step's reward and the score."""
    assert await env.reset(task) == task.query
    result = None
    for action in gold_actions(task):
        result = await env.step(action)
    assert result is not None and result.done
    reward, _ = await env.score()
    return result.reward, reward


@ray.remote(num_cpus=0)
class Trainer:
    """An actor of the trainer's job: opens one environment per task, one after another (each on
    the host with the fewest in flight), then runs the episodes at once."""

    async def run(self, tasks: list[Task], run_id: str) -> list[tuple[float, float, list[str]]]:
        from orchestrator.cluster.trainer import open_environment

        async with AsyncExitStack() as stack:
            envs = [await stack.enter_async_context(open_environment(task.kind, run_id=run_id)) for task in tasks]
            rewards = await asyncio.gather(*(episode(env, task) for env, task in zip(envs, tasks)))
        return [(*reward, env.hosts) for reward, env in zip(rewards, envs)]


async def status(host: str) -> dict[str, Any]:
    from orchestrator.cluster.agent import spawn

    return await spawn(host).status.remote()  # the host's shared agent (a new one if it is gone)


async def in_flight(host: str) -> tuple[int, int]:
    """The host agent's environments in flight, and its containers leased."""
    answer = await status(host)
    return answer["in_flight"], sum(counts.get("leased", 0) for counts in answer["pools"].values())


async def test_an_actor_of_the_trainer_earns_the_oracle_rewards_on_every_host(run_id: str) -> None:
    tasks = load_tasks("starter-bash")[:3]
    trainer = Trainer.remote()
    try:
        results = await trainer.run.remote(tasks, run_id)
    finally:
        ray.kill(trainer)
    assert [(step, score) for step, score, _ in results] == [(1.0, 1.0)] * len(tasks)
    hosts = [set(served) for _, _, served in results]
    assert all(len(served) == 1 for served in hosts)  # an environment stays on its host
    assert set.union(*hosts) == set(HOSTS)  # opened while the others were in flight: one each
    for host in HOSTS:
        assert await in_flight(host) == (0, 0)
        # the trainer is gone, the agents it created are not: the containers it gave back are in their pools
        assert (await status(host))["pools"]["intercode/starter"]["idle"] >= 1


def test_the_gymnasium_id_runs_an_episode_on_a_host(cluster: LocalCluster, run_id: str) -> None:
    env = gymnasium.make("orchestrator.cluster.gym:intercode-cluster-bash-v0", ray=cluster.address,
                         host="intercode_host_2", run_id=run_id)
    try:
        task = env.unwrapped.tasks[0]
        observation, info = env.reset(options={"index": 0})
        assert observation == task.query and info == {"task": task.id, "index": 0}
        reward, terminated = 0.0, False
        for action in gold_actions(task):
            _, reward, terminated, truncated, _ = env.step(action)
            assert not truncated
        assert terminated and reward == 1.0
        assert env.unwrapped.score()[0] == 1.0
        assert env.unwrapped._env.hosts[-1] == "intercode_host_2"
        env.reset(options={"index": 1})  # a new episode in a fresh container, as the host's pool resets
        _, reward, terminated, _, _ = env.step("skip")
        assert terminated and reward == 0.0
    finally:
        env.close()
    assert asyncio.run(in_flight("intercode_host_2")) == (0, 0)


async def test_leaving_after_an_error_or_a_cancellation_gives_the_container_back(run_id: str) -> None:
    from orchestrator.cluster.trainer import open_environment

    task = load_tasks("starter-bash")[0]
    with pytest.raises(RuntimeError, match="the trainer's own error"):
        async with open_environment("bash", host="intercode_host_1", run_id=run_id) as env:
            await env.reset(task)
            raise RuntimeError("the trainer's own error")
    assert await in_flight("intercode_host_1") == (0, 0)

    stepping = asyncio.Event()

    async def cancelled_mid_step() -> None:
        async with open_environment("bash", host="intercode_host_1", run_id=run_id) as env:
            await env.reset(task)
            stepping.set()
            await env.step("sleep 30")

    episode_task = asyncio.create_task(cancelled_mid_step())
    await stepping.wait()
    episode_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await episode_task
    assert await in_flight("intercode_host_1") == (0, 0)


async def test_bad_input_is_one_line(cluster: LocalCluster, run_id: str) -> None:
    from orchestrator.cluster.trainer import open_environment

    with pytest.raises(ConfigError) as unknown_host:
        async with open_environment("bash", host="intercode_host_7", run_id=run_id):
            pass
    assert str(unknown_host.value) == ("unknown host 'intercode_host_7': the cluster's hosts are "
                                       "intercode_host_0, intercode_host_1, intercode_host_2")
    with pytest.raises(ConfigError) as unknown_kind:
        async with open_environment("cobol", run_id=run_id):
            pass
    assert "\n" not in str(unknown_kind.value) and "unknown environment kind 'cobol'" in str(unknown_kind.value)
    assert uninitialized() == [
        "ConfigError: Ray is not initialized: call ray.init(address=...) first or pass address=HOST:PORT",
        "UserError: no Ray cluster at 127.0.0.1:1: Connect call failed ('127.0.0.1', 1)",
        "ConfigError: the cluster needs Ray, an optional extra: pip install -e '.[ray]'",
    ]


SCRIPT = """
import asyncio, sys
from foundation.errors import UserError
from orchestrator.cluster.trainer import open_environment

async def open(address):
    try:
        async with open_environment("bash", address=address):
            pass
    except UserError as error:
        print(f"{type(error).__name__}: {error}")

asyncio.run(open(None))
asyncio.run(open("127.0.0.1:1"))
sys.modules["ray"] = None  # as if Ray were not installed: its import fails
asyncio.run(open(None))
"""


def uninitialized() -> list[str]:
    """What a process without Ray initialized gets: no address, nothing at the address, no Ray."""
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


async def test_cluster_down_stops_the_shared_agents_a_trainer_left(cluster: LocalCluster, run_id: str) -> None:
    from orchestrator.cluster.agent import NAMESPACE, agent_name
    from orchestrator.cluster.trainer import open_environment

    task = load_tasks("starter-bash")[0]
    for host in HOSTS:
        async with open_environment("bash", host=host, run_id=run_id) as env:
            await env.reset(task)  # a container leased there, given back to the agent's pool
    assert all(containers_of(engine, run_id) for engine in cluster.engine_hosts[:3])  # idle in the pools
    down = subprocess.run([sys.executable, "-m", "orchestrator", "cluster", "down", "--ray", cluster.address],
                          capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert down.stdout.splitlines() == [f"{host}: shared agent stopped" for host in HOSTS] + ["3 shared agents stopped"]
    for host in HOSTS:
        with pytest.raises(ValueError):
            ray.get_actor(agent_name(host), namespace=NAMESPACE)
    for engine in cluster.engine_hosts[:3]:
        assert containers_of(engine, run_id) == []
