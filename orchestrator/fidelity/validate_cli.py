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
from orchestrator.fidelity.validate import report, validate_all
from orchestrator.images.ensure import ensure_images
from tasks import DATASETS, load_tasks


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("validate", help="run every task's gold solution; share reaching reward 1")
    parser.add_argument("env", choices=kind_names(), metavar="ENV", help=", ".join(kind_names()))
    parser.add_argument("--tasks", help="comma-separated task sets (default: the paper's sets for ENV)")
    parser.add_argument("--data-dir", help="benchmark data (default: $INTERCODE_DATA_DIR or ../shared/intercode-data)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--reward", choices=("original", "strict"), default="original")
    parser.add_argument("--limit", type=int, help="only the first N tasks of each set")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every task's outcome")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    sets = args.tasks.split(",") if args.tasks else list(kind_spec(args.env).datasets)
    for name in sets:
        if name not in DATASETS or DATASETS[name].env != args.env:
            known = ", ".join(n for n, i in DATASETS.items() if i.env == args.env)
            raise ConfigError(f"{name!r} is not a {args.env} task set; known: {known}")
    data_dir = None if all(DATASETS[n].starter for n in sets) else resolve_data_dir(args.data_dir)
    tasks = [task for name in sets for task in load_tasks(name, data_dir)[: args.limit]]
    await ensure_images(sorted({task.image for task in tasks if task.image}), data_dir)
    start = time.perf_counter()
    async with Runtime.open(data_dir=data_dir, reward_mode=args.reward) as runtime:
        outcomes = await validate_all(runtime, args.env, tasks, args.concurrency)
    report(outcomes, tasks, time.perf_counter() - start)
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1, default=str))
    return 0
