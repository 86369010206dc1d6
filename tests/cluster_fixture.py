"""A local Ray cluster of three nodes on this machine, each node with a Docker engine of its own.

    with LocalCluster(images=["intercode/nl2bash-fs1"]) as cluster:
        ray.init(address=cluster.address)    # intercode_host_0..2, one per node
        ...

Node 0 (the head) talks to the machine's main engine; nodes 1 and 2 each get a SecondEngine
(tests/second_engine.py) with its own socket, data root, exec root, pidfile and bridge, and the
images copied into it. Each `ray start --block` runs with DOCKER_HOST of its node's engine, so an
actor placed there by the node's custom resource `intercode_host_N` talks to that engine.

Each `ray start --block` is ours by process id: SIGTERM makes it stop the processes of its node
(never `ray stop`, which stops every Ray node on the machine, whoever started it). At the end the
engines are closed, their containers removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from foundation.engine import DEFAULT_HOST
from foundation.pool.ownership import RUN
from tests.second_engine import SecondEngine

RAY = str(Path(sys.executable).with_name("ray"))
HOSTS = 3
START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
STARTED = "Ray runtime started."  # what `ray start` prints once its node is up
OBJECT_STORE_BYTES = 100 * 1024 * 1024  # Ray's minimum is 75 MiB; the default would take 30 % of memory per node


def cluster_slot() -> int:
    """Which local cluster this process builds: `IC_CLUSTER_SLOT` (0-9, default 0). Clusters of
    different slots have their own engines' paths, bridges and subnets, so two can run at once."""
    slot = os.environ.get("IC_CLUSTER_SLOT", "0")
    if not slot.isdigit() or int(slot) > 9:
        raise ValueError(f"IC_CLUSTER_SLOT={slot!r}: give a number from 0 to 9")
    return int(slot)


def host_engine(number: int, slot: int | None = None) -> SecondEngine:
    """The engine of node `number` (1, 2, ...): its own bridge on an unused private /24."""
    slot = cluster_slot() if slot is None else slot
    name = f"host{number}" if slot == 0 else f"s{slot}host{number}"
    return SecondEngine(Path(f"/var/lib/intercode-cluster-{name}"), bridge=f"ic-{name}",
                        bridge_address=f"10.213.{80 + 10 * slot + number}.1/24", exec_root=Path(f"/run/ic-{name}"))


class LocalCluster:
    def __init__(self, images: list[str], hosts: int = HOSTS) -> None:
        self.images = images
        self.engines = [host_engine(number) for number in range(1, hosts)]
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.client_port = _free_port()  # Ray Client's server on the head: ray://127.0.0.1:PORT
        self.client_address = f"ray://127.0.0.1:{self.client_port}"
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ic-ray-", dir="/tmp"))
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.extra_hosts: dict[int, str] = {}  # node number -> its engine, for nodes added later

    @property
    def engine_hosts(self) -> list[str]:
        """The engine of each node, in node order: the main engine's first."""
        hosts = [os.environ.get("DOCKER_HOST") or DEFAULT_HOST] + [engine.host for engine in self.engines]
        return hosts + [self.extra_hosts[number] for number in sorted(self.extra_hosts)]

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.close(keep_logs=True)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        for engine in self.engines:
            engine.start()
            engine.load(self.images)
        head = ["--head", "--port", str(self.port), "--ray-client-server-port", str(self.client_port),
                "--include-dashboard=false", "--disable-usage-stats"]
        self._node(0, head)
        for number in range(1, len(self.engines) + 1):
            self._node(number, ["--address", self.address])
        self._wait_for_nodes()

    def kill_node(self, number: int) -> None:
        """SIGKILL node `number` (not the head): its Ray processes and its engine, as a machine lost.
        Ray's processes leave the session of their `ray start`; all of a node's carry its engine's
        DOCKER_HOST, which is how they are found."""
        assert number > 0, "the head stays"
        node = self.nodes[number]
        if node.poll() is None:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()
        for pid in _processes_with(f"DOCKER_HOST={self.engine_hosts[number]}"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.engines[number - 1].kill()

    def add_node(self, docker_host: str) -> int:
        """One more node, its engine at `docker_host` (none answering there is a node without Docker);
        returns its number. `stop_node` ends it."""
        number = len(self.nodes)
        self.extra_hosts[number] = docker_host
        self._node(number, ["--address", self.address])
        self._wait_for_nodes()
        return number

    def stop_node(self, number: int) -> None:
        """End a node `add_node` started (the last one)."""
        assert number == len(self.nodes) - 1 and number in self.extra_hosts, "only the last node added"
        _terminate(self.nodes.pop())
        del self.extra_hosts[number]

    def restart_node(self, number: int) -> None:
        """Node `number` back after `kill_node`: its engine started again, then its Ray node."""
        self.engines[number - 1].start()
        self._node(number, ["--address", self.address])

    def _node(self, number: int, role: list[str]) -> None:
        env = {**os.environ, "DOCKER_HOST": self.engine_hosts[number], "RAY_USAGE_STATS_ENABLED": "0"}
        argv = [RAY, "start", *role, "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                "--object-store-memory", str(OBJECT_STORE_BYTES), "--temp-dir", str(self.temp_dir),
                "--resources", json.dumps({f"intercode_host_{number}": 1})]
        path = self.temp_dir / f"node{number}.log"
        seen = path.read_text(errors="replace").count(STARTED) if path.exists() else 0
        with path.open("ab") as log:
            process = subprocess.Popen(argv, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        if number < len(self.nodes):
            self.nodes[number] = process  # a node started again
        else:
            self.nodes.append(process)
        # One node at a time: nodes starting together on one machine time out on each other.
        self._wait(lambda: path.read_text(errors="replace").count(STARTED) > seen, f"ray node {number}")

    def _wait_for_nodes(self) -> None:
        wanted = {f"intercode_host_{number}" for number in range(len(self.nodes))}
        self._wait(lambda: all(name in (self._ray_status() or "") for name in wanted), f"{len(wanted)} nodes")

    def _ray_status(self) -> str | None:
        result = subprocess.run([RAY, "status", "--address", self.address], capture_output=True, text=True,
                                timeout=60)
        return result.stdout if result.returncode == 0 else None

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            if dead := [node.args for node in self.nodes if node.poll() is not None]:
                raise RuntimeError(f"a ray node exited at start ({dead[0][2:5]}); see {self.temp_dir}/node*.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not up within {START_TIMEOUT:g} s; see {self.temp_dir}")
            time.sleep(0.2)  # between two readiness checks

    def close(self, *, keep_logs: bool = False) -> None:
        """Stop the nodes (the head last), then the engines; remove Ray's temp dir (kept, with the
        nodes' logs, after a failed start)."""
        for node in reversed(self.nodes):
            _terminate(node)
        self.nodes = []
        for engine in self.engines:
            engine.close()
        if not keep_logs:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: only the processes of this node
        process.wait()


async def killed(agents: dict[str, Any]) -> None:
    """Kill the agents (host resource -> its shared agent) and wait until their names are free, so
    that a later spawn makes a new one."""
    import ray

    from orchestrator.cluster.agent import NAMESPACE, agent_name

    for agent in agents.values():
        ray.kill(agent)
    deadline = asyncio.get_running_loop().time() + 30
    for resource in agents:
        while True:
            try:
                ray.get_actor(agent_name(resource), namespace=NAMESPACE)
            except ValueError:
                break
            assert asyncio.get_running_loop().time() < deadline, f"{resource}'s agent still named after 30 s"
            await asyncio.sleep(0.05)  # between two checks of the name


def containers_of(host: str, run_id: str) -> list[str]:
    """The containers on engine `host` labelled with run `run_id`."""
    return subprocess.run(["docker", "-H", host, "ps", "-aq", "--filter", f"label={RUN}={run_id}"],
                          capture_output=True, text=True, check=True).stdout.split()


def _processes_with(variable: str) -> list[int]:
    """The processes whose environment has `variable` (NAME=value)."""
    wanted = variable.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if wanted in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
