"""Paired comparison of two runs, cell by cell: McNemar on success, a bootstrap on mean reward.

Episodes pair on (task_id, epoch) within a model × strategy × task set cell, so each task is its
own control and a 10-point drop on 200 tasks stands out from a few tasks flipping both ways.
A pair with an infrastructure failure is left out, and so is one whose episode the budget cut
short (`outcomes.from_episodes` gives that episode no outcome): neither says anything about the model.
A cell gets one verdict from two tests; each runs at alpha/2 (Bonferroni), so the chance of a
false alarm per cell stays at most alpha. Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.nightly.outcomes import Cell, TaskOutcome, by_cell
from orchestrator.report.stats import BootstrapResult, mcnemar_exact, paired_bootstrap

Verdict = Literal["regression", "improvement", "no change"]
Pair = tuple[TaskOutcome, TaskOutcome]


class CompareSettings(BaseModel):
    """How sure, and how large, a change must be before a cell's verdict says so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(0.05, gt=0, lt=1, description="significance level per cell (split over the two tests)")
    min_effect: float = Field(0.0, ge=0, le=100, description="smallest change, in points, that counts")
    resamples: int = Field(10_000, ge=100, description="bootstrap resamples")
    seed: int = Field(0, description="bootstrap seed: the same inputs give the same report")


@dataclass(frozen=True)
class Exclusions:
    """Tasks left out of the verdicts: `broken` ones (their gold failed the oracle gate, any cell of
    the task set) and `flaky` ones (per cell, they flip across nights)."""

    broken: frozenset[tuple[str, str]] = frozenset()  # (task_set, task_id)
    flaky: frozenset[tuple[Cell, str]] = frozenset()  # (cell, task_id)

    def reason(self, cell: Cell, task_id: str) -> str | None:
        if (cell[2], task_id) in self.broken:
            return "broken"
        if (cell, task_id) in self.flaky:
            return "flaky"
        return None


@dataclass(frozen=True)
class CellComparison:
    """One cell: effect sizes (current minus baseline), p-values, flips and the verdict."""

    cell: Cell
    pairs: int
    base_success: float | None
    cur_success: float | None
    mcnemar_p: float
    reward: BootstrapResult | None  # mean reward difference; None without pairs
    pass_to_fail: tuple[tuple[str, int], ...]  # (task_id, epoch)
    fail_to_pass: tuple[tuple[str, int], ...]
    excluded: dict[str, tuple[str, ...]] = field(default_factory=dict)  # reason -> task ids
    unpaired: int = 0  # on one side only (or cut by the budget), or an infrastructure failure on either side
    verdict: Verdict = "no change"

    @property
    def success_points(self) -> float | None:
        if self.base_success is None or self.cur_success is None:
            return None
        return 100 * (self.cur_success - self.base_success)


@dataclass(frozen=True)
class Comparison:
    cells: list[CellComparison]
    only_baseline: list[Cell]
    only_current: list[Cell]
    settings: CompareSettings

    @property
    def regressions(self) -> list[CellComparison]:
        return [c for c in self.cells if c.verdict == "regression"]


def compare(baseline: Iterable[TaskOutcome], current: Iterable[TaskOutcome], settings: CompareSettings | None = None,
            exclusions: Exclusions | None = None) -> Comparison:
    """Compare every cell present in both runs; cells in one run only are listed, not compared."""
    settings, exclusions = settings or CompareSettings(), exclusions or Exclusions()
    base, cur = by_cell(baseline), by_cell(current)
    common = sorted(base.keys() & cur.keys())
    cells = [compare_cell(cell, base[cell], cur[cell], settings, exclusions) for cell in common]
    return Comparison(cells, sorted(base.keys() - cur.keys()), sorted(cur.keys() - base.keys()), settings)


def compare_cell(cell: Cell, base: dict[tuple[str, int], TaskOutcome], cur: dict[tuple[str, int], TaskOutcome],
                 settings: CompareSettings, exclusions: Exclusions) -> CellComparison:
    pairs, excluded, unpaired = _pairs(cell, base, cur, exclusions)
    p2f = tuple(sorted((b.task_id, b.epoch) for b, c in pairs if b.success and not c.success))
    f2p = tuple(sorted((b.task_id, b.epoch) for b, c in pairs if c.success and not b.success))
    reward = None
    if pairs:
        reward = paired_bootstrap([c.reward for _, c in pairs], [b.reward for b, _ in pairs],
                                  resamples=settings.resamples, seed=settings.seed)
    result = CellComparison(
        cell, len(pairs), _rate(b for b, _ in pairs), _rate(c for _, c in pairs), mcnemar_exact(len(f2p), len(p2f)),
        reward, p2f, f2p, excluded, unpaired)
    return replace(result, verdict=verdict(result, settings))


def _pairs(cell: Cell, base: dict[tuple[str, int], TaskOutcome], cur: dict[tuple[str, int], TaskOutcome],
           exclusions: Exclusions) -> tuple[list[Pair], dict[str, tuple[str, ...]], int]:
    """The usable pairs, the excluded task ids by reason, and how many keys could not be paired."""
    pairs: list[Pair] = []
    excluded: dict[str, set[str]] = {}
    for key in sorted(base.keys() & cur.keys()):
        reason = exclusions.reason(cell, key[0])
        if reason is not None:
            excluded.setdefault(reason, set()).add(key[0])
        elif not (base[key].infra or cur[key].infra):
            pairs.append((base[key], cur[key]))
    unpaired = len(base.keys() ^ cur.keys()) + sum(
        1 for key in base.keys() & cur.keys()
        if exclusions.reason(cell, key[0]) is None and (base[key].infra or cur[key].infra))
    return pairs, {reason: tuple(sorted(ids)) for reason, ids in sorted(excluded.items())}, unpaired


def _rate(outcomes: Iterable[TaskOutcome]) -> float | None:
    values = [o.success for o in outcomes]
    return sum(values) / len(values) if values else None


def verdict(result: CellComparison, settings: CompareSettings) -> Verdict:
    """Regression when either test finds a significant drop of at least `min_effect` points;
    improvement when one finds a rise and neither a drop; otherwise no change."""
    if result.pairs == 0 or result.reward is None:
        return "no change"
    level = settings.alpha / 2
    signs = []
    points = result.success_points or 0.0
    if result.mcnemar_p < level and points != 0 and abs(points) >= settings.min_effect:
        signs.append(points)
    reward_points = 100 * result.reward.difference
    if result.reward.p_value < level and reward_points != 0 and abs(reward_points) >= settings.min_effect:
        signs.append(reward_points)
    if any(s < 0 for s in signs):
        return "regression"
    return "improvement" if signs else "no change"
