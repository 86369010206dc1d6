"""`python -m orchestrator validate ENV`: the command line of gold validation (logic in validate.py)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from environments.kind import kind_names, kind_spec
from environments.runtime import Runtime
from foundation.errors import ConfigError
from foundation.settings import resolve_data_dir
from orchestrator.fidelity.validate import GoldOutcome, report, validate_all
from orchestrator.images.ensure import ensure_images
from orchestrator.tasksets.resolve import of_directory
from tasks import DATASETS, Task, load_tasks


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("validate", help="run every task's gold solution; share reaching reward 1")
    parser.add_argument("env", metavar="ENV", help=f"{', '.join(kind_names())}, or a directory: an environment of "
                        "your own or Harbor task folders")
    parser.add_argument("--tasks", help="comma-separated task sets (default: the paper's sets for ENV)")
    parser.add_argument("--data-dir", help="benchmark data (default: $INTERCODE_DATA_DIR or ../shared/intercode-data)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--reward", choices=("original", "strict"), default="original")
    parser.add_argument("--limit", type=int, help="only the first N tasks of each set")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every task's outcome")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    if Path(args.env).is_dir():
        return await _run_directory(args)
    if args.env not in kind_names():
        raise ConfigError(f"unknown environment {args.env!r}: one of {', '.join(kind_names())}, or a directory of tasks "
                          "of your own")
    sets = args.tasks.split(",") if args.tasks else list(kind_spec(args.env).datasets)
    for name in sets:
        if name not in DATASETS or DATASETS[name].kind != args.env:
            known = ", ".join(n for n, i in DATASETS.items() if i.kind == args.env)
            raise ConfigError(f"{name!r} is not a {args.env} task set; known: {known}")
    data_dir = None if all(DATASETS[n].starter for n in sets) else resolve_data_dir(args.data_dir)
    tasks = [task for name in sets for task in load_tasks(name, data_dir)[: args.limit]]
    await ensure_images(sorted({task.image for task in tasks if task.image}), data_dir)
    start = time.perf_counter()
    async with Runtime.open(data_dir=data_dir, reward_mode=args.reward) as runtime:
        outcomes = await validate_all(runtime, args.env, tasks, args.concurrency)
    _finish(args, outcomes, tasks, time.perf_counter() - start)
    return 0


async def _run_directory(args: argparse.Namespace) -> int:
    """An environment of your own, or Harbor task folders: their golds (solution/solve.sh) run."""
    task_set = of_directory(args.env)
    tasks = [task for task in task_set.tasks if task.unavailable is None][: args.limit]
    await ensure_images(task_set.images, None)
    start = time.perf_counter()
    async with Runtime.open(reward_mode=args.reward, images=task_set.pools()) as runtime:
        outcomes = await validate_all(runtime, task_set.kind, tasks, args.concurrency)
    _finish(args, outcomes, tasks, time.perf_counter() - start)
    return 0


def _finish(args: argparse.Namespace, outcomes: list[GoldOutcome], tasks: list[Task], seconds: float) -> None:
    report(outcomes, tasks, seconds)
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1, default=str))
