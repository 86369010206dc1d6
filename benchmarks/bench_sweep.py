"""`just bench-sweep`: the sweep's throughput, measured side by side in one run.

1. **Oracle over NL2Bash fs 1–4** (200 tasks, the gold command as the model's answer, Single
   strategy), once at concurrency 1 and once at 16, each a whole sweep into a fresh output
   directory. Episodes per second are 200 / the episode phase (first episode start to last
   episode end), as the original's 0.41 s per episode excludes its 27 s of start-up and close;
   the sweep warms its pools before the first episode, and the start-up and close times and the
   whole-sweep rate are printed too. Gold results are cached by a first, also reported, sweep
   that computes them. Every reward at 16 must equal its reward at 1. What the disk cap costs is
   measured after: concurrency 16 with the cap and without (`disk_mb = 0`), in alternation.
2. **LLM-bound**: a simulated 1 s LLM (the project's server, in its own process like a remote
   provider) answering a wrong query every turn, Try Again for 10 turns, 256 episodes at once,
   over the starter SQL tasks (one shared server, a connection per episode). Ideal throughput is
   256 episodes per 10 s; the figure is achieved / ideal over the whole sweep (start-up and close
   included; `llm_bound_share_steady` is the same over the episode phase), with the peak RSS of
   the sweep process plus its LLM worker processes. `--llm-workers 1,2 --rounds 2` measures each
   count of LLM worker processes in alternation and prints their medians side by side.
   Each sweep runs twice, with transcripts (every message of every call stored) and without
   (`transcripts = false`), in alternation: `transcript_overhead_ratio` is the share of ideal with
   them over the share without (target ≥ 0.95), printed with the store's bytes per episode of each.

Each sweep runs in a child process, so its peak RSS is its own. Ends with one `name: value` line
per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from foundation.logs import configure
from foundation.settings import resolve_data_dir
from orchestrator.sweep.config import load_sweep
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.levels import run_sweep

ORACLE = """
name = "bench-oracle"
output = "{out}"
strategies = ["single"]
max_turns = 1
concurrency = {concurrency}
[[models]]
name = "oracle"
""" + "".join(f'[[tasks]]\ndataset = "nl2bash-fs{n}"\n' for n in (1, 2, 3, 4))
NO_CAP = "[pools]\n" + "".join(f'"intercode/nl2bash-fs{n}" = {{ disk_mb = 0 }}\n' for n in (1, 2, 3, 4))

LLM_BOUND = """
name = "bench-llm-bound"
output = "{out}"
strategies = ["try_again"]
max_turns = {turns}
concurrency = {concurrency}
epochs = {epochs}
llm_workers = {workers}
transcripts = {transcripts}
[[models]]
name = "openai/sim-1s"
api_base = "{api_base}"
api_key_env = "BENCH_LOCAL_KEY"
limits = {{ max_concurrency = {concurrency} }}
timeout = 60
[[tasks]]
dataset = "starter-sql"
"""
WRONG = "Let me look at the data first.\n```sql\nSELECT 1\n```"


async def child(args: argparse.Namespace) -> None:
    """Run one sweep file in this process; print its wall time and peak RSS as JSON."""
    configure(0)
    config, digest = load_sweep(Path(args.child))
    data_dir = resolve_data_dir(args.data_dir) if args.data_dir else None
    started = time.perf_counter()
    summary = await run_sweep(config, digest, progress=SweepProgress(quiet=True), data_dir=data_dir)
    wall = time.perf_counter() - started
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kb = own.ru_maxrss
    # The LLM workers are this process's children: the largest one's peak, counted once per worker.
    llm_models = [m for m in config.models if m.name != "oracle" and not m.name.startswith("replay:")]
    workers_mb = children.ru_maxrss / 1024 * config.llm_workers if llm_models else 0.0
    print(json.dumps({"wall_s": wall, "ran": summary.ran, "peak_rss_mb": peak_kb / 1024 + workers_mb,
                      "sweep_rss_mb": peak_kb / 1024, "workers_rss_mb": workers_mb,
                      "cpu_s": own.ru_utime + own.ru_stime, "children_cpu_s": children.ru_utime + children.ru_stime}))


def run_child(sweep: Path, data_dir: str | None) -> dict:
    command = [sys.executable, "-m", "benchmarks.bench_sweep", "--child", str(sweep)]
    if data_dir:
        command += ["--data-dir", data_dir]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"bench-sweep: the sweep {sweep} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def phases(out: Path) -> tuple[float, float, float]:
    """(start-up, episodes, close) seconds of the last run: pools warming before the first episode,
    first episode start to last episode end, last episode end to the run's end."""
    db = sqlite3.connect(out / "results.db")
    try:
        (run_start, run_end), = db.execute("SELECT started_at, finished_at FROM runs ORDER BY id DESC LIMIT 1")
        (first, last), = db.execute("SELECT min(started_at), max(finished_at) FROM episodes")
    finally:
        db.close()
    return first - run_start, last - first, run_end - last


def rewards(out: Path) -> dict[str, tuple[float, str]]:
    db = sqlite3.connect(out / "results.db")
    try:
        return {task: (reward, status) for task, reward, status in
                db.execute("SELECT task_id, reward, status FROM episodes")}
    finally:
        db.close()


def oracle_part(work: Path, data_dir: str) -> dict[str, float]:
    """Three sweeps: concurrency 16 with an empty gold cache (each task's gold runs once, in its own
    container), then 1 and 16 with the gold results cached, as every later sweep on the same images
    has them. The two measured side by side are the cached ones."""
    os.environ["INTERCODE_CACHE_DIR"] = str(work / "cache")  # starts empty: not the user's cache
    figures: dict[str, float] = {}
    outcomes = {}
    for label, concurrency in (("cold", 16), ("c1", 1), ("c16", 16)):
        out = work / f"oracle-{label}"
        sweep = work / f"oracle-{label}.toml"
        sweep.write_text(ORACLE.format(out=out, concurrency=concurrency))
        result = run_child(sweep, data_dir)
        outcomes[label] = rewards(out)
        start_up, running, close = phases(out)
        eps = result["ran"] / running
        figures[f"oracle_eps_{label}"] = eps
        figures[f"oracle_eps_whole_{label}"] = result["ran"] / result["wall_s"]
        solved = sum(r == 1.0 for r, _ in outcomes[label].values())
        gold = "gold computed" if label == "cold" else "gold cached, but for the 25 that depend on the time"
        print(f"oracle, concurrency {concurrency:>2} ({gold}): {result['ran']} episodes in {running:.2f} s "
              f"= {eps:.1f} episodes/s (start-up {start_up:.2f} s, close {close:.2f} s; whole sweep "
              f"{result['wall_s']:.2f} s = {result['ran'] / result['wall_s']:.1f}/s); reward 1.0 on {solved}; "
              f"peak RSS {result['peak_rss_mb']:.0f} MB")
    differ = sorted(t for label in ("cold", "c16") for t in outcomes["c1"] if outcomes["c1"][t] != outcomes[label].get(t))
    print(f"rewards that differ from concurrency 1: {len(differ)} {differ[:5]}")
    not_one = sorted(t for t, (r, _) in outcomes["c16"].items() if r != 1.0)
    print(f"tasks below reward 1.0: {not_one} (validate's figures and reasons: docs/fidelity.md)")
    figures["oracle_reward_mismatches"] = float(len(differ))
    figures["speedup_c16_vs_c1"] = figures["oracle_eps_c16"] / figures["oracle_eps_c1"]
    return figures | disk_cap_part(work, data_dir)


def disk_cap_part(work: Path, data_dir: str, rounds: int = 2) -> dict[str, float]:
    """The oracle at concurrency 16 with each container's disk capped and without, in alternation."""
    rates: dict[bool, list[float]] = {True: [], False: []}
    for n in range(rounds):
        for capped in (True, False):
            out = work / f"oracle-disk-{capped}-{n}"
            sweep = work / f"oracle-disk-{capped}-{n}.toml"
            sweep.write_text(ORACLE.format(out=out, concurrency=16) + ("" if capped else NO_CAP))
            result = run_child(sweep, data_dir)
            rates[capped].append(result["ran"] / phases(out)[1])
    capped, uncapped = statistics.median(rates[True]), statistics.median(rates[False])
    print(f"oracle, concurrency 16, disk cap against none, {rounds} each in alternation: "
          f"{[round(r, 1) for r in rates[True]]} against {[round(r, 1) for r in rates[False]]} episodes/s")
    return {"oracle_eps_c16_capped": capped, "oracle_eps_c16_uncapped": uncapped, "disk_cap_ratio": capped / uncapped}


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a running process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if process.poll() is not None:
            sys.exit("bench-sweep: the simulated LLM server exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)  # polling readiness of a process we just started
    sys.exit("bench-sweep: the simulated LLM server did not start")


def llm_part(work: Path, concurrency: int, turns: int, epochs: int, latency: float, workers: int,
             transcripts: bool = True) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "agents.llm.server", "--port", str(port), "--latency",
                               str(latency), "--answer", WRONG], stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, server)
        out = Path(tempfile.mkdtemp(dir=work, prefix="llm-bound-"))  # a fresh store for every run
        sweep = out.with_suffix(".toml")
        sweep.write_text(LLM_BOUND.format(out=out, concurrency=concurrency, turns=turns, epochs=epochs,
                                          workers=workers, api_base=f"http://127.0.0.1:{port}/v1",
                                          transcripts=str(transcripts).lower()))
        os.environ["BENCH_LOCAL_KEY"] = "sk-bench-local"
        result = run_child(sweep, None)
        server_cpu = _cpu_seconds(server.pid)
    finally:
        server.terminate()
        server.wait()
    db = sqlite3.connect(out / "results.db")
    (episodes, turns_done, failed), = db.execute(
        "SELECT count(*), sum(n_turns), sum(failure_class IS NOT NULL) FROM episodes").fetchall()
    latencies = sorted(x for (x,) in db.execute("SELECT latency_s FROM llm_calls"))
    (turn_s,), = db.execute("SELECT avg((finished_at - started_at) / n_turns) FROM episodes WHERE n_turns > 0")
    db.close()
    if latencies:
        pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
        print(f"LLM-bound turns: {turn_s:.3f} s each on average; the LLM call as the sweep saw it: p50 "
              f"{pick(0.5):.3f} s, p90 {pick(0.9):.3f} s, p99 {pick(0.99):.3f} s (the server answers after {latency:g} s)")
    ideal = concurrency / (turns * latency)
    achieved = episodes / result["wall_s"]
    start_up, episode_phase, close = phases(out)
    print(f"LLM-bound phases: start-up {start_up:.1f} s, episodes {episode_phase:.1f} s "
          f"({episodes / episode_phase:.2f}/s = {episodes / episode_phase / ideal:.3f} of ideal), close {close:.1f} s")
    print(f"LLM-bound: {episodes} episodes x {turns} turns ({turns_done} turns, {failed} failed) at {concurrency} "
          f"at once in {result['wall_s']:.1f} s = {achieved:.2f} episodes/s; ideal {ideal:.2f}/s "
          f"(a {latency:g} s answer per turn); peak RSS {result['peak_rss_mb']:.0f} MB (sweep process "
          f"{result['sweep_rss_mb']:.0f} MB, its LLM workers at most {result['workers_rss_mb']:.0f} MB); CPU: sweep process "
          f"{result['cpu_s']:.1f} s, its LLM workers {result['children_cpu_s']:.1f} s, the simulated LLM server "
          f"{server_cpu:.1f} s")
    size = sum(f.stat().st_size for f in out.glob("results.db*"))
    print(f"LLM-bound store, transcripts {'on' if transcripts else 'off'}: {size / episodes:,.0f} bytes per episode "
          f"(the transcript's body {transcript_bytes(out):,.0f})")
    return {"llm_bound_share_of_ideal": achieved / ideal, "llm_bound_share_steady": episodes / episode_phase / ideal,
            "peak_rss_mb": result["peak_rss_mb"], "llm_bound_failed": float(failed),
            "bytes_per_episode": size / episodes}


def transcript_bytes(out: Path) -> float:
    """The transcripts' compressed bodies per episode (0 without them)."""
    db = sqlite3.connect(out / "results.db")
    try:
        (per,), = db.execute("SELECT coalesce(sum(length(body)), 0) * 1.0 / (SELECT count(*) FROM episodes) "
                             "FROM transcripts").fetchall()
    finally:
        db.close()
    return float(per)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=0, help="LLM-bound epochs over the 5 SQL tasks "
                                                              "(default: the concurrency, so exactly 5 waves)")
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--llm-workers", default="1", help="the LLM-bound sweep's llm_workers; several, "
                                                             "comma-separated (1,2), are measured in alternation")
    parser.add_argument("--rounds", type=int, default=1, help="LLM-bound sweeps per llm_workers count")
    parser.add_argument("--skip-oracle", action="store_true")
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args))
        return
    data_dir = str(resolve_data_dir(args.data_dir))
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as directory:
        work = Path(directory)
        figures = {} if args.skip_oracle else oracle_part(work, data_dir)
        epochs = args.epochs or args.concurrency  # 5 tasks x concurrency epochs: exactly 5 waves
        counts = [int(n) for n in args.llm_workers.split(",")]
        shares: dict[tuple[int, bool], list[float]] = {(n, t): [] for n in counts for t in (True, False)}
        for round_no in range(args.rounds):
            for n in counts:
                for transcripts in ((True, False) if round_no % 2 == 0 else (False, True)):  # alternated
                    print(f"LLM-bound with llm_workers = {n}, transcripts {'on' if transcripts else 'off'}:")
                    result = llm_part(work, args.concurrency, args.turns, epochs, args.latency, n, transcripts)
                    shares[(n, transcripts)].append(result["llm_bound_share_of_ideal"])
                    figures |= {f"{k}_{'with' if transcripts else 'without'}": v for k, v in result.items()}
                    figures |= result if transcripts else {}
        for n in counts:
            with_, without = (statistics.median(shares[(n, t)]) for t in (True, False))
            runs = "; ".join(f"{'with' if t else 'without'}: {', '.join(f'{x:.3f}' for x in shares[(n, t)])}"
                             for t in (True, False))
            print(f"llm_bound_share_workers_{n}: {with_:.3f} with transcripts, {without:.3f} without ({runs})")
        figures["llm_bound_share_of_ideal"] = statistics.median(shares[(counts[0], True)])
        figures["transcript_overhead_ratio"] = figures["llm_bound_share_of_ideal"] / statistics.median(
            shares[(counts[0], False)])
    for name in ("oracle_eps_cold", "oracle_eps_whole_c1", "oracle_eps_whole_c16", "oracle_reward_mismatches",
                 "speedup_c16_vs_c1", "oracle_eps_c16_capped", "oracle_eps_c16_uncapped", "disk_cap_ratio",
                 "llm_bound_failed", "llm_bound_share_steady"):
        if name in figures:
            print(f"{name}: {figures[name]:.2f}")
    for name in ("bytes_per_episode_with", "bytes_per_episode_without", "peak_rss_mb_without"):
        if name in figures:
            print(f"{name}: {figures[name]:.0f}")
    for name in ("oracle_eps_c1", "oracle_eps_c16", "llm_bound_share_of_ideal", "transcript_overhead_ratio",
                 "peak_rss_mb"):
        if name in figures:
            print(f"{name}: {figures[name]:.1f}" if name.startswith(("oracle", "peak")) else f"{name}: {figures[name]:.3f}")


if __name__ == "__main__":
    main()
