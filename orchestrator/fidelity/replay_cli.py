"""`python -m orchestrator replay FILE...`: the command line of replay (logic in replay.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from environments.runtime import Runtime
from foundation.settings import resolve_data_dir
from orchestrator.fidelity.replay import (
    Replayed,
    lifecycle,
    read_all,
    replay_recordings,
    trajectory_files,
)
from orchestrator.fidelity.report import (
    agreement_line,
    left_out_counts,
    report,
    report_bad,
    write_json,
    write_text,
)
from orchestrator.fidelity.table import print_table, success_table, table_json
from orchestrator.fidelity.trajectories import Episode, TaskFinder
from orchestrator.images.ensure import ensure_images


def images_of(finder: TaskFinder, episodes: list[Episode]) -> list[str]:
    """The images of the tasks the episodes replay (those found; the others are reported later)."""
    return sorted({task.image for episode in episodes if (task := finder.find(episode)) is not None and task.image})


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("replay", help="replay trajectory files of the original's scripts; per-turn agreement, "
                                           "or the paper's success table")
    parser.add_argument("files", nargs="*", type=Path, metavar="TRAJECTORY_FILE")
    parser.add_argument("--table", type=Path, metavar="DIR",
                        help="replay every *.json under DIR (any of the original's formats) and print the success "
                             "table, environment x strategy, recorded and recomputed side by side")
    parser.add_argument("--data-dir", help="benchmark data (default: $INTERCODE_DATA_DIR or ../shared/intercode-data)")
    parser.add_argument("--json", type=Path, metavar="OUT",
                        help="also write recorded and recomputed rewards per turn (with --table: the table) as JSON; "
                             "'-' prints it instead")
    parser.add_argument("--concurrency", type=int, default=8, help="episodes replayed at once")
    parser.add_argument("--reward", choices=("original", "strict"), default="original")
    parser.add_argument("--containers", choices=("auto", "original", "pristine"), default="auto",
                        help="bash: 'original' replays each file in order through two long-lived containers reset "
                             "the original's leaky way, as its recordings ran; 'pristine' gives every episode a "
                             "clean container, as our sweeps do; 'auto' (default): pristine for files we exported, "
                             "original for the others")
    parser.add_argument("--limit", type=int, help="replay only the first N episodes of each file")
    parser.add_argument("--mismatches", type=int, default=40, help="how many mismatches (and bad episodes) to list")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    data_dir = resolve_data_dir(args.data_dir)
    files = trajectory_files(args.files, args.table)
    progress = Progress(files)
    progress.step(f"reading {_count(len(files), 'file')} ({progress.megabytes:.0f} MB)")
    episodes = read_all(files, args.limit)  # every file is checked before a container starts
    progress.step(f"read {_count(len(episodes), 'episode')}: finding their tasks and images")
    finder = TaskFinder(data_dir)
    await ensure_images(await asyncio.to_thread(images_of, finder, episodes), data_dir)
    progress.step("starting the containers")
    async with Runtime.open(data_dir=data_dir, reward_mode=args.reward) as runtime:
        progress.replaying(len(episodes))
        replayed = await replay_recordings(runtime, finder, episodes, args.concurrency,
                                           args.containers, on_episode=progress.episode_done)
    output(args, episodes, replayed)
    if any(r.counted for r in replayed.results):
        return 0
    print(f"no turn could be compared with its recording ({left_out_counts(replayed.results) or 'no turns'}): "
          "see the reasons above", file=sys.stderr)
    return 1


class Progress:
    """What a long replay is doing, on stderr (stdout holds the report): for a large input, each
    step as it starts; for any replay, how many episodes are done every EVERY seconds. A small
    replay that ends sooner prints none of it."""

    EVERY = 10.0  # seconds between two lines about the episodes
    LARGE = 20_000_000  # bytes of trajectory files from which each step is announced

    def __init__(self, files: list[Path]) -> None:
        self.started = self.last = time.monotonic()
        self.megabytes = sum(_size(path) for path in files) / 1e6
        self.large = self.megabytes * 1e6 >= self.LARGE
        self.total = self.done = 0

    def step(self, text: str) -> None:
        if self.large:
            self._say(text)

    def replaying(self, total: int) -> None:
        self.total = total
        self.step(f"replaying {_count(total, 'episode')}")

    def episode_done(self) -> None:
        self.done += 1
        if time.monotonic() - self.last >= self.EVERY:
            self._say(f"replayed {self.done:,}/{_count(self.total, 'episode')}")

    def _say(self, text: str) -> None:
        self.last = time.monotonic()
        print(f"[{self.last - self.started:.0f} s] {text}", file=sys.stderr, flush=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # reading it says what is wrong with it, as one line
        return 0


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def output(args: argparse.Namespace, episodes: list[Episode], replayed: Replayed) -> None:
    """The report (with --table, the success table) on stdout, and --json; `--json -` puts the
    JSON on stdout in their place."""
    results, bad = replayed.results, list(replayed.bad.values())
    to_stdout = args.json is not None and str(args.json) == "-"
    original = sorted({Path(e.source).name for e in episodes if lifecycle(e, args.containers) == "original"})
    if original and not to_stdout:
        print(f"containers: the original's (long-lived, reset with git reset --hard; git clean -fd) for "
              f"{', '.join(original)}; --containers pristine for clean ones")
    if not args.table:
        if not to_stdout:
            report(results, args.mismatches, bad)
        if args.json:
            write_json(args.json, results)
        return
    table = success_table(episodes, results, replayed.bad)
    if not to_stdout:
        report_bad(bad, args.mismatches)
        print_table(table, args.table)
        print(agreement_line(results))
    if args.json:
        write_text(args.json, json.dumps(table_json(table), indent=1))
