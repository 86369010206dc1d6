"""`./dev bench-revisions BEFORE [AFTER]`: two commits' benchmarks side by side, in one run.

Each commit is checked out in a worktree of its own, and everything runs from that worktree's code
(the project's virtualenv, with the worktree first on the path): its images are built by its own
`images build` (so each side runs in the images its code makes: the image tags are shared, so a
side's images are rebuilt, mostly from the layer cache, each time it comes round), then its
`bench-pool` and `bench-sweep`, then once (it takes minutes) its replay of the shared Bash
trajectories, in its own images again. The replay moves by about half a point from run to run of
one commit (recordings that read the clock, `ps`, the load average): compare its turns with `replay
--json` where the sides differ. The sides alternate, ABBA, so a drift of the machine falls on both.

Prints each figure per run and per side, the medians and the ratio after/before, and ends with one
`name: value` line per ratio.

    python -m benchmarks.side_by_side 73f091a            # against the working tree's HEAD
    python -m benchmarks.side_by_side 73f091a HEAD --rounds 2
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from foundation.settings import PROJECT_ROOT, resolve_data_dir

IMAGES = ["nl2bash-fs1", "nl2bash-fs2", "nl2bash-fs3", "nl2bash-fs4", "sql-starter"]
TRAJECTORIES = "trajectories/bash"
FIGURE = re.compile(r"^([a-z0-9_]+): (-?[0-9.]+)$")
# bench-sweep's line of the LLM-bound sweep with and without transcripts (a commit before them has one figure)
SHARES = re.compile(r"^llm_bound_share_workers_1: ([0-9.]+) with transcripts, ([0-9.]+) without")
AGREEMENT = re.compile(r"^agreement: ([0-9.]+) \(([0-9]+) turns\)")
# The figures compared, and whether more is better (for the reader: the table says which way is good).
COMPARED = {
    "action_p50_ms": False, "actions_per_s_c32": True, "reset_p50_ms": False, "create_p50_ms": False,
    "lease_p99_ms": False,
    "oracle_eps_c1": True, "oracle_eps_c16": True, "llm_bound_share_of_ideal": True,
    "llm_bound_share_of_ideal_without": True, "peak_rss_mb": False,
}
STEP_TIMEOUT = 1800.0  # seconds for one benchmark of one side


def worktree(rev: str, parent: Path, name: str) -> Path:
    path = parent / name
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=PROJECT_ROOT, check=True,
                   capture_output=True, timeout=120)
    return path


def run(side: Path, argv: list[str], label: str) -> str:
    """`python argv` from the side's tree; its stdout. A step that fails ends the run with one line."""
    env = {**os.environ, "PYTHONPATH": str(side), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    print(f"[{label}] python {' '.join(argv)}", flush=True)
    done = subprocess.run([sys.executable, *argv], cwd=side, env=env, capture_output=True, text=True,
                          timeout=STEP_TIMEOUT)
    if done.returncode != 0:
        raise SystemExit(f"error: [{label}] {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def figures(output: str) -> dict[str, float]:
    found = {m[1]: float(m[2]) for line in output.splitlines() if (m := FIGURE.match(line.strip()))}
    for line in output.splitlines():
        if shares := SHARES.match(line.strip()):
            found["llm_bound_share_of_ideal_without"] = float(shares[2])
    if "llm_bound_share_of_ideal" in found:  # a commit without transcripts: its one figure is "without"
        found.setdefault("llm_bound_share_of_ideal_without", found["llm_bound_share_of_ideal"])
    return found


def side_round(side: Path, label: str, data_dir: str) -> dict[str, float]:
    run(side, ["-c", "import orchestrator, sys; assert orchestrator.__file__.startswith(sys.argv[1]), "
               "orchestrator.__file__", str(side)], label)  # this side's code, not the virtualenv's checkout
    run(side, ["-m", "orchestrator", "images", "build", *IMAGES, "--data-dir", data_dir], label)
    got = figures(run(side, ["-m", "benchmarks.bench_pool"], label))
    sweep = figures(run(side, ["-m", "benchmarks.bench_sweep", "--data-dir", data_dir], label))
    return got | sweep


def replay(side: Path, label: str, data_dir: str, context: list[str]) -> tuple[float, int]:
    """The side's agreement over the shared Bash files, in images its own code built (the other
    side's may be the ones tagged now: a commit's replay need not build what it lacks)."""
    files = sorted(str(p) for p in (Path(data_dir) / TRAJECTORIES).glob("*.json"))
    run(side, ["-m", "orchestrator", "images", "build", *IMAGES[:4], "--data-dir", data_dir], label)
    out = run(side, ["-m", "orchestrator", "replay", *files, "--data-dir", data_dir, *context], label)
    found = [m for line in out.splitlines() if (m := AGREEMENT.match(line))]
    if not found:
        raise SystemExit(f"error: [{label}] replay printed no 'agreement:' line: {out[-2000:]}")
    return float(found[-1][1]), int(found[-1][2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default="HEAD")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each side (ABBA order)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--no-replay", action="store_true")
    parser.add_argument("--after-replay", default="", help="the after side's replay options, e.g. "
                        "'--context dataset' against a before side without replay contexts (both are shown)")
    args = parser.parse_intermixed_args()  # `BEFORE --data-dir D AFTER`, as the recipe passes them
    data_dir = str(resolve_data_dir(args.data_dir))
    with tempfile.TemporaryDirectory(prefix="bench-sides-", dir=PROJECT_ROOT.parent) as directory:
        sides = {"before": worktree(args.before, Path(directory), "before"),
                 "after": worktree(args.after, Path(directory), "after")}
        try:
            measured: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            for number in range(args.rounds):
                order = ("before", "after") if number % 2 == 0 else ("after", "before")
                for label in order:
                    measured[label].append(side_round(sides[label], label, data_dir))
            agreement = {} if args.no_replay else {
                label: replay(sides[label], label, data_dir, []) for label in ("before", "after")}
            if agreement and args.after_replay:
                agreement[f"after {args.after_replay}"] = replay(sides["after"], "after", data_dir, args.after_replay.split())
        finally:
            for path in sides.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=PROJECT_ROOT,
                               capture_output=True, timeout=120)
    print(f"\nbefore {args.before}, after {args.after}; {args.rounds} rounds each, alternated")
    print(f"{'figure':<36} {'before (each run)':<28} {'after (each run)':<28} ratio after/before")
    ratios = {}
    for name, higher_is_better in COMPARED.items():
        runs = {label: [r[name] for r in measured[label] if name in r] for label in measured}
        if not runs["before"] or not runs["after"]:
            continue
        before, after = statistics.median(runs["before"]), statistics.median(runs["after"])
        ratios[name] = after / before if before else float("nan")
        each = {label: ", ".join(f"{v:g}" for v in runs[label]) for label in runs}
        print(f"{name:<36} {each['before']:<28} {each['after']:<28} {ratios[name]:.3f} "
              f"({'higher' if higher_is_better else 'lower'} is better)")
    for label, (value, turns) in agreement.items():
        print(f"replay of {TRAJECTORIES} ({label}): agreement {value:.3f} of {turns} turns")
    for name, ratio in ratios.items():
        print(f"ratio_{name}: {ratio:.3f}")
    for label, (value, _) in agreement.items():
        print(f"replay_agreement_{re.sub('[^a-z0-9]+', '_', label).strip('_')}: {value:.3f}")


if __name__ == "__main__":
    main()
