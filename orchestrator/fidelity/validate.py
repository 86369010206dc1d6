"""`python -m orchestrator validate ENV`: run every task's gold solution and report who gets 1.0.

Bash and SQL: the gold command, then `submit`. Python: the gold code, then `submit <its function>`.
CTF: `submit <the flag>` in the task's directory (which checks that the task can start offline).
Tasks that can't run offline are listed as unavailable, with the reason, not as failures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from environments import make_environment
from environments.base import TaskUnavailable
from environments.kind import gold_actions, kind_names, kind_spec
from environments.runtime import Runtime
from foundation.errors import ConfigError
from foundation.settings import resolve_data_dir
from tasks import DATASETS, Task, load_tasks


@dataclass
class Outcome:
    task: str
    reward: float | None
    status: str  # "pass", "fail", "unavailable", "error"
    detail: dict[str, Any] = field(default_factory=dict)


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
    start = time.perf_counter()
    async with Runtime.open(data_dir=data_dir, reward_mode=args.reward) as runtime:
        outcomes = await validate_all(runtime, args.env, tasks, args.concurrency)
    report(outcomes, tasks, time.perf_counter() - start)
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1, default=str))
    return 0


async def validate_all(runtime: Runtime, kind: str, tasks: list[Task], concurrency: int) -> list[Outcome]:
    queue: asyncio.Queue[Task] = asyncio.Queue()
    for task in tasks:
        queue.put_nowait(task)
    outcomes: dict[str, Outcome] = {}

    async def worker() -> None:
        async with make_environment(kind, runtime) as env:
            while not queue.empty():
                task = queue.get_nowait()
                outcomes[task.id] = await validate_one(env, task)

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(tasks))):
            group.create_task(worker())
    return [outcomes[task.id] for task in tasks]


async def validate_one(env: Any, task: Task) -> Outcome:
    try:
        await env.reset(task)
    except TaskUnavailable as exc:
        return Outcome(task.id, None, "unavailable", {"reason": str(exc).split(": ", 1)[-1]})
    step = None
    for action in gold_actions(task):
        step = await env.step(action)
    assert step is not None
    detail = {k: v for k, v in step.info.items() if k not in ("action_executed",)}
    return Outcome(task.id, step.reward, "pass" if step.reward == 1 else "fail", detail)


def report(outcomes: list[Outcome], tasks: list[Task], seconds: float) -> None:
    by_set: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_set[outcome.task.split("/")[0]].append(outcome)
    for name, rows in by_set.items():
        runnable = [o for o in rows if o.status != "unavailable"]
        passed = sum(o.status == "pass" for o in runnable)
        share = passed / len(runnable) if runnable else 0.0
        print(f"{name}: {passed}/{len(runnable)} gold solutions score 1.0 ({share:.3f}); "
              f"{len(rows) - len(runnable)} unavailable offline")
        for o in rows:
            if o.status != "pass":
                print(f"  {o.task}: {o.status} reward={o.reward} {_why(o)}")
    print(f"{len(tasks)} tasks in {seconds:.1f} s")


def _why(outcome: Outcome) -> str:
    d = outcome.detail
    if outcome.status == "unavailable":
        return d.get("reason", "")
    parts = [f"{k}={d[k]}" for k in ("file_diff", "file_changes", "answer_similarity", "diff_miss", "diff_extra")
             if k in d]
    return "; ".join(parts) or json.dumps(d, default=str)[:200]
