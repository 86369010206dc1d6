"""`python -m orchestrator sweep SWEEP.toml`: run a sweep, or continue it where it stopped."""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import ExitStack
from pathlib import Path

from foundation.errors import DataDirError
from foundation.logs import logging_to_file
from foundation.settings import DATA_DIR_ENV, resolve_data_dir
from orchestrator.output_files import CannotWrite, cannot_write, make_directory
from orchestrator.sweep.config import SweepConfig, load_sweep
from tasks import DATASETS

OUTPUT_FIX = "choose another `output` in the sweep file, or give --output DIR"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sweep", help="run models × strategies × task sets from a TOML file; run it again to resume",
        description="Run every episode of the sweep file into OUTPUT/results.db. Running the same file "
                    "again skips the episodes already stored and runs the rest.")
    parser.add_argument("file", type=Path, metavar="SWEEP.toml")
    parser.add_argument("--output", type=Path, help="output directory (overrides the file's `output`)")
    parser.add_argument("--concurrency", type=int, help="episodes at once (overrides the file's `concurrency`)")
    parser.add_argument("--data-dir", metavar="DIR", help=f"the InterCode data (default: the file's data_dir, "
                                                          f"${DATA_DIR_ENV}, else ../shared/intercode-data)")
    parser.add_argument("--ray", metavar="ADDRESS", help='run the episodes on a Ray cluster\'s hosts: "auto", '
                                                      'HOST:PORT or ray://HOST:PORT (sets the file\'s [cluster] ray)')
    parser.add_argument("-q", "--quiet", action="store_true", help="no live table, no console logs (for CI)")
    parser.add_argument("--no-report", action="store_true", help="don't write report.md/report.html at the end")
    parser.set_defaults(handler=run)


def data_dir_for(config: SweepConfig, flag: str | None) -> Path | None:
    """The data directory, required only when a task set is not one of the project's starter sets:
    --data-dir, else the file's data_dir, else the environment's or the default; a missing one is
    one line naming where it came from."""
    needs_data = any(t.dataset is not None and not DATASETS[t.dataset].starter for t in config.tasks)
    if not needs_data and flag is None and config.data_dir is None:
        return None
    if flag or config.data_dir is None:
        return resolve_data_dir(flag)
    path = config.data_dir.expanduser().resolve()
    if not path.is_dir():
        raise DataDirError(f"data directory {path} (from the sweep file's data_dir) does not exist: fix `data_dir`, "
                           "or pass --data-dir DIR")
    return path


async def run(args: argparse.Namespace) -> int:
    config, sweep_hash = load_sweep(args.file, {"output": args.output, "concurrency": args.concurrency,
                                                  "ray": args.ray})
    data_dir = data_dir_for(config, args.data_dir)
    # Imported once the file is good: they bring the engine client, the pool and the models (a
    # second of imports that a mistake in the file should not wait for).
    from orchestrator.sweep.progress import SweepProgress
    from orchestrator.sweep.levels import run_sweep

    progress = SweepProgress(quiet=args.quiet)
    with ExitStack() as stack:
        _log_to_file(stack, config.output, args)
        with progress.live():
            summary = await run_sweep(config, sweep_hash, progress=progress, data_dir=data_dir)
    print(progress.summary(), file=sys.stderr)
    if not args.no_report:
        await write_report(config.output)
    if summary.not_started:
        print(f"the budget is spent: {summary.not_started} episodes not started; raise `budget` and run the "
              "same command to continue", file=sys.stderr)
        return 1
    return 0


def _log_to_file(stack: ExitStack, output: Path, args: argparse.Namespace) -> None:
    """Log to OUTPUT/sweep.log for as long as `stack` is open. An output directory that cannot
    hold it (a file in the way, read-only media, no permission) is one line, before anything else."""
    make_directory(output, "output", OUTPUT_FIX)
    try:
        stack.enter_context(logging_to_file(output / "sweep.log", args.verbose, console=not args.quiet))
    except OSError as exc:
        raise CannotWrite(cannot_write(output / "sweep.log", exc, OUTPUT_FIX)) from None


async def write_report(outdir: Path) -> None:
    from orchestrator.report.cli import write_report as write

    paths = await asyncio.to_thread(write, outdir)
    print(f"report: {', '.join(str(p) for p in paths)}", file=sys.stderr)
