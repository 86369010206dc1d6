"""Running suites: every side takes each reset and each turn at the same time (lockstep).

In lockstep the sides see the same clock: a gold that lists files younger than a minute, or prints
the date, runs within the same second on every side. When a reset fails on any side (an earlier
action broke a container), every side gets new containers and the episode is tried once more, so
the sides stay in the same lifecycle. `again` is a second run of the original, in its own
containers, for its self-agreement.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

from checks.differential.cases import Case, Suite
from checks.differential.turn_compare import TurnRecord
from checks.differential.original_images import IMAGES
from checks.differential.original import OriginalHarness
from checks.differential.ours import OurHarness
from environments.runtime import Runtime

T = TypeVar("T")


async def together(*calls: Awaitable[T]) -> list[T]:
    """Start every call at once and wait for all of them (lockstep)."""
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(call) for call in calls]  # type: ignore[arg-type]
    return [task.result() for task in tasks]


def original_image(suite: Suite) -> str:
    return IMAGES[suite.dataset if suite.kind == "bash" else suite.kind].tag


class SuiteRun:
    def __init__(self, suite: Suite, runtime: Runtime, data_dir: Path, originals: list[OriginalHarness],
                 alias: Callable[[str], str], mysql8: bool = False) -> None:
        self.suite, self.runtime, self.data_dir = suite, runtime, data_dir
        self.originals, self.alias = originals, alias
        self.ours = OurHarness(runtime, suite.kind, mysql8)
        self.records: list[TurnRecord] = []

    async def run(self, progress: Callable[[str], None]) -> list[TurnRecord]:
        try:
            await self._open_originals()
            for n, case in enumerate(self.suite.cases, 1):
                await self._episode(case)
                if n % 25 == 0:
                    progress(f"{self.suite.name}: {n}/{len(self.suite.cases)} episodes")
        finally:
            await self.ours.close()
        return self.records

    async def _open_originals(self) -> None:
        for n, original in enumerate(self.originals):
            answer = await original.request({"op": "open", "kind": self.suite.kind, "image": original_image(self.suite),
                                             "alias": self.alias(f"{self.suite.name}-{n}"),
                                             "data_path": str(self.suite.data_path(self.data_dir))})
            if "error" in answer:
                raise RuntimeError(f"the original's {self.suite.kind} environment did not open: {answer['error']}")

    async def _renew(self) -> None:
        await self.ours.renew()
        for original in self.originals:
            await original.request({"op": "close"})
        await self._open_originals()

    async def _reset(self, case: Case) -> list[dict[str, Any]]:
        return await together(self.ours.reset(case.task),
                              *(o.request({"op": "reset", "index": case.task.index}) for o in self.originals))

    async def _episode(self, case: Case) -> None:
        answers = await self._reset(case)
        if any("error" in a for a in answers):
            await self._renew()
            answers = await self._reset(case)
        if any("error" in a for a in answers):
            why = "; ".join(f"{side}: {a['error']}" for side, a in zip(("ours", "original", "again"), answers)
                            if "error" in a)
            for turn, action in enumerate(case.actions):
                self._record(case, turn, action, [{"error": f"reset failed ({why})"}] * len(answers))
            return
        for turn, action in enumerate(case.actions):
            turn_answers = await together(self.ours.turn(action),
                                          *(o.request({"op": "turn", "action": action}) for o in self.originals))
            self._record(case, turn, action, turn_answers)
            if getattr(self.ours.env, "done", False):
                break  # our episode ended (a right flag); the recording stopped there too

    def _record(self, case: Case, turn: int, action: str, answers: list[dict[str, Any]]) -> None:
        self.records.append(TurnRecord(self.suite.name, self.suite.source, self.suite.kind, case.key, turn, action,
                                       case.task.gold_text, answers[0], answers[1],
                                       answers[2] if len(answers) > 2 else None))


# Suites of a kind at once. Bash is bound by the CPU (every turn runs commands and git in four
# containers); the original's Python by its rpyc server's latency, so its shards all run at once.
CONCURRENCY = {"bash": 4, "sql": 3, "python": 32, "ctf": 3}


async def run_suites(suites: list[Suite], runtime: Runtime, data_dir: Path, python: Path, run_label: str,
                     log_dir: Path, *, again: bool, concurrency: dict[str, int],
                     progress: Callable[[str], None], mysql8: bool = False) -> tuple[list[TurnRecord], list[str]]:
    """Every suite, `concurrency[kind]` of a kind at a time: their records in the suites' order, and
    one line per suite that could not finish (its turns so far are kept; the others go on)."""
    slots = {kind: asyncio.Semaphore(n) for kind, n in concurrency.items()}
    results: dict[str, list[TurnRecord]] = {}
    failures: list[str] = []

    async def one(suite: Suite) -> None:
        async with slots[suite.kind]:
            run: SuiteRun | None = None
            try:
                async with AsyncExitStack() as stack:
                    originals = [await stack.enter_async_context(
                        OriginalHarness(python, run_label, log_dir / f"{suite.name}-{n}.log"))
                        for n in range(2 if again else 1)]
                    progress(f"{suite.name}: {len(suite.cases)} episodes, {suite.turns} turns")
                    run = SuiteRun(suite, runtime, data_dir, originals, lambda name: alias(run_label, name), mysql8)
                    await run.run(progress)
            except* (OSError, RuntimeError, ValueError) as group:  # one suite's harness broke: the others go on
                exc = group.exceptions[0]
                failures.append(f"{suite.name}: {type(exc).__name__}: {exc}"[:300])
                progress(f"{suite.name} stopped: {failures[-1]}")
            results[suite.name] = run.records if run is not None else []

    async with asyncio.TaskGroup() as group:
        for suite in suites:
            group.create_task(one(suite))
    return [record for suite in suites for record in results.get(suite.name, [])], failures


def alias(run_label: str, name: str) -> str:
    """An image alias (and so the original's container names) unique to the run and suite."""
    return re.sub(r"[^a-z0-9_.-]", "-", f"{run_label}-{name}".lower())
