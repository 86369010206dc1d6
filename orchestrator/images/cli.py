"""`python -m orchestrator images build|list`: build the environments' images, or show their state."""

from __future__ import annotations

import argparse
import sys
import time

from foundation.engine import engine
from foundation.settings import DATA_DIR_ENV, resolve_data_dir
from orchestrator.images.build import build_images, image_status
from orchestrator.images.engine_build import Line, Progress, find_image
from orchestrator.images.specs import BASE_IMAGE, BY_NAME


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    images = subparsers.add_parser("images", help="build the environments' Docker images, or list them")
    cmds = images.add_subparsers(dest="images_command", metavar="SUBCOMMAND", required=True)
    build = cmds.add_parser("build", help="build images whose inputs changed (all when no NAME is given)")
    build.add_argument("names", nargs="*", metavar="NAME", help=f"one of: {', '.join(BY_NAME)}")
    build.add_argument("--force", action="store_true", help="rebuild even if current, without the layer cache")
    build.add_argument("-v", "--verbose", action="store_true", help="show every line of build output")
    _data_dir_option(build)
    build.set_defaults(handler=run_build)
    listing = cmds.add_parser("list", help="show each image: present, missing or stale, and its size "
                                           "(exit status 1 unless all are present)")
    _data_dir_option(listing)
    listing.set_defaults(handler=run_list)


def _data_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", metavar="DIR",
                        help=f"the InterCode data directory (default: ${DATA_DIR_ENV}, else ../shared/intercode-data)")


async def run_build(args: argparse.Namespace) -> int:
    data_dir = resolve_data_dir(args.data_dir)
    start = time.monotonic()
    results = await build_images(args.names or None, data_dir, force=args.force, progress=_printer(args.verbose))
    built = sum(r.built for r in results)
    print(f"{built} built, {len(results) - built} up to date, {time.monotonic() - start:.0f} s in all")
    return 0


async def run_list(args: argparse.Namespace) -> int:
    data_dir = resolve_data_dir(args.data_dir)
    async with engine() as docker:
        base = await find_image(docker, BASE_IMAGE)
        statuses = await image_status(None, data_dir, docker=docker)
    rows = [("base", BASE_IMAGE, "present" if base else "missing", _mb(base.get("Size") if base else None))]
    rows += [(s.name, s.tag, str(s.state), _mb(s.size)) for s in statuses]
    widths = [max(len(str(row[i])) for row in rows + [("IMAGE", "TAG", "STATE", "SIZE")]) for i in range(4)]
    for row in [("IMAGE", "TAG", "STATE", "SIZE"), *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0 if all(s.state == "present" for s in statuses) and base else 1


def _printer(verbose: bool) -> Progress:
    def show(line: Line) -> None:
        if verbose or not line.detail:
            print(f"[{line.image}] {line.text}", file=sys.stdout, flush=True)
    return show


def _mb(size: int | None) -> str:
    return "-" if not size else f"{size / 1e6:.0f} MB"
