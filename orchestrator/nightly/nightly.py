"""One night, end to end: oracle gate → sweep → history → comparison with the last good night → report.

    result = await run_nightly(config, sweep_hash, options, data_dir=data_dir)
    sys.exit(result.exit_code)

The night's directory holds the gate's results (oracle-gate/), the sweep's results.db and
report, and nightly.md / nightly.html. The history database is the only state carried from
night to night: baselines are read from it, never from an earlier night's directory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.nightly.compare import (
    CompareSettings,
    Comparison,
    Exclusions,
    compare,
)
from orchestrator.nightly.flaky import (
    FlakySettings,
    TaskKey,
    find_flaky,
    night_outcomes,
)
from orchestrator.nightly.gate import GateResult, run_gate
from orchestrator.nightly.history import CellMetrics, History, Night
from orchestrator.nightly.outcomes import TaskOutcome, by_cell, from_episodes
from orchestrator.nightly.render import (
    NightlyReport,
    nightly_html,
    nightly_markdown,
    when,
)
from orchestrator.nightly.trend import Series
from orchestrator.report.cli import write_report
from orchestrator.store.results import load_results
from orchestrator.sweep.config import SweepConfig
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.levels import run_sweep

METRICS = ("success rate", "mean reward")


class NightlyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    history: Path = Field(description="the history database (SQLite), created on the first night")
    output: Path | None = Field(None, description="the night's directory; default: the file's output/<UTC time>")
    compare: CompareSettings = Field(default_factory=CompareSettings)
    flaky: FlakySettings = Field(default_factory=FlakySettings)
    exclude_flaky: bool = Field(False, description="leave flaky tasks out of the verdicts")


@dataclass(frozen=True)
class NightlyResult:
    night_id: int
    report: NightlyReport
    paths: list[Path]

    @property
    def exit_code(self) -> int:
        return 1 if self.report.status == "regression" else 0


def night_dir(config: SweepConfig, output: Path | None, started: float) -> Path:
    """The night's directory: `output` when given, else the sweep's output/<UTC time>."""
    return output or config.output / datetime.fromtimestamp(started, UTC).strftime("%Y%m%dT%H%M%SZ")


async def run_nightly(config: SweepConfig, sweep_hash: str, options: NightlyOptions, *, data_dir: Path | None,
                      progress: SweepProgress | None = None) -> NightlyResult:
    """Gate, sweep, record and report one night. A night that fails before it has results is
    recorded as `error` (so it never becomes a baseline) and its error propagates."""
    started = time.time()
    outdir = night_dir(config, options.output, started)
    await asyncio.to_thread(check_history, options.history)  # a bad --history fails now, not after the sweep
    try:
        gate = await run_gate(config, outdir, data_dir=data_dir)
        await run_sweep(config.model_copy(update={"output": outdir}), sweep_hash,
                        progress=progress or SweepProgress(quiet=True), data_dir=data_dir)
        results = await asyncio.to_thread(load_results, outdir)
    except Exception as exc:
        await asyncio.to_thread(record_error, options.history, config.name, started, outdir, exc)
        raise
    return await asyncio.to_thread(conclude, config.name, started, outdir, gate,
                                   from_episodes(results.episodes), options)


def check_history(path: Path) -> None:
    with History.open(path):
        pass


def record_error(history_path: Path, sweep: str, started: float, outdir: Path, exc: BaseException) -> None:
    with History.open(history_path) as history:
        history.add_night(sweep=sweep, started_at=started, outdir=str(outdir), status="error", baseline_id=None,
                          note=f"{type(exc).__name__}: {exc}".splitlines()[0][:500])


def conclude(sweep: str, started: float, outdir: Path, gate: GateResult, outcomes: list[TaskOutcome],
             options: NightlyOptions) -> NightlyResult:
    """Compare with the last good night, find flaky tasks, record the night and write the reports."""
    with History.open(options.history) as history:
        baseline = history.last_good(sweep)
        past = [n for n in history.nights(sweep) if n.status != "error"]
        flaky = _flaky(history, past, night_outcomes(outcomes, gate.broken), options.flaky)
        comparison = _compare(history, baseline, outcomes, gate, flaky if options.exclude_flaky else {}, options)
        status = "regression" if comparison is not None and comparison.regressions else "passed"
        metrics = cell_metrics(outcomes, gate.broken)
        night_id = history.add_night(sweep=sweep, started_at=started, outdir=str(outdir), status=status,
                                     baseline_id=baseline.id if baseline else None, cells=metrics, outcomes=outcomes,
                                     broken=gate.broken)
        labels, trends = _trends(history, [*past, *history.nights_by_id([night_id])])
    report = NightlyReport(sweep, started, str(outdir), status, _describe(baseline) if baseline else None, gate.checked,
                           gate.broken, comparison, flaky, options.exclude_flaky, labels, trends)
    return NightlyResult(night_id, report, write_reports(outdir, report))


def _flaky(history: History, past: list[Night], tonight: dict[TaskKey, bool],
           settings: FlakySettings) -> dict[TaskKey, int]:
    earlier = [night_outcomes(history.outcomes(n.id), history.broken(n.id)) for n in past[-(settings.window - 1):]]
    return find_flaky([*earlier, tonight], settings)


def _compare(history: History, baseline: Night | None, outcomes: list[TaskOutcome], gate: GateResult,
             flaky: dict[TaskKey, int], options: NightlyOptions) -> Comparison | None:
    """Tonight against the baseline; a task broken on either night is left out (its gold failed)."""
    if baseline is None:
        return None
    broken = frozenset(gate.broken) | frozenset(history.broken(baseline.id))
    return compare(history.outcomes(baseline.id), outcomes, options.compare, Exclusions(broken, frozenset(flaky)))


def cell_metrics(outcomes: Iterable[TaskOutcome], broken: dict[tuple[str, str], str]) -> list[CellMetrics]:
    """Per cell: success rate and mean reward over the episodes that measure the model (quarantined
    tasks and infrastructure failures left out), so a broken image does not dent the trend."""
    metrics = []
    for cell, pairs in sorted(by_cell(outcomes).items()):
        kept = [o for o in pairs.values() if not o.infra and (o.task_set, o.task_id) not in broken]
        n = len(kept)
        metrics.append(CellMetrics(cell, n, sum(o.success for o in kept) / n if n else None,
                                   sum(o.reward for o in kept) / n if n else None))
    return metrics


def _trends(history: History, nights: list[Night]) -> tuple[list[str], dict[str, list[Series]]]:
    """X labels (one per night) and, per metric, one series per cell with None where it did not run."""
    per_night = [{m.cell: m for m in history.cells(n.id)} for n in nights]
    cells = sorted({cell for night in per_night for cell in night})
    labels = [datetime.fromtimestamp(n.started_at, UTC).strftime("%m-%d %H:%M") for n in nights]
    trends: dict[str, list[Series]] = {}
    for metric, attribute in zip(METRICS, ("success_rate", "mean_reward"), strict=True):
        trends[metric] = [(" / ".join(cell), [getattr(night[cell], attribute) if cell in night else None
                                              for night in per_night]) for cell in cells]
    return labels, trends


def _describe(night: Night) -> str:
    return f"night {night.id} ({when(night.started_at)}, {night.outdir})"


def write_reports(outdir: Path, report: NightlyReport) -> list[Path]:
    """The sweep's own report, then nightly.md and nightly.html, all in the night's directory."""
    write_report(outdir)
    md, html = outdir / "nightly.md", outdir / "nightly.html"
    md.write_text(nightly_markdown(report), encoding="utf-8")
    html.write_text(nightly_html(report), encoding="utf-8")
    return [md, html]
