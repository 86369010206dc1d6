"""`python -m orchestrator compare BASELINE CURRENT` and `python -m orchestrator nightly SWEEP.toml`.

Both exit 1 on a significant regression and 0 otherwise, so CI can gate on them; a bad input
(no such directory, no results.db, nothing in common) is one line and exit 2 (a UserError).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from foundation.errors import ConfigError
from foundation.validation import invalid_line
from foundation.logs import logging_to_file
from orchestrator.output_files import make_directory, write_files
from orchestrator.nightly.compare import CompareSettings, Comparison, compare
from orchestrator.nightly.flaky import FlakySettings
from orchestrator.nightly.nightly import NightlyOptions, night_dir, run_nightly
from orchestrator.nightly.outcomes import from_episodes
from orchestrator.nightly.render import compare_html, compare_markdown
from orchestrator.store.results import load_results
from orchestrator.sweep.cli import data_dir_for
from orchestrator.sweep.config import load_sweep

M = TypeVar("M", bound=BaseModel)

HISTORY_NAME = "nightly-history.db"
COMPARE_FIX = "give --out DIR, a directory you can write"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Registers both commands (one COMMAND_MODULES entry)."""
    parser = subparsers.add_parser(
        "compare", help="paired comparison of two sweep output directories; exit 1 on a significant regression",
        description="For every model × strategy × task set in both runs, pair episodes on (task, epoch) and test "
                    "the change: McNemar's exact test on success, a paired bootstrap on mean reward.")
    parser.add_argument("baseline", type=Path, metavar="BASELINE", help="the earlier sweep's output directory")
    parser.add_argument("current", type=Path, metavar="CURRENT", help="the later sweep's output directory")
    parser.add_argument("--out", type=Path, metavar="DIR", help="where compare-<baseline>.md/.html go (default: CURRENT)")
    _add_settings(parser)
    parser.set_defaults(handler=run_compare)

    parser = subparsers.add_parser(
        "nightly", help="oracle gate, sweep, compare with the last good night; exit 1 on a significant regression",
        description="Run the gold solutions (tasks whose gold fails are quarantined), then the sweep into a new "
                    "directory, record the night in the history database and compare it with the last good night.")
    parser.add_argument("file", type=Path, metavar="SWEEP.toml")
    parser.add_argument("--history", type=Path, metavar="DB", help=f"history database (default: OUTPUT/{HISTORY_NAME})")
    parser.add_argument("--output", type=Path, metavar="DIR", help="this night's directory (default: OUTPUT/<UTC time>)")
    parser.add_argument("--data-dir", metavar="DIR", help="the InterCode data (as for `sweep`)")
    parser.add_argument("--flaky-window", type=int, default=7, metavar="N", help="nights looked at for flips (default 7)")
    parser.add_argument("--flaky-flips", type=int, default=2, metavar="K", help="flips that make a task flaky (default 2)")
    parser.add_argument("--exclude-flaky", action="store_true", help="leave flaky tasks out of the verdicts")
    _add_settings(parser)
    parser.set_defaults(handler=run_nightly_command)


def _add_settings(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level per cell (default 0.05)")
    parser.add_argument("--min-effect", type=float, default=0.0, metavar="POINTS",
                        help="smallest change in points that counts as a regression or improvement (default 0)")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")


def _validated(cls: type[M], **values: Any) -> M:
    try:
        return cls(**values)
    except ValidationError as exc:
        raise ConfigError(invalid_line(exc, cls, key=lambda where: f"--{where.replace('_', '-')}")) from None


def compare_settings(args: argparse.Namespace) -> CompareSettings:
    return _validated(CompareSettings, alpha=args.alpha, min_effect=args.min_effect, resamples=args.resamples)


async def run_compare(args: argparse.Namespace) -> int:
    settings = compare_settings(args)
    comparison, paths = await asyncio.to_thread(write_comparison, args.baseline, args.current, args.out, settings)
    print(short_table(comparison))
    print("wrote " + " and ".join(str(p) for p in paths))
    return 1 if comparison.regressions else 0


def write_comparison(baseline: Path, current: Path, out: Path | None,
                     settings: CompareSettings) -> tuple[Comparison, list[Path]]:
    """Load both runs, compare them and write compare-<baseline name>.md/.html into OUT (or CURRENT)."""
    before, after = load_results(baseline), load_results(current)
    comparison = compare(from_episodes(before.episodes), from_episodes(after.episodes), settings)
    if not comparison.cells:
        raise ConfigError(f"{baseline} and {current} have no model × strategy × task set in common")
    directory = make_directory(out or current, "--out" if out else "CURRENT", COMPARE_FIX)
    name = baseline.resolve().name or "baseline"
    md, html = directory / f"compare-{name}.md", directory / f"compare-{name}.html"
    return comparison, write_files({md: compare_markdown(comparison, str(baseline), str(current)),
                                    html: compare_html(comparison, str(baseline), str(current))}, COMPARE_FIX)


def short_table(comparison: Comparison) -> str:
    """The stdout summary: one line per cell."""
    lines = [f"{'cell':<48} {'pairs':>5} {'Δ success':>10} {'p':>8} {'Δ reward':>9} {'p':>8}  verdict"]
    for c in comparison.cells:
        points = "—" if c.success_points is None else f"{c.success_points:+.1f} pts"
        reward = "—" if c.reward is None else f"{c.reward.difference:+.3f}"
        reward_p = "—" if c.reward is None else f"{c.reward.p_value:.4f}"
        lines.append(f"{' / '.join(c.cell):<48} {c.pairs:>5} {points:>10} {c.mcnemar_p:>8.4f} {reward:>9} "
                     f"{reward_p:>8}  {c.verdict}")
    return "\n".join(lines)


async def run_nightly_command(args: argparse.Namespace) -> int:
    config, sweep_hash = load_sweep(args.file)
    output = night_dir(config, args.output, time.time())
    options = NightlyOptions(
        history=args.history or config.output / HISTORY_NAME, output=output, compare=compare_settings(args),
        flaky=_validated(FlakySettings, window=args.flaky_window, min_flips=args.flaky_flips),
        exclude_flaky=args.exclude_flaky)
    with logging_to_file(output / "nightly.log", args.verbose, console=True):
        result = await run_nightly(config, sweep_hash, options, data_dir=data_dir_for(config, args.data_dir))
    if result.report.comparison is not None:
        print(short_table(result.report.comparison))
    if result.report.broken:
        print(f"{len(result.report.broken)} broken task(s) quarantined (their gold no longer scores 1.0)",
              file=sys.stderr)
    print(f"night {result.night_id}: {result.report.status}; wrote " + " and ".join(str(p) for p in result.paths))
    return result.exit_code
