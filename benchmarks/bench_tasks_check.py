"""`./dev bench-tasks-check [--before COMMIT]`: `tasks check` over four small Harbor tasks from cold.

Four small tasks are written afresh each round (each Dockerfile `FROM debian:bookworm-slim` with a
file of its own, no python3: as most task images begin), so no image of theirs exists and no layer
of theirs is in the engine's cache. `tasks check` then builds their images and runs the oracle and
the no-op agent on each: the cold time; run again at once, the warm time (nothing to build). With
`--before COMMIT`, the same from that commit's tree (a worktree, the project's virtualenv with the
worktree first on the path), the sides alternating ABBA, and the ratio before/after. The images a
round built are removed after it. The shared layers (the base image, the driver's runtime) are
built before the first round: they are built once per machine, as the base image is; with
`--runtime-cold` this tree's rounds also build the runtime first, without the layer cache
(`images build driver-runtime --force`), and count it in the cold time.

Prints each round's seconds, the medians, and `tasks_check_cold_s: X` (and `..._before_s`,
`tasks_check_cold_ratio`) lines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from foundation.settings import PROJECT_ROOT

TASKS = 4
TIMEOUT = 3600.0  # seconds one `tasks check` may take (the old layer installed python3 with apt per task)
TOML = ('version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 120.0\n'
        '[environment]\nmemory_mb = 1024\nstorage_mb = 2048\nallow_internet = false\n')


def write_tasks(root: Path) -> None:
    """Four small tasks, each with an image of its own (a file that names it and the round)."""
    stamp = uuid.uuid4().hex
    for n in range(TASKS):
        task = root / f"small-{n}"
        for part in ("environment", "solution", "tests"):
            (task / part).mkdir(parents=True)
        (task / "task.toml").write_text(TOML)
        (task / "instruction.md").write_text(f"Write `answer {n}` to /app/answer.txt.\n")
        (task / "environment" / "Dockerfile").write_text(
            f"FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo 'task {n} of round {stamp}' > /app/about.txt\n")
        (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\necho 'answer {n}' > /app/answer.txt\n")
        (task / "tests" / "test.sh").write_text(
            "#!/bin/bash\nmkdir -p /logs/verifier\n"
            f"if [ \"$(cat /app/answer.txt 2>/dev/null)\" = 'answer {n}' ]; then echo 1; else echo 0; fi "
            "> /logs/verifier/reward.txt\n")


def check(tree: Path, tasks: Path, label: str) -> float:
    """Seconds one `tasks check` of `tasks` took from `tree`'s code; every task must be ok."""
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "orchestrator", "tasks", "check", str(tasks)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    seconds = time.monotonic() - start
    ok = sum(1 for line in done.stdout.splitlines() if line.startswith("ok "))
    if done.returncode != 0 or ok != TASKS:
        raise SystemExit(f"error: [{label}] tasks check exited {done.returncode} with {ok} of {TASKS} ok: "
                         f"{(done.stdout + done.stderr)[-2000:]}")
    return seconds


def remove_images(tasks: Path) -> None:
    """The images a round built for its tasks (named after their folders), so the next is cold too."""
    names = subprocess.run(["docker", "images", "--format", "{{.Repository}}", "intercode/harbor-small-*"],
                           capture_output=True, text=True, timeout=120).stdout.split()
    if names:
        subprocess.run(["docker", "rmi", "-f", *sorted(set(names))], capture_output=True, timeout=600)


def build_runtime(tree: Path) -> float:
    """Seconds the driver's runtime takes to build without the layer cache."""
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "orchestrator", "images", "build", "driver-runtime", "--force"], cwd=tree,
                   check=True, capture_output=True, timeout=TIMEOUT)
    return time.monotonic() - start


def one_round(tree: Path, label: str, runtime_cold: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-tasks-check-") as directory:
        tasks = Path(directory) / "tasks"
        write_tasks(tasks)
        runtime = build_runtime(tree) if runtime_cold else 0.0
        try:
            cold = runtime + check(tree, tasks, label)
            warm = check(tree, tasks, label)
        finally:
            remove_images(tasks)
    with_runtime = f" (the runtime's build {runtime:.1f} s of it)" if runtime_cold else ""
    print(f"[{label}] cold {cold:.1f} s{with_runtime}, warm {warm:.1f} s", flush=True)
    return cold, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per side")
    parser.add_argument("--before", metavar="COMMIT", help="also run that commit's tasks check, alternated")
    parser.add_argument("--runtime-cold", action="store_true", help="build the driver's runtime afresh (no layer "
                        "cache) before each of this tree's rounds, and count it")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "orchestrator", "images", "build", "driver-runtime"], cwd=PROJECT_ROOT,
                   check=True, capture_output=True, timeout=TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="bench-tasks-check-trees-") as trees:
        sides = {"after": PROJECT_ROOT}
        if args.before:
            before = Path(trees) / "before"
            subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=PROJECT_ROOT,
                           check=True, capture_output=True, timeout=120)
            sides["before"] = before
        try:
            order = [name for r in range(args.rounds) for name in (["after", "before"] if r % 2 else ["before", "after"])
                     if name in sides]
            got: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
            for name in order:
                got[name].append(one_round(sides[name], name, args.runtime_cold and name == "after"))
        finally:
            if args.before:
                subprocess.run(["git", "worktree", "remove", "--force", str(sides["before"])], cwd=PROJECT_ROOT,
                               capture_output=True, timeout=120)
    medians = {name: (statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs))
               for name, runs in got.items()}
    for name, (cold, warm) in medians.items():
        print(f"{name}: {TASKS} tasks, median cold {cold:.1f} s, warm {warm:.1f} s over {len(got[name])} rounds")
    print(f"tasks_check_cold_s: {medians['after'][0]:.1f}")
    print(f"tasks_check_warm_s: {medians['after'][1]:.1f}")
    if "before" in medians:
        print(f"tasks_check_cold_before_s: {medians['before'][0]:.1f}")
        print(f"tasks_check_cold_ratio: {medians['before'][0] / medians['after'][0]:.2f}")


if __name__ == "__main__":
    main()
