"""`python -m orchestrator replay FILE...`: the command line of replay (logic in replay.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from environments.runtime import Runtime
from foundation.concurrency import TaskOwner
from foundation.errors import ConfigError
from foundation.settings import resolve_data_dir
from orchestrator.fidelity.explain import explain, pick
from orchestrator.fidelity.replay_context import INFERRED, ReplayContext, infer_contexts
from orchestrator.fidelity.replay import (
    Replayed,
    lifecycle,
    read_all,
    replay_recordings,
    trajectory_files,
    without_turns,
)
from orchestrator.fidelity.report import (
    agreement_line,
    left_out_counts,
    report,
    report_bad,
    write_json,
    write_text,
)
from orchestrator.fidelity.table import (
    print_spread,
    print_table,
    spread_json,
    spreads,
    success_table,
    table_json,
)
from orchestrator.fidelity.trajectories import RecordedEpisode, TaskFinder
from orchestrator.images.ensure import ensure_images

LEFT_OUT = 3  # the exit status when the replay compared turns but left episodes out


def images_of(finder: TaskFinder, episodes: list[RecordedEpisode]) -> list[str]:
    """The images of the tasks the episodes replay (those found; the others are reported later)."""
    return sorted({task.image for episode in episodes if (task := finder.find(episode)) is not None and task.image})


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    parser.add_argument("--context", choices=("inferred", "dataset"), default="inferred",
                        help="bash: 'inferred' (default) replays each NL2Bash file in the world its observations "
                             "show it ran in: the file system image (its golds too) and its files' ages at the "
                             "time of recording; 'dataset': the dataset's own image, files as our image has them")
    parser.add_argument("--runs", type=int, default=1, metavar="N",
                        help="replay everything N times, one run after the other, and print each cell's recomputed "
                             "rate in every run and the spread between them (a steady replay: within half a point)")
    parser.add_argument("--limit", type=int, help="replay only the first N episodes of each file")
    parser.add_argument("--explain", nargs=2, metavar=("FILE", "TASK"),
                        help="one episode of FILE (its key or task id) side by side with its replay, turn by turn: "
                             "the reward recorded and ours, each part of it, the changes our scoring found missing "
                             "or extra, where the observations part (replays the episodes before it in the "
                             "original's containers)")
    parser.add_argument("--mismatches", type=int, default=40, help="how many mismatches (and bad episodes) to list")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    if args.runs < 1:
        raise ConfigError(f"--runs {args.runs}: give 1 or more")
    data_dir = resolve_data_dir(args.data_dir)
    if args.explain and (args.files or args.table or args.runs > 1):
        raise ConfigError("--explain FILE TASK replays one episode: give no other file, --table or --runs")
    files = [Path(args.explain[0])] if args.explain else trajectory_files(args.files, args.table)
    progress = Progress(files)
    async with TaskOwner("replay-progress") as beating:
        if progress.large:
            beating.spawn(progress.beat(), name="beat")
        return await _replay(args, data_dir, files, progress)


async def _replay(args: argparse.Namespace, data_dir: Path, files: list[Path], progress: Progress) -> int:
    progress.step(f"reading {_count(len(files), 'file')} ({progress.megabytes:.0f} MB)")
    # every file is checked before a container starts; in a thread, so that the loop can say it reads
    episodes = await asyncio.to_thread(read_all, files, args.limit)
    progress.step(f"read {_count(len(episodes), 'episode')}: finding their tasks and images")
    finder = TaskFinder(data_dir)
    contexts: dict[str, ReplayContext] = {}
    if args.context == INFERRED:  # from every episode of a file, also those --explain does not replay
        contexts = await asyncio.to_thread(infer_contexts, episodes, finder, data_dir)
        print_contexts(contexts, to_stdout=args.json is not None and str(args.json) == "-")
    if args.explain:
        episodes = pick(episodes, args.explain[1])
    runs = []
    for _ in range(args.runs if any(e.turns for e in episodes) else 0):
        # Each run ages the files from its own start: ages are the recording's, whenever it runs.
        finder.contexts = {source: replace(c, anchor_ns=time.time_ns()).apply for source, c in contexts.items()}
        await ensure_images(await asyncio.to_thread(images_of, finder, episodes), data_dir)
        progress.step("starting the containers")
        async with Runtime.open(data_dir=data_dir, reward_mode=args.reward) as runtime:
            progress.replaying(len(episodes))
            runs.append(await replay_recordings(runtime, finder, episodes, args.concurrency, args.containers,
                                                on_episode=progress.episode_done))
    runs = runs or [without_turns(episodes)]  # no turn to replay: no engine needed
    if args.explain:
        print("\n".join(explain(episodes[-1], runs[0].results, finder.find(episodes[-1]), len(episodes) - 1)))
        return 0
    output(args, episodes, runs)
    return exit_status(episodes, runs)


def exit_status(episodes: list[RecordedEpisode], runs: list[Replayed]) -> int:
    """0; 1 when no turn could be compared; LEFT_OUT when episodes were left out of the rates."""
    results = [r for replayed in runs for r in replayed.results]
    if not any(r.counted for r in results):
        bad = len(runs[0].bad)
        counts = [left_out_counts(runs[0].results), f"{bad} bad episode{'' if bad == 1 else 's'}" if bad else ""]
        print(f"no turn could be compared with its recording ({'; '.join(c for c in counts if c) or 'no turns'}): "
              "see the reasons above", file=sys.stderr)
        return 1
    left_out = left_out_episodes(episodes, runs[0])
    if left_out:
        print(f"{left_out} left out of the rates (bad, unavailable here, or broken under the replay): see above",
              file=sys.stderr)
        return LEFT_OUT
    return 0


def left_out_episodes(episodes: list[RecordedEpisode], replayed: Replayed) -> str:
    """How many episodes the replay left out, "" when none: "3 episodes"."""
    unscored = {r.episode for r in replayed.results if r.ours is None}
    count = len({e.key for e in episodes if e.key in replayed.bad or e.key in unscored})
    return f"{count} episode{'' if count == 1 else 's'}" if count else ""


class Progress:
    """What a long replay is doing, on stderr (stdout holds the report): for a large input, each
    step as it starts and, while one goes on, a line at least every EVERY seconds (`beat`); for any
    replay, how many episodes are done every EVERY seconds. A small replay that ends sooner prints
    none of it."""

    EVERY = 10.0  # seconds between two lines about the episodes
    LARGE = 20_000_000  # bytes of trajectory files from which each step is announced

    def __init__(self, files: list[Path]) -> None:
        self.started = self.last = time.monotonic()
        self.megabytes = sum(_size(path) for path in files) / 1e6
        self.large = self.megabytes * 1e6 >= self.LARGE
        self.total = self.done = 0
        self.current = ""

    def step(self, text: str) -> None:
        self.current = text
        if self.large:
            self._say(text)

    async def beat(self) -> None:
        """Runs for the replay's life: a step that says nothing for EVERY seconds is said again."""
        while True:
            await asyncio.sleep(max(0.0, self.last + self.EVERY - time.monotonic()))
            if time.monotonic() - self.last >= self.EVERY:
                self._say(self._replayed() if self.total else f"still {self.current}")

    def replaying(self, total: int) -> None:
        self.total, self.done = total, 0
        self.step(f"replaying {_count(total, 'episode')}")

    def episode_done(self) -> None:
        self.done += 1
        if time.monotonic() - self.last >= self.EVERY:
            self._say(self._replayed())

    def _replayed(self) -> str:
        return f"replayed {self.done:,}/{_count(self.total, 'episode')}"

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


def print_contexts(contexts: dict[str, ReplayContext], *, to_stdout: bool) -> None:
    """Each NL2Bash file's inferred context with its evidence (on stderr when stdout is JSON)."""
    for context in contexts.values():
        print(f"context: {context.describe()}", file=sys.stderr if to_stdout else sys.stdout)


def output(args: argparse.Namespace, episodes: list[RecordedEpisode], runs: list[Replayed]) -> None:
    """The report (with --table, the success table) of the first run on stdout, the spread between
    runs when there are several, and --json; `--json -` puts the JSON on stdout in their place."""
    replayed = runs[0]
    results, bad = replayed.results, list(replayed.bad.values())
    to_stdout = args.json is not None and str(args.json) == "-"
    original = sorted({Path(e.source).name for e in episodes if lifecycle(e, args.containers) == "original"})
    if original and not to_stdout:
        print(f"containers: the original's (long-lived, reset with git reset --hard; git clean -fd) for "
              f"{', '.join(original)}; --containers pristine for clean ones")
    if not args.table:
        if not to_stdout:
            report(results, args.mismatches, bad)
            for number, other in enumerate(runs[1:], start=2):
                print(f"run {number}: {agreement_line(other.results)}")
        if args.json:
            write_json(args.json, results)
        return
    tables = [success_table(episodes, r.results, r.bad, args.table) for r in runs]
    spread = spreads(tables)
    if not to_stdout:
        report_bad(bad, args.mismatches)
        print_table(tables[0], args.table)
        if len(runs) > 1:
            print_spread(spread)
        print(agreement_line(results))
    if args.json:
        document = table_json(tables[0])
        if len(runs) > 1:
            document["runs"] = spread_json(spread)
        write_text(args.json, json.dumps(document, indent=1))
