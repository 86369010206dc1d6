"""`python -m orchestrator export OUTDIR --format intercode`: a sweep's episodes as trajectory files."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from orchestrator.cli import handler_of
from orchestrator.store.export import export_intercode


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("export", help="write a sweep's episodes in the original InterCode trajectory format")
    parser.add_argument("outdir", type=Path, metavar="OUTDIR", help="the sweep's output directory")
    parser.add_argument("--format", choices=["intercode"], default="intercode", help="the only format: intercode")
    parser.add_argument("--to", type=Path, metavar="DIR", help="where to write (default: OUTDIR/export/intercode)")
    parser.set_defaults(**handler_of(run))


async def run(args: argparse.Namespace) -> int:
    target = args.to or args.outdir / "export" / args.format
    paths = await asyncio.to_thread(export_intercode, args.outdir, target)
    print(f"{len(paths)} trajectory files in {target}")
    return 0
