"""Flaky tasks: per cell, tasks whose outcome keeps flipping from night to night.

A task that passes, fails, passes again with nothing changed is noise, not signal; listing it
explains a verdict, and `--exclude-flaky` keeps it out of the verdicts. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.nightly.outcomes import Cell, TaskOutcome

TaskKey = tuple[Cell, str]  # (cell, task_id)


class FlakySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    window: int = Field(7, ge=2, description="how many of the latest nights (tonight included) to look at")
    min_flips: int = Field(2, ge=1, description="flips within the window that make a task flaky")


def night_outcomes(outcomes: Iterable[TaskOutcome], broken: Iterable[tuple[str, str]] = ()) -> dict[TaskKey, bool]:
    """One pass/fail per (cell, task) for a night: passed when at least half its epochs succeeded.
    Infrastructure failures and tasks quarantined that night say nothing about the model: skipped.
    (Episodes cut short by the budget have no outcome at all: see `outcomes.from_episodes`.)"""
    skip = set(broken)
    counts: dict[TaskKey, list[int]] = {}
    for o in outcomes:
        if o.infra or (o.task_set, o.task_id) in skip:
            continue
        tally = counts.setdefault((o.cell, o.task_id), [0, 0])
        tally[0] += o.success
        tally[1] += 1
    return {key: 2 * ok >= n for key, (ok, n) in counts.items()}


def find_flaky(nights: Sequence[dict[TaskKey, bool]], settings: FlakySettings | None = None) -> dict[TaskKey, int]:
    """Tasks with at least `min_flips` flips over the last `window` nights (oldest first), with
    their flip count. A night that did not run a task is skipped, not counted as a flip."""
    settings = settings or FlakySettings()
    recent = nights[-settings.window:]
    flaky = {}
    for key in sorted({k for night in recent for k in night}):
        sequence = [night[key] for night in recent if key in night]
        flips = sum(a != b for a, b in pairwise(sequence))
        if flips >= settings.min_flips:
            flaky[key] = flips
    return flaky
