"""Gold validation: run every task's gold solution and report who gets 1.0 (the command is
orchestrator/fidelity/validate_cli.py).

Bash and SQL: the gold command, then `submit`. Python: the gold code, then `submit <its function>`.
CTF: `submit <the flag>` in the task's directory (which checks that the task can start offline).
Tasks that can't run offline are listed as unavailable, with the reason, not as failures.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from environments import make_environment
from environments.base import TaskUnavailable
from environments.kind import gold_actions
from environments.runtime import Runtime
from tasks import Task


@dataclass
class GoldOutcome:
    task: str
    reward: float | None
    status: str  # "pass", "fail", "unavailable", "error"
    detail: dict[str, Any] = field(default_factory=dict)


async def validate_all(runtime: Runtime, kind: str, tasks: list[Task], concurrency: int) -> list[GoldOutcome]:
    queue: asyncio.Queue[Task] = asyncio.Queue()
    for task in tasks:
        queue.put_nowait(task)
    outcomes: dict[str, GoldOutcome] = {}

    async def worker() -> None:
        async with make_environment(kind, runtime) as env:
            while not queue.empty():
                task = queue.get_nowait()
                outcomes[task.id] = await validate_one(env, task)

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(tasks))):
            group.create_task(worker())
    return [outcomes[task.id] for task in tasks]


async def validate_one(env: Any, task: Task) -> GoldOutcome:
    try:
        await env.reset(task)
    except TaskUnavailable as exc:
        return GoldOutcome(task.id, None, "unavailable", {"reason": str(exc).split(": ", 1)[-1]})
    step = None
    for action in gold_actions(task):
        step = await env.step(action)
    assert step is not None
    detail = {k: v for k, v in step.info.items() if k not in ("action_executed",)}
    return GoldOutcome(task.id, step.reward, "pass" if step.reward == 1 else "fail", detail)


def report(outcomes: list[GoldOutcome], tasks: list[Task], seconds: float) -> None:
    by_set: dict[str, list[GoldOutcome]] = defaultdict(list)
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


def _why(outcome: GoldOutcome) -> str:
    d = outcome.detail
    if outcome.status == "unavailable":
        return str(d.get("reason", ""))
    parts = [f"{k}={d[k]}" for k in ("file_diff", "file_changes", "answer_similarity", "diff_miss", "diff_extra")
             if k in d]
    return "; ".join(parts) or json.dumps(d, default=str)[:200]
