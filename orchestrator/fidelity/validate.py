"""Gold validation: run every task's gold solution and report who gets 1.0 (the command is
orchestrator/fidelity/validate_cli.py).

Each task's gold is played by the `gold` agent (agents/strategies/fixed_actions.py) in an episode of its own,
as a sweep plays one (agents/episode.py): Bash and SQL, the gold command, then `submit`; Python,
the gold code, then `submit <its function>`; CTF, `submit <the flag>` in the task's directory
(which checks that the task can start offline). Tasks that can't run offline are listed as
unavailable, with the reason, not as failures.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from agents.base import get_strategy
from agents.episode import run_episode
from agents.models import OracleModel
from environments import make_environment
from environments.base import TaskUnavailable
from environments.runtime import Runtime
from foundation.concurrency import all_of
from tasks import Task


@dataclass
class GoldOutcome:
    task: str
    reward: float | None
    status: str  # "pass", "fail", "unavailable", "error"
    detail: dict[str, Any] = field(default_factory=dict)  # the reward's parts (the last turn's), or the reason


async def validate_all(runtime: Runtime, kind: str, tasks: list[Task], concurrency: int) -> list[GoldOutcome]:
    """Each task's gold played (`concurrency` at once), in the tasks' order."""
    gate = asyncio.Semaphore(max(concurrency, 1))

    async def one(task: Task) -> GoldOutcome:
        async with gate:
            return await validate_one(runtime, kind, task)

    return await all_of(one(task) for task in tasks)


async def validate_one(runtime: Runtime, kind: str, task: Task) -> GoldOutcome:
    """The `gold` agent's episode of `task` (agents/episode.py, as a sweep plays one)."""
    try:
        played = await run_episode(make_environment(kind, runtime), get_strategy("gold"), task, OracleModel(),
                                   max_turns=1)
    except TaskUnavailable as exc:
        return GoldOutcome(task.id, None, "unavailable", {"reason": str(exc).split(": ", 1)[-1]})
    if played.failure is not None:
        return GoldOutcome(task.id, None, "error", {"reason": str(played.failure)})
    if not played.outcome.turns:
        return GoldOutcome(task.id, None, "error", {"reason": "the episode ended before the gold's first action"})
    last = played.outcome.turns[-1]
    return GoldOutcome(task.id, last.reward, "pass" if last.reward == 1 else "fail", last.breakdown or {})


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
    if "reason" in d:
        return str(d["reason"])
    return json.dumps(d, default=str)[:300]
