"""`python -m orchestrator export OUTDIR --format intercode|inspect`: a sweep's episodes as trajectory
files in the original InterCode format, or as Inspect AI eval logs (the optional `inspect` extra)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path

from foundation.errors import ConfigError
from orchestrator.output_files import CannotWrite, cannot_write, make_directory
from orchestrator.store.export import EXPORT_FIX, export_intercode
from orchestrator.store.reader import database_path

Exporter = Callable[[Path, Path], list[Path]]
WRITES = {"intercode": "trajectory files", "inspect": "Inspect AI eval logs"}
INSPECT_EXTRA = "pip install 'intercode-orchestrator[inspect]'"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("export", help="write a sweep's episodes as InterCode trajectories or Inspect AI logs")
    parser.add_argument("outdir", type=Path, metavar="OUTDIR", help="the sweep's output directory")
    parser.add_argument("--format", choices=list(WRITES), default="intercode",
                        help="intercode: the original's trajectory files (default); inspect: Inspect AI eval logs, "
                             "one per model × strategy × task set (needs the inspect extra)")
    parser.add_argument("--to", type=Path, metavar="DIR", help="where to write (default: OUTDIR/export/FORMAT)")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    target = args.to or args.outdir / "export" / args.format
    write = exporter(args.format)
    database_path(args.outdir)  # a missing store first: no directory is made for it
    make_directory(target, "--to" if args.to else "the export directory", EXPORT_FIX)
    try:
        paths = await asyncio.to_thread(write, args.outdir, target)
    except OSError as exc:  # a full disk or read-only media midway: the files written so far are whole
        raise CannotWrite(cannot_write(Path(exc.filename or target), exc, EXPORT_FIX)) from None
    print(f"{len(paths)} {WRITES[args.format]} in {target}")
    return 0


def exporter(fmt: str) -> Exporter:
    """The function writing `fmt`; inspect_ai is imported only here, when its format is asked for."""
    if fmt == "intercode":
        return export_intercode
    try:
        from orchestrator.store.inspect_log import export_inspect
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] != "inspect_ai":
            raise
        raise ConfigError(f"--format inspect needs inspect_ai, an optional extra: {INSPECT_EXTRA}") from None
    return export_inspect
