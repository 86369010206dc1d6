"""`python -m orchestrator report OUTDIR`: write OUTDIR/report.md and OUTDIR/report.html from results.db
(both whole, or neither)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from orchestrator.output_files import write_files
from orchestrator.report.html import render_html
from orchestrator.report.markdown import render_markdown
from orchestrator.report.content import build_content
from orchestrator.store.results import load_results


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("report", help="summarize a sweep's results.db as report.md and report.html")
    parser.add_argument("outdir", type=Path, metavar="OUTDIR", help="the sweep's output directory")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    written = await asyncio.to_thread(write_report, args.outdir)
    print("wrote " + " and ".join(str(p) for p in written))
    return 0


def write_report(outdir: Path) -> list[Path]:
    """Read OUTDIR/results.db and write both reports next to it; returns their paths."""
    view = build_content(load_results(outdir))
    md, html = outdir / "report.md", outdir / "report.html"
    # Both or neither: a full disk or a kill leaves the last reports as they were.
    return write_files({md: render_markdown(view), html: render_html(view)},
                       f"copy {outdir} to a writable disk and run `report` there")
