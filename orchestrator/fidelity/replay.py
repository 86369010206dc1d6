"""`python -m orchestrator replay FILE`: replay recorded trajectories through our environments.

Turn by turn, as the original harness did: a turn whose recorded observation is the "no code"
retry message is not executed and scores 0; otherwise the action runs and the reward is scored
right after it ("if submitted now"), without ending the episode. Bash and SQL score every action;
Python auto-submits a `def` (other actions score 0); CTF scores `submit FLAG` (other actions 0).
We then compare our reward with the recorded one, within 0.01.

Bash recordings of the original also replay through its container lifecycle (`--containers`):
each file's episodes in order, in one agent and one gold container that are never replaced, only
"reset" the original's leaky way. The rewards themselves are computed by the same code either way.

A container can break under a replay: it dies, or a recorded action breaks it (one agent gzipped
every binary from `/`). A SandboxError costs its own episode only. The environment is closed, a
new one opened (new containers), and the replay goes on with the next episode. Broken during a
turn, that turn and the rest of its episode are not scored, with the reason; broken before the
first turn (the reset failed), the episode is replayed once more in the new environment. In the
original lifecycle the later episodes of the file are then flagged: the recording ran them in the
original's containers after the same actions, so in broken containers, or at least with another
history than our new ones, and their recorded rewards can't be reproduced. They are replayed and
scored, but left out of the agreement share, as is a turn without a recorded reward. The report
counts flagged and unscored turns apart, and a replay that could compare no turn exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from agents.strategies.common import harness_step
from environments import make_environment
from environments.base import Environment, TaskUnavailable
from environments.bash_lifecycle import OriginalLifecycleBashEnv
from environments.runtime import Runtime
from orchestrator.errors import ConfigError, SandboxError
from orchestrator.fidelity.trajectories import Episode, TaskFinder, Turn, read_episodes, shown
from orchestrator.settings import resolve_data_dir
from orchestrator.store.export import HARNESS

log = structlog.get_logger(__name__)

TOLERANCE = 0.01 + 1e-9
RETRY = re.compile(r"^(Format your .* as follows|No code|Your output did not contain)", re.IGNORECASE)


@dataclass
class TurnResult:
    episode: str
    turn: int
    action: str
    recorded: float | None
    ours: float | None  # None: not scored (`reason` says why)
    agree: bool
    reason: str = ""
    flag: str = ""  # why a scored turn is left out of the agreement share: its recording can't be reproduced

    @property
    def counted(self) -> bool:
        """Whether the turn counts in the agreement share."""
        return self.ours is not None and not self.flag


@dataclass
class EpisodeReplay:
    """One episode's turns, and the error that broke its environment ("" when none did)."""

    turns: list[TurnResult]
    broken: str = ""
    at: str = ""  # the turn it broke at, "turn N of episode K"; "": at the reset, worth one more try


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("replay", help="replay trajectory files in the original format; per-turn agreement")
    parser.add_argument("files", nargs="+", type=Path, metavar="TRAJECTORY_FILE")
    parser.add_argument("--data-dir", help="benchmark data (default: $INTERCODE_DATA_DIR or ../shared/intercode-data)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write recorded and recomputed rewards per turn")
    parser.add_argument("--concurrency", type=int, default=8, help="episodes replayed at once")
    parser.add_argument("--reward", choices=("original", "strict"), default="original")
    parser.add_argument("--containers", choices=("auto", "original", "pristine"), default="auto",
                        help="bash: 'original' replays each file in order through two long-lived containers reset "
                             "the original's leaky way, as its recordings ran; 'pristine' gives every episode a "
                             "clean container, as our sweeps do; 'auto' (default): pristine for files we exported, "
                             "original for the others")
    parser.add_argument("--limit", type=int, help="replay only the first N episodes of each file")
    parser.add_argument("--mismatches", type=int, default=40, help="how many mismatches to list")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    data_dir = resolve_data_dir(args.data_dir)
    episodes = read_all(args.files, args.limit)  # every file is checked before a container starts
    finder = TaskFinder(data_dir)
    async with Runtime.open(data_dir=data_dir, reward_mode=args.reward) as runtime:
        results = await replay_all(runtime, finder, episodes, args.concurrency, args.containers)
    original = sorted({Path(e.source).name for e in episodes if lifecycle(e, args.containers) == "original"})
    if original:
        print(f"containers: the original's (long-lived, reset with git reset --hard; git clean -fd) for "
              f"{', '.join(original)}; --containers pristine for clean ones")
    report(results, args.mismatches)
    if args.json:
        write_json(args.json, results)
    if any(r.counted for r in results):
        return 0
    print(f"no turn could be compared with its recording ({_left_out(results) or 'no turns'}): "
          "see the reasons above", file=sys.stderr)
    return 1


def read_all(files: list[Path], limit: int | None) -> list[Episode]:
    """The episodes of every file; keyed `FILE#KEY` when there are several files."""
    names = Counter(path.name for path in files)
    seen: set[str] = set()
    episodes = []
    for path in files:
        read = read_episodes(path)[:limit]  # first: a ConfigError for any file that can't be read
        if os.path.realpath(path) in seen:  # realpath, unlike Path.resolve, takes a symlink loop
            raise ConfigError(f"{shown(path, 400)} is given twice")
        seen.add(os.path.realpath(path))
        label = path.name if names[path.name] == 1 else str(path)
        for episode in read:
            key = f"{label}#{episode.key}" if len(files) > 1 else episode.key
            episodes.append(replace(episode, key=key))
    return episodes


async def replay_all(runtime: Runtime, finder: TaskFinder, episodes: list[Episode],
                     concurrency: int, containers: str = "auto") -> list[TurnResult]:
    """Replay episodes `concurrency` at a time, each worker holding one environment of a kind.
    Bash episodes that get the original's containers (see `lifecycle`) run in their file's order
    through one environment with the original's long-lived, leakily reset containers."""
    queues: dict[str, asyncio.Queue[Episode]] = defaultdict(asyncio.Queue)
    in_order: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        if lifecycle(episode, containers) == "original":
            in_order[episode.source].append(episode)
        else:
            queues[episode.kind].put_nowait(episode)
    results: list[TurnResult] = []

    async def worker(kind: str, queue: asyncio.Queue[Episode]) -> None:
        replayer = Replayer(lambda: _prepared(make_environment(kind, runtime)), finder, history=False)
        results.extend(await replayer.run(_drain(queue)))

    async def in_one_harness(file_episodes: list[Episode]) -> None:
        replayer = Replayer(lambda: OriginalLifecycleBashEnv(runtime), finder, history=True)
        results.extend(await replayer.run(file_episodes))

    async with asyncio.TaskGroup() as group:
        for kind, queue in queues.items():
            for _ in range(min(max(1, concurrency // len(queues)), queue.qsize())):
                group.create_task(worker(kind, queue))
        for file_episodes in in_order.values():
            group.create_task(in_one_harness(file_episodes))
    order = {e.key: i for i, e in enumerate(episodes)}
    return sorted(results, key=lambda r: (order[r.episode], r.turn))


def lifecycle(episode: Episode, containers: str = "auto") -> str:
    """Which containers a replayed episode gets: "original" or "pristine".

    The original's Bash harness kept one agent and one gold container per image for a whole run,
    "reset" with `git reset --hard; git clean -fd`, and re-ran the gold before every scoring. Its
    recordings depend on that history (mtimes rewritten by resets, leftovers in ignored
    directories), so they replay through the same lifecycle. Files we exported ran in pristine
    containers, and replay in them. Other kinds have no such history: always pristine.
    """
    if episode.kind != "bash":
        return "pristine"
    if containers == "auto":
        return "pristine" if episode.harness == HARNESS else "original"
    return containers


def _prepared(env: Environment) -> Environment:
    if env.kind == "ctf":
        env.wrong_flag_ends = False  # type: ignore[attr-defined] — the multi-turn harness let agents retry
    return env


def _drain(queue: asyncio.Queue[Episode]) -> Iterator[Episode]:
    while not queue.empty():
        yield queue.get_nowait()


class Replayer:
    """Replays episodes in order through one environment at a time; when a container breaks under
    one, it closes the environment, opens a new one and goes on (see the module docstring).
    `history`: an episode's recording depends on those before it in the same containers (the
    original lifecycle), so once new containers were opened, the episodes after are flagged."""

    def __init__(self, make: Callable[[], Environment], finder: TaskFinder, *, history: bool) -> None:
        self.make, self.finder, self.history = make, finder, history
        self.env = make()
        self.flag = ""  # once set, given to every turn scored after
        self.previous = ""  # the last episode that ran turns in the current environment

    async def run(self, episodes: Iterable[Episode]) -> list[TurnResult]:
        results: list[TurnResult] = []
        try:
            for episode in episodes:
                results.extend(await self._replay(episode))
        finally:
            await self.env.close()
        return results

    async def _replay(self, episode: Episode) -> list[TurnResult]:
        replay = await replay_episode(self.env, self.finder, episode)
        if replay.broken and not replay.at:  # an earlier episode broke the container, or none started
            await self._renew(f"episode {shown(self.previous)}" if self.previous else "", replay.broken)
            replay = await replay_episode(self.env, self.finder, episode)  # once more
        turns = [replace(t, flag=t.flag or self.flag) if t.ours is not None else t for t in replay.turns]
        if any(t.ours is not None for t in turns):
            self.previous = episode.key
        if replay.broken:
            await self._renew(replay.at, replay.broken)
        return turns

    async def _renew(self, culprit: str, error: str) -> None:
        """Close the environment whose container broke; open a new one, with new containers.
        `culprit`: the turn or episode that broke it, "" when none did (it failed to start)."""
        try:
            await self.env.close()
        except SandboxError as exc:  # its containers are thrown away either way
            log.warning("replay.close_failed", error=str(exc))
        self.env, self.previous = self.make(), ""
        if self.history and culprit and not self.flag:
            self.flag = (f"recorded after {culprit} broke the original's containers, replayed in new ones: "
                         f"the recorded reward can't be reproduced ({error})")


async def replay_episode(env: Environment, finder: TaskFinder, episode: Episode) -> EpisodeReplay:
    task = finder.find(episode)
    if task is None:
        return EpisodeReplay(unscored(episode, "task not found in the data"))
    try:
        await env.reset(task)
    except TaskUnavailable as exc:
        return EpisodeReplay(unscored(episode, str(exc)))
    except SandboxError as exc:
        reason = f"container broken before episode {shown(episode.key)} began ({_one_line(exc)}); re-created"
        return EpisodeReplay(unscored(episode, reason), _one_line(exc))
    out: list[TurnResult] = []
    for i, turn in enumerate(episode.turns):
        try:
            out.append(await replay_turn(env, episode.key, i, turn))
        except SandboxError as exc:
            at = f"turn {i + 1} of episode {shown(episode.key)}"
            reason = f"container broken at {at} ({_one_line(exc)}); re-created"
            return EpisodeReplay(out + unscored(episode, reason, i), _one_line(exc), at)
        if env.done:
            break
    return EpisodeReplay(out)


def unscored(episode: Episode, reason: str, start: int = 0) -> list[TurnResult]:
    return [TurnResult(episode.key, i, t.action, t.reward, None, False, reason)
            for i, t in enumerate(episode.turns) if i >= start]


async def replay_turn(env: Environment, key: str, index: int, turn: Turn) -> TurnResult:
    if isinstance(turn.observation, str) and RETRY.match(turn.observation):
        ours, observation = 0.0, turn.observation  # the harness executed nothing on that turn
    else:
        ours, observation = await harness_turn(env, turn.action)
    if turn.reward is None:
        return TurnResult(key, index, turn.action, None, ours, False, flag="no recorded reward")
    agree = abs(turn.reward - ours) <= TOLERANCE
    reason = "" if agree else _reason(turn.observation, observation)
    return TurnResult(key, index, turn.action, turn.reward, ours, agree, reason)


async def harness_turn(env: Environment, action: str) -> tuple[float, str]:
    """One turn of the original's multi-turn harness (shared with our strategies); the older CTF
    harness prefixed shell commands with `cmd `."""
    if env.kind == "ctf" and action.strip().startswith("cmd "):
        action = action.strip()[4:]
    reward, observation, _ = await harness_step(env, action)
    return reward, observation


def _one_line(error: Exception, limit: int = 200) -> str:
    return " ".join(str(error).split())[:limit]


def _reason(recorded: Any, ours: str) -> str:
    if not isinstance(recorded, str):
        recorded = str(recorded)
    if recorded == ours:
        return "same observation, different reward"
    rec_lines, our_lines = recorded.splitlines(), ours.splitlines()
    for a, b in zip(rec_lines, our_lines):
        if a != b:
            return f"observation differs: recorded {a[:60]!r}, ours {b[:60]!r}"
    return f"observation differs in length: {len(rec_lines)} recorded lines, {len(our_lines)} ours"


def report(results: list[TurnResult], show: int) -> None:
    counted = [r for r in results if r.counted]
    by_turn: dict[int, list[TurnResult]] = defaultdict(list)
    for result in counted:
        by_turn[result.turn].append(result)
    print(f"{'turn':>4}  {'turns':>6}  {'agree':>6}  share")
    for turn in sorted(by_turn):
        rows = by_turn[turn]
        agree = sum(r.agree for r in rows)
        print(f"{turn + 1:>4}  {len(rows):>6}  {agree:>6}  {agree / len(rows):.3f}")
    mismatches = [r for r in counted if not r.agree]
    if mismatches:
        print(f"\n{len(mismatches)} mismatches (recorded -> ours), first {min(show, len(mismatches))}:")
        for r in mismatches[:show]:
            print(f"  ep {shown(r.episode)} turn {r.turn + 1}: {r.recorded} -> {r.ours:.2f}  {r.action[:50]!r}  "
                  f"{r.reason}")
    _list_left_out([r for r in results if r.ours is None], "not scored", lambda r: r.reason, show)
    flagged = [r for r in results if r.ours is not None and r.flag]
    comparable = [r for r in flagged if r.recorded is not None]
    anyway = f" ({sum(r.agree for r in comparable)} of {len(comparable)} agree anyway)" if comparable else ""
    _list_left_out(flagged, f"scored but not counted{anyway}", lambda r: r.flag, show)
    agreed = sum(r.agree for r in counted)
    left_out = _left_out(results)
    print(f"agreement: {agreed / max(len(counted), 1):.3f} ({len(counted)} turns{'; ' + left_out if left_out else ''})")


def _list_left_out(rows: list[TurnResult], what: str, why: Callable[[TurnResult], str], show: int) -> None:
    """Turns left out of the agreement share, grouped by why."""
    if not rows:
        return
    print(f"\n{_count(len(rows), 'turn')} of {_count(len({r.episode for r in rows}), 'episode')} {what}:")
    groups: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        groups[why(r)].append(r.episode)
    for reason, keys in list(groups.items())[:show]:
        episodes = list(dict.fromkeys(keys))
        more = f" and {len(episodes) - 5} more" if len(episodes) > 5 else ""
        print(f"  {_count(len(keys), 'turn')} of ep {', '.join(shown(k) for k in episodes[:5])}{more}: {reason}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _left_out(results: list[TurnResult]) -> str:
    """How many turns the agreement share leaves out, and why: "2 flagged, 3 not scored"."""
    flagged = sum(r.ours is not None and bool(r.flag) for r in results)
    unscored = sum(r.ours is None for r in results)
    return ", ".join(f"{n} {what}" for n, what in ((flagged, "flagged"), (unscored, "not scored")) if n)


def write_json(path: Path, results: list[TurnResult]) -> None:
    episodes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for result in results:
        episodes[result.episode].append({k: v for k, v in asdict(result).items() if k != "episode"})
    try:
        path.write_text(json.dumps(episodes, indent=1))
    except OSError as exc:
        raise ConfigError(f"--json {shown(path, 400)} cannot be written: {exc.strerror or exc}") from None
