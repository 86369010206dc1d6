"""`python -m orchestrator view OUTDIR [OUTDIR...] [--port N]`: browse sweeps' results in a local web app."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from foundation.errors import ConfigError
from orchestrator.nightly.history import History
from orchestrator.view.app import serving
from orchestrator.view.source import Source

DEFAULT_PORT = 8770


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "view", help="browse sweeps' results in a local web app (live while a sweep writes)",
        description="Serve a read-only web app over each OUTDIR's results.db: the report's cells and plots, "
                    "episode lists with filters, every episode turn by turn, two runs side by side.")
    parser.add_argument("outdirs", type=Path, nargs="+", metavar="OUTDIR", help="a sweep's output directory")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--last-good", type=Path, metavar="HISTORY",
                        help="OUTDIR is a night of the nightly whose history database this is: view it beside "
                             "the last good night it was compared with")
    parser.set_defaults(handler=run)


def last_good_night(history: Path, outdir: Path) -> Path:
    """The output directory of the night `outdir`'s night was compared with (its last good night)."""
    with History.read(history) as nights:
        night = nights.night_of(outdir)
        if night is None:
            raise ConfigError(f"{outdir} is not a night in {history}")
        (baseline,) = nights.nights_by_id([night.baseline_id]) if night.baseline_id is not None else (None,)
    if baseline is None:
        raise ConfigError(f"the night in {outdir} had no good night before it to compare with")
    return Path(baseline.outdir)


async def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a port: give 0 to 65535 (0: any free one)")
    outdirs = list(args.outdirs)
    if args.last_good is not None:
        if len(outdirs) != 1:
            raise ConfigError("--last-good takes one OUTDIR: the night to view beside its last good night")
        outdirs = [await asyncio.to_thread(last_good_night, args.last_good, outdirs[0]), outdirs[0]]
    sources = [await asyncio.to_thread(Source.open, i, outdir) for i, outdir in enumerate(outdirs)]
    async with serving(sources, args.host, args.port) as base:
        print(f"viewing {len(sources)} store{'s' if len(sources) > 1 else ''} at {base}/ (Ctrl-C stops)", flush=True)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # cancellation ends here: Ctrl-C or SIGTERM stops the viewer, its whole job
            print("viewer stopped", flush=True)
    return 0
