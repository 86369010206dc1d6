"""`just bench-cluster`: a sweep through Ray against a local one, measured side by side in one run.

A local cluster of three Ray nodes on this machine (tests/cluster_fixture.py: each node its own
Docker engine, the images loaded into each) is started first and stopped at the end, even after an
error or Ctrl-C. Set IC_CLUSTER_SLOT (1-9) when another local cluster may run on the machine.

1. **The oracle sweep** of bench-sweep (NL2Bash fs 1-4, 200 tasks, Single strategy, one turn,
   concurrency 16) run locally, through Ray on one host (`hosts = ["intercode_host_0"]`, which
   holds the whole concurrency) and through Ray on the three hosts (sharing it), `--rounds` times
   in alternation, each `python -m orchestrator sweep` in a child process into a fresh output
   directory. Episodes per second over the episode phase (first episode start to last episode
   end, from the store) and whole-sweep seconds (the child's life); medians. A first local sweep
   computes the gold cache and is not counted. Each Ray sweep's rewards must equal the same round's local sweep's,
   but for the golds that depend on when they run (environments.bash.volatile).
2. **The action round trip** (`true`) on one environment of nl2bash-fs1 task 0, locally (in this
   benchmark's child process) and through Ray (a host agent on intercode_host_0 reached with
   RemoteEnvironment over the agent's channel, as a sweep reaches it; and, for comparison, with
   each step an actor call), in alternating blocks: p50 and p99.
3. **The head's CPU per episode**: each sweep process's user+system CPU (with its children) over
   its episodes, and the same over the episode phase alone (sampled); beside it the CPU the
   cluster's processes (raylets, control service, log monitors, the host agents) spent meanwhile,
   by process. Last, no container of the benchmark's may be left on any engine.

Targets: through Ray on one host at least 0.8x the local episodes/s; the action through Ray
p50 <= 3 ms. Ends with one `name: value` line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import contextlib
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from benchmarks.bench_sweep import ORACLE, phases
from foundation.settings import resolve_data_dir
from tests.cluster_fixture import LocalCluster, cluster_slot
from tests.stores import rows

IMAGES = [f"intercode/nl2bash-fs{n}" for n in (1, 2, 3, 4)]
HOSTS = ["intercode_host_0", "intercode_host_1", "intercode_host_2"]
CONCURRENCY = 16
CLUSTER = '[cluster]\nray = "{address}"\nhosts = {hosts}\nhost_concurrency = {per_host}\n'
VARIANTS = {"local": 0, "ray1": 1, "ray3": 3}  # name -> hosts (0: no [cluster])
CHILD_STOP_TIMEOUT = 120.0  # seconds for a child to remove its containers after Ctrl-C
ACTION = "true"
ACTION_HOST = "intercode_host_0"
AGENT = "ray::HostAgent"  # a host agent's process, as Ray names it


# ---------------------------------------------------------------- child processes

@dataclass(frozen=True, slots=True)
class Finished:
    out: str
    wall: float  # seconds
    cpu: float  # user + system seconds of the child and its children
    pid: int


def run_child(argv: list[str], log: Path, env: dict[str, str]) -> Finished:
    """Run `argv` to its end. It has a session of its own: on Ctrl-C here it gets SIGTERM (which
    `python -m orchestrator` takes as Ctrl-C) and time to remove its containers."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with log.with_suffix(".out").open("w+") as out, log.with_suffix(".err").open("w+") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, text=True,
                                   start_new_session=True)
        try:
            process.wait()
        except BaseException:
            stop(process)
            raise
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if process.returncode != 0:
            err.seek(0)
            sys.exit(f"bench-cluster: {' '.join(argv[2:5])} failed ({process.returncode}):\n{err.read()[-3000:]}")
        out.seek(0)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return Finished(out.read(), wall, cpu, process.pid)


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(CHILD_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def child_env(work: Path) -> dict[str, str]:
    # The gold cache starts empty (not the user's), shared by the head and every host agent.
    return {**os.environ, "INTERCODE_CACHE_DIR": str(work / "cache"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


# ---------------------------------------------------------------- who spent the CPU

class CpuWatch:
    """Samples, every PERIOD seconds, the CPU of each process under this one: the sweep's (the
    head) and those under the nodes' `ray start` (Ray's and the host agents'), so one that ends
    mid-sweep (a sweep's agents) still counts up to its last sample: an ended worker's time is
    not added to its raylet's (as measured here)."""

    PERIOD = 0.2

    def __init__(self, nodes: list[int]) -> None:
        self.nodes = set(nodes)
        self.first: dict[int, float] = {}  # pid -> its CPU seconds when first seen (0: it started meanwhile)
        self.last: dict[int, tuple[str, float]] = {}
        self.times: list[float] = []  # epoch seconds of each sample
        self.head: list[float] = []  # the head's CPU seconds so far, at each sample
        self.ray: list[collections.Counter[str]] = []  # the cluster's CPU seconds since the first sample, by name
        self.scripts: dict[int, str] = {}  # pid -> a Python process's script
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.PERIOD):
            self._sample()

    def _sample(self) -> None:
        now, stats, initial = time.time(), _proc_stats(), not self.head
        children = collections.defaultdict(list)
        for pid, (_, ppid, _) in stats.items():
            children[ppid].append(pid)
        head = 0.0
        todo = [(pid, pid in self.nodes) for pid in children[os.getpid()]]
        while todo:
            pid, ray = todo.pop()
            name, _, cpu = stats[pid]
            if ray:
                self.first.setdefault(pid, cpu if initial else 0.0)  # one that started meanwhile: all of it
                self.last[pid] = (self._name(pid, name), cpu)
            else:
                head += cpu
            todo += [(child, ray) for child in children[pid]]
        spent: collections.Counter[str] = collections.Counter()
        for pid, (name, cpu) in self.last.items():
            spent[name] += cpu - self.first[pid]
        self.times.append(now)
        self.head.append(head)
        self.ray.append(spent)

    def _name(self, pid: int, name: str) -> str:
        """A process by its name (a Ray worker's says its actor: ray::HostAgent), a Python one
        that has not named itself by its script (Ray's monitor, dashboard, log monitor)."""
        if not name.startswith("python"):
            return name
        if pid not in self.scripts:
            self.scripts[pid] = name
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                script = next((a for a in argv[1:] if a.endswith((b".py", b"/ray"))), b"")
                self.scripts[pid] = Path(script.decode()).name or name
        return self.scripts[pid]

    def between(self, start: float, end: float) -> tuple[float, collections.Counter[str]]:
        """CPU seconds from `start` to `end` (epoch seconds; between two samples by interpolation):
        the head's, and the cluster's processes' by name."""
        def spent(series: list[float]) -> float:
            return _interpolate(self.times, series, end) - _interpolate(self.times, series, start)

        names = set(self.ray[-1])
        return spent(self.head), collections.Counter({name: spent([c[name] for c in self.ray]) for name in names})


def _interpolate(xs: list[float], ys: list[float], x: float) -> float:
    i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _proc_stats() -> dict[int, tuple[str, int, float]]:
    """Every process: pid -> (name, parent pid, user + system CPU seconds)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry.name}/stat") as stat:
                    name, rest = stat.read().split(" (", 1)[1].rsplit(") ", 1)
                fields = rest.split()
                stats[int(entry.name)] = (name, int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return stats


# ---------------------------------------------------------------- part 1: the sweeps

def sweep_file(work: Path, label: str, address: str, hosts: int) -> tuple[Path, Path]:
    out = work / label
    text = ORACLE.format(out=out, concurrency=CONCURRENCY)
    if hosts:
        text += CLUSTER.format(address=address, hosts=json.dumps(HOSTS[:hosts]),
                               per_host=math.ceil(CONCURRENCY / hosts))
    path = work / f"{label}.toml"
    path.write_text(text)
    return path, out


def one_sweep(work: Path, label: str, hosts: int, cluster: LocalCluster, data_dir: str) -> dict:
    """One oracle sweep in a child process, on `hosts` hosts of the cluster (0: locally): its figures."""
    path, out = sweep_file(work, label, cluster.address, hosts)
    argv = [sys.executable, "-m", "orchestrator", "sweep", str(path), "--quiet", "--no-report", "--data-dir", data_dir]
    with CpuWatch([node.pid for node in cluster.nodes]) as watch:
        done = run_child(argv, work / label, child_env(work))
    (episodes, failed, first, last), = rows(out, "SELECT count(*), count(failure_class), min(started_at), "
                                                  "max(finished_at) FROM episodes")
    start_up, running, close = phases(out)
    head_steady, ray_steady = watch.between(first, last)
    ray_whole = watch.ray[-1]

    def per(seconds: float) -> float:
        return seconds * 1e3 / episodes  # ms per episode

    return {"label": label, "pid": done.pid, "episodes": episodes, "failed": failed, "eps": episodes / running,
            "wall": done.wall, "start_up": start_up, "close": close, "head_cpu_ms": per(done.cpu),
            "steady_cpu_ms": per(head_steady), "ray_total_ms": per(ray_whole.total()),
            "ray_cpu_ms": {name: per(s) for name, s in ray_whole.items() if per(s) >= 0.01},
            "ray_steady_ms": per(ray_steady.total()), "agent_steady_ms": per(ray_steady[AGENT]),
            "rewards": dict(rows(out, "SELECT task_id, reward FROM episodes")),
            "hosts": dict(rows(out, "SELECT host, count(*) FROM episodes GROUP BY host")),
            "labels": {json.loads(line)["run"] for line in (out / "sweep.log").read_text().splitlines()
                       if '"cluster_hosts"' in line}}  # the run labels of its agents' containers


def show_sweep(result: dict) -> None:
    ray = ", ".join(f"{name} {ms:.2f}" for name, ms in sorted(result["ray_cpu_ms"].items(), key=lambda i: -i[1]))
    r = result
    print(f"  {r['label']:<9} {r['episodes']} episodes ({r['failed']} failed): {r['eps']:6.1f}/s over the episode "
          f"phase; whole sweep {r['wall']:5.1f} s (start-up {r['start_up']:.1f} s, close {r['close']:.1f} s); head CPU "
          f"{r['head_cpu_ms']:.2f} ms/episode ({r['steady_cpu_ms']:.2f} over the episode phase); hosts {r['hosts']}")
    print(f"  {'':<9} the cluster's processes' CPU meanwhile: {r['ray_total_ms']:.2f} ms/episode ({ray or 'none'}); "
          f"over the episode phase {r['ray_steady_ms']:.2f}, of it the host agents {r['agent_steady_ms']:.2f}")


def unstable_tasks(data_dir: str) -> set[str]:
    """The tasks whose gold's output depends on when it runs: their rewards may differ run to run."""
    from environments.bash import volatile
    from tasks import load_tasks

    return {task.id for image in IMAGES for task in load_tasks(image.removeprefix("intercode/"), Path(data_dir))
            if volatile(task.gold_text)}


def sweeps_part(work: Path, cluster: LocalCluster, data_dir: str,
                rounds: int) -> tuple[dict[str, list[dict]], list[dict]]:
    """The warm-up sweep, then `rounds` of local, ray1, ray3: each kind's results, and every sweep's."""
    warm = one_sweep(work, "warm-up", 0, cluster, data_dir)
    print(f"gold cache computed by a first local sweep (not counted): {warm['eps']:.1f} episodes/s, "
          f"whole sweep {warm['wall']:.1f} s")
    unstable = unstable_tasks(data_dir)
    results: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for number in range(rounds):
        print(f"round {number + 1} of {rounds}:")
        for name, hosts in VARIANTS.items():
            result = one_sweep(work, f"{name}-{number}", hosts, cluster, data_dir)
            results[name].append(result)
            show_sweep(result)
        local = results["local"][-1]["rewards"]
        for name in ("ray1", "ray3"):
            remote = results[name][-1]["rewards"]
            differ = sorted(t for t in set(local) | set(remote)
                            if t not in unstable and local.get(t) != remote.get(t))
            results[name][-1]["differ"] = len(differ)
            print(f"  {name} rewards that differ from the local sweep's: {len(differ)} {differ[:5]} "
                  f"({len(unstable)} volatile golds left out)")
    return results, [warm, *(r for runs in results.values() for r in runs)]


# ---------------------------------------------------------------- part 2: the action round trip

async def actions_child(args: argparse.Namespace) -> None:
    """In a child process: one environment here and one on a host agent, stepped in alternating
    blocks; prints the round trips (seconds) as JSON."""
    import ray
    import ray.exceptions

    from environments import make_environment
    from environments.runtime import Runtime
    from foundation.logs import configure
    from orchestrator.cluster.agent import AgentSettings, spawn
    from orchestrator.cluster.channel import Channel
    from orchestrator.cluster.cli import connect
    from orchestrator.cluster.remote import RemoteEnvironment
    from tasks import load_tasks

    configure(0)
    this = asyncio.current_task()
    assert this is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, this.cancel)  # as Ctrl-C: the cleanup runs
    data_dir = resolve_data_dir(args.data_dir)
    task = load_tasks("nl2bash-fs1", data_dir)[0]
    await connect(args.child_actions)
    agent = spawn(ACTION_HOST, name=f"agent-{ACTION_HOST}-{args.label}")
    try:
        await agent.configure.remote(AgentSettings(data_dir=str(data_dir), run_id=args.label))
        await agent.start.remote()
        channel = await Channel.connect(ACTION_HOST, await agent.channel.remote(), lambda reason: None)
        try:
            async with (Runtime.open(data_dir=data_dir, run_id=args.label) as runtime,
                        make_environment("bash", runtime) as here,
                        RemoteEnvironment(agent, "bash", channel=channel) as there,
                        RemoteEnvironment(agent, "bash") as by_actor_calls):
                await asyncio.gather(here.reset(task), there.reset(task), by_actor_calls.reset(task))
                # "ray": as a sweep reaches a host (the agent's channel); "actor": each step an actor call
                timings = await alternate({"local": here, "ray": there, "actor": by_actor_calls}, args.steps,
                                          args.block)
        finally:
            await channel.close()
    finally:
        with contextlib.suppress(ray.exceptions.RayError):
            await agent.shutdown.remote()
        await asyncio.to_thread(ray.kill, agent, no_restart=True)
        await asyncio.to_thread(ray.shutdown)
    print(json.dumps(timings))


async def alternate(envs: dict, steps: int, block: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {name: [] for name in envs}
    for env in envs.values():  # warm-up, not counted: first calls, Ray's connections
        for _ in range(20):
            await env.step(ACTION)
    for number in range(math.ceil(steps / block)):
        order = list(envs) if number % 2 == 0 else list(reversed(envs))
        for name in order:
            for _ in range(min(block, steps - number * block)):
                started = time.perf_counter()
                await envs[name].step(ACTION)
                timings[name].append(time.perf_counter() - started)
    return timings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def actions_part(work: Path, cluster: LocalCluster, data_dir: str, steps: int, block: int,
                 label: str) -> dict[str, float]:
    argv = [sys.executable, "-m", "benchmarks.bench_cluster", "--child-actions", cluster.address, "--label", label,
            "--steps", str(steps), "--block", str(block), "--data-dir", data_dir]
    done = run_child(argv, work / "actions", child_env(work))
    timings = json.loads(done.out.strip().splitlines()[-1])
    figures = {}
    for name, seconds in timings.items():
        figures[f"{name}_action_p50_ms"] = statistics.median(seconds) * 1e3
        figures[f"{name}_action_p99_ms"] = percentile(seconds, 0.99) * 1e3
        print(f"  action `{ACTION}` {name:<5} n={len(seconds)}: p50 {figures[f'{name}_action_p50_ms']:.3f} ms, "
              f"p99 {figures[f'{name}_action_p99_ms']:.3f} ms")
    print(f"  Ray's share of the round trip (p50 through Ray - p50 here): "
          f"{figures['ray_action_p50_ms'] - figures['local_action_p50_ms']:.3f} ms")
    return figures


# ---------------------------------------------------------------- no container left

def leftovers(engines: list[str], labels: set[str], pids: set[int]) -> list[str]:
    """Containers of ours still on an engine: on the cluster's own engines any managed one; on the
    main engine (shared with others' runs) those of our runs' labels or of our sweeps' processes."""
    from foundation.pool.ownership import MANAGED, OWNER, RUN, Owner

    left = []
    for number, host in enumerate(engines):
        listed = subprocess.run(["docker", "-H", host, "ps", "-a", "--filter", f"label={MANAGED}", "--format",
                                 "{{.ID}} {{json .Labels}}"], capture_output=True, text=True, check=True).stdout
        for line in listed.splitlines():
            cid, labels_text = line.split(" ", 1)
            found = dict(item.split("=", 1) for item in json.loads(labels_text).split(",") if "=" in item)
            owner = Owner.parse(found.get(OWNER, ""))
            if number > 0 or found.get(RUN) in labels or (owner is not None and owner.pid in pids):
                left.append(f"{host} {cid}")
    return left


# ---------------------------------------------------------------- the run

def summary(results: dict[str, list[dict]], actions: dict[str, float], rounds: int) -> list[str]:
    keys = ("eps", "wall", "head_cpu_ms", "steady_cpu_ms", "ray_total_ms", "ray_steady_ms", "agent_steady_ms")
    med = {name: {key: statistics.median(r[key] for r in runs) for key in keys}
           for name, runs in results.items()}
    for name, figures in med.items():
        runs = ", ".join(f"{r['eps']:.1f}" for r in results[name])
        f = figures
        print(f"{name}: median of {rounds} rounds {f['eps']:.1f} episodes/s (runs: {runs}), whole sweep "
              f"{f['wall']:.1f} s, head CPU {f['head_cpu_ms']:.2f} ms/episode ({f['steady_cpu_ms']:.2f} over the "
              f"episode phase), the cluster's processes {f['ray_total_ms']:.2f} ms/episode "
              f"({f['ray_steady_ms']:.2f} over the episode phase, the host agents {f['agent_steady_ms']:.2f})")
    ratio = med["ray1"]["eps"] / med["local"]["eps"]
    p50 = actions["ray_action_p50_ms"]
    differ = sum(r["differ"] for name in ("ray1", "ray3") for r in results[name])
    failed = sum(r["failed"] for runs in results.values() for r in runs)
    return [f"ray_reward_mismatches: {differ} (unlike the same round's local sweep's, volatile golds left out)",
            f"failed_episodes: {failed}",
            f"ray1_vs_local: {ratio:.3f} (target >= 0.8: {'met' if ratio >= 0.8 else 'NOT met'})",
            f"ray3_vs_local: {med['ray3']['eps'] / med['local']['eps']:.3f}",
            *(f"{name}_whole_sweep_s: {med[name]['wall']:.1f}" for name in VARIANTS),
            *(f"{name}_head_cpu_ms_per_episode_phase: {med[name]['steady_cpu_ms']:.2f}" for name in VARIANTS),
            *(f"{name}_cluster_cpu_ms_per_episode: {med[name]['ray_total_ms']:.2f}" for name in VARIANTS),
            *(f"{name}_agent_cpu_ms_per_episode_phase: {med[name]['agent_steady_ms']:.2f}"
              for name in ("ray1", "ray3")),
            f"local_action_p50_ms: {actions['local_action_p50_ms']:.3f}",
            f"local_action_p99_ms: {actions['local_action_p99_ms']:.3f}",
            f"ray_action_p99_ms: {actions['ray_action_p99_ms']:.3f}",
            f"actor_call_action_p50_ms: {actions['actor_action_p50_ms']:.3f} (each step a Ray actor call, "
            "not the agent's channel)",
            f"ray_action_target: p50 <= 3 ms: {'met' if p50 <= 3 else 'NOT met'}",
            f"local_head_cpu_ms_per_episode: {med['local']['head_cpu_ms']:.2f}",
            f"ray1_head_cpu_ms_per_episode: {med['ray1']['head_cpu_ms']:.2f}",
            "head_cpu_ms_per_episode below: the sweep's process through Ray with 3 hosts (ray3)",
            f"local_eps: {med['local']['eps']:.1f}",
            f"ray1_eps: {med['ray1']['eps']:.1f}",
            f"ray3_eps: {med['ray3']['eps']:.1f}",
            f"ray_action_p50_ms: {p50:.3f}",
            f"head_cpu_ms_per_episode: {med['ray3']['head_cpu_ms']:.2f}"]


def bench(args: argparse.Namespace) -> list[str]:
    data_dir = str(resolve_data_dir(args.data_dir))
    label = f"bench-cluster-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as directory, LocalCluster(IMAGES) as cluster:
        work = Path(directory)
        print(f"cluster (slot {cluster_slot()}) at {cluster.address}: {len(cluster.nodes)} nodes, engines "
              f"{', '.join(cluster.engine_hosts)}; load: {os.getloadavg()[0]:.2f} (1 min)")
        results, sweeps = sweeps_part(work, cluster, data_dir, args.rounds)
        print(f"action round trip, {args.steps} steps each in blocks of {args.block}, alternating:")
        actions = actions_part(work, cluster, data_dir, args.steps, args.block, label)
        labels = {label, *(run for sweep in sweeps for run in sweep["labels"])}
        left = leftovers(cluster.engine_hosts, labels, {sweep["pid"] for sweep in sweeps})
        print(f"containers left on the engines: {len(left)} {left[:5]}")
        lines = [f"containers_left: {len(left)}", *summary(results, actions, args.rounds)]
    print(f"load after: {os.getloadavg()[0]:.2f} (1 min)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--rounds", type=int, default=2, help="sweeps of each kind, in alternation")
    parser.add_argument("--steps", type=int, default=500, help="actions timed here and through Ray, each")
    parser.add_argument("--block", type=int, default=50, help="actions in a row before switching")
    parser.add_argument("--child-actions", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--label", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_actions:
        asyncio.run(actions_child(args))
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a TERM stops the cluster too, as Ctrl-C does
    sys.stdout.reconfigure(line_buffering=True)  # each figure as it comes, also into a pipe
    started = time.perf_counter()
    lines = bench(args)
    print(f"bench-cluster took {time.perf_counter() - started:.0f} s")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
