"""`python -m orchestrator replay FILE...`: replay recorded trajectories through our environments.

Files of every script of the original are read (`formats.py`), whatever their names, and each turn
is replayed by the rule of the script that recorded it (`rules.py`): the "if submitted now" reward
of the n-turn and Plan & Solve harnesses, ReAct's parser and step reward, the CTF environment's own
reward, the human study's one reward at the end. We then compare our reward with the recorded one,
within 0.01. `--table DIR` replays every file under DIR and prints the paper's success table,
recorded and recomputed side by side (`table.py`).

Bash recordings of the original also replay through its container lifecycle (`--containers`):
each file's episodes in order, in one agent and one gold container that are never replaced, only
"reset" the original's leaky way. The rewards themselves are computed by the same code either way.

A bad episode (its task is not in the data, a recorded action is outside its script's grammar)
is one line naming the file and the episode; the replay scores the others and counts it.

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

import asyncio
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import structlog

from environments import make_environment
from environments.base import Environment, TaskUnavailable
from orchestrator.fidelity.original_lifecycle import OriginalLifecycleBashEnv
from environments.kind import kind_spec
from environments.runtime import Runtime
from foundation.errors import ConfigError, SandboxError
from orchestrator.fidelity.replayed_turn import OutOfGrammar, TurnResult, replay_turn
from orchestrator.fidelity.trajectories import RecordedEpisode, TaskFinder, key_in_file, read_episodes, shown
from orchestrator.store.export import HARNESS

__all__ = ["Replayed", "TurnResult", "lifecycle", "replay_all", "replay_recordings", "without_turns"]

log = structlog.get_logger(__name__)
NOT_FOUND = "task not found in the data"
NETWORK = ("its gold reaches the network, which the recording had and this replay has not (the containers are "
           "offline): replayed, not scored")


@dataclass
class EpisodeReplay:
    """One episode's turns, and the error that broke its environment ("" when none did)."""

    turns: list[TurnResult]
    broken: str = ""
    at: str = ""  # the turn it broke at, "turn N of episode K"; "": at the reset, worth one more try
    bad: str = ""  # why the episode is bad, one line naming its file and itself; "" when it is not


@dataclass
class Replayed:
    """Every replayed turn, and the bad episodes (key -> one line naming the file and the episode)."""

    results: list[TurnResult] = field(default_factory=list)
    bad: dict[str, str] = field(default_factory=dict)


def trajectory_files(files: list[Path], table: Path | None) -> list[Path]:
    """The files given, or with `--table DIR` every *.json under DIR, in a stable order."""
    if table is None:
        if not files:
            raise ConfigError("replay needs trajectory files, or --table DIR")
        return files
    if files:
        raise ConfigError("give trajectory files or --table DIR, not both")
    if not table.is_dir():
        raise ConfigError(f"--table {shown(table, 400)} is not a directory")
    found = sorted(p for p in table.rglob("*.json") if p.is_file())
    if not found:
        raise ConfigError(f"--table {shown(table, 400)} holds no *.json file")
    return found


def read_all(files: list[Path], limit: int | None) -> list[RecordedEpisode]:
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


async def replay_all(runtime: Runtime, finder: TaskFinder, episodes: list[RecordedEpisode],
                     concurrency: int, containers: str = "auto") -> list[TurnResult]:
    """Every replayed turn of `episodes` (see `replay_recordings`)."""
    return (await replay_recordings(runtime, finder, episodes, concurrency, containers)).results


async def replay_recordings(runtime: Runtime, finder: TaskFinder, episodes: list[RecordedEpisode],
                            concurrency: int, containers: str = "auto",
                            on_episode: Callable[[], None] | None = None) -> Replayed:
    """Replay episodes `concurrency` at a time, each worker holding one environment of a kind.
    Bash episodes that get the original's containers (see `lifecycle`) run in their file's order
    through one environment with the original's long-lived, leakily reset containers.
    `on_episode` is called as each episode is replayed (progress)."""
    queues: dict[str, asyncio.Queue[RecordedEpisode]] = defaultdict(asyncio.Queue)
    in_order: dict[str, list[RecordedEpisode]] = defaultdict(list)
    out = Replayed()
    for episode in episodes:
        if not episode.turns:  # nothing to replay: no environment for it
            if episode.bad:
                out.bad[episode.key] = bad_line(episode, episode.bad)
        elif lifecycle(episode, containers) == "original":
            in_order[episode.source].append(episode)
        else:
            queues[episode.kind].put_nowait(episode)

    async def worker(kind: str, queue: asyncio.Queue[RecordedEpisode]) -> None:
        await Replayer(lambda: make_environment(kind, runtime), finder, out, history=False,
                       on_episode=on_episode).run(_drain(queue))

    async def in_one_harness(file_episodes: list[RecordedEpisode]) -> None:
        await Replayer(lambda: OriginalLifecycleBashEnv(runtime, original_host=True), finder, out, history=True,
                       on_episode=on_episode).run(file_episodes)

    async with asyncio.TaskGroup() as group:
        for kind, queue in queues.items():
            for _ in range(min(max(1, concurrency // len(queues)), queue.qsize())):
                group.create_task(worker(kind, queue))
        for file_episodes in in_order.values():
            group.create_task(in_one_harness(file_episodes))
    order = {e.key: i for i, e in enumerate(episodes)}
    out.results.sort(key=lambda r: (order[r.episode], r.turn))
    out.bad = dict(sorted(out.bad.items(), key=lambda item: order[item[0]]))
    return out


def without_turns(episodes: list[RecordedEpisode]) -> Replayed:
    """The replay of episodes none of which has a turn (all bad as read): their lines, no container."""
    return Replayed(bad={e.key: bad_line(e, e.bad) for e in episodes if e.bad})


def lifecycle(episode: RecordedEpisode, containers: str = "auto") -> str:
    """Which containers a replayed episode gets: "original" or "pristine".

    The original's Bash harness kept one agent and one gold container per image for a whole run,
    "reset" with `git reset --hard; git clean -fd`, and re-ran the gold before every scoring. Its
    recordings depend on that history (mtimes rewritten by resets, leftovers in ignored
    directories), so they replay through the same lifecycle. Files we exported ran in pristine
    containers, and replay in them. Other kinds have no such history: always pristine.
    """
    if not kind_spec(episode.kind).harness_history:
        return "pristine"
    if containers == "auto":
        return "pristine" if episode.harness == HARNESS else "original"
    return containers


def _drain(queue: asyncio.Queue[RecordedEpisode]) -> Iterator[RecordedEpisode]:
    while not queue.empty():
        yield queue.get_nowait()


class Replayer:
    """Replays episodes in order through one environment at a time; when a container breaks under
    one, it closes the environment, opens a new one and goes on (see the module docstring).
    `history`: an episode's recording depends on those before it in the same containers (the
    original lifecycle), so once new containers were opened, the episodes after are flagged."""

    def __init__(self, make: Callable[[], Environment], finder: TaskFinder, out: Replayed, *,
                 history: bool, on_episode: Callable[[], None] | None = None) -> None:
        self.make, self.finder, self.out, self.history = make, finder, out, history
        self.on_episode = on_episode
        self.env = make()
        self.flag = ""  # once set, given to every turn scored after
        self.previous = ""  # the last episode that ran turns in the current environment

    async def run(self, episodes: Iterable[RecordedEpisode]) -> None:
        try:
            for episode in episodes:
                replay = await self._replay(episode)
                self.out.results.extend(replay.turns)
                if replay.bad:
                    self.out.bad[episode.key] = replay.bad
                if self.on_episode is not None:
                    self.on_episode()
        finally:
            await self.env.close()

    async def _replay(self, episode: RecordedEpisode) -> EpisodeReplay:
        replay = await replay_episode(self.env, self.finder, episode)
        if replay.broken and not replay.at:  # an earlier episode broke the container, or none started
            await self._renew(f"episode {shown(self.previous)}" if self.previous else "", replay.broken)
            replay = await replay_episode(self.env, self.finder, episode)  # once more
        turns = [replace(t, flag=t.flag or self.flag) if t.ours is not None else t for t in replay.turns]
        if any(t.ours is not None for t in turns):
            self.previous = episode.key
        if replay.broken:
            await self._renew(replay.at, replay.broken)
        return replace(replay, turns=turns)

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


async def replay_episode(env: Environment, finder: TaskFinder, episode: RecordedEpisode) -> EpisodeReplay:
    """The episode's turns replayed; one read as bad (`episode.bad`) as far as it was read soundly."""
    replay = await _replay_turns(env, finder, episode) if episode.turns else EpisodeReplay([])
    if episode.bad and not replay.bad:
        replay.bad = bad_line(episode, episode.bad)
    return replay


async def _replay_turns(env: Environment, finder: TaskFinder, episode: RecordedEpisode) -> EpisodeReplay:
    task = finder.find(episode)
    if task is None:
        return EpisodeReplay(unscored(episode, NOT_FOUND), bad=bad_line(episode, NOT_FOUND))
    try:
        await env.reset(task, multi_turn=True)  # as the original's harness ran it (CTF: retry a wrong flag)
    except TaskUnavailable as exc:
        return EpisodeReplay(unscored(episode, str(exc)))
    except SandboxError as exc:
        reason = f"container broken before episode {shown(episode.key)} began ({_one_line(exc)}); re-created"
        return EpisodeReplay(unscored(episode, reason), _one_line(exc))
    out: list[TurnResult] = []
    prior = 0.0  # our reward of the turn before: a refine turn without code recorded it again
    for i in range(len(episode.turns)):
        try:
            out.append(await replay_turn(env, episode, i, prior))
        except OutOfGrammar as exc:
            reason = f"turn {i + 1}: {exc}"
            return EpisodeReplay(out + unscored(episode, f"bad episode: {reason}", i), bad=bad_line(episode, reason))
        except SandboxError as exc:
            at = f"turn {i + 1} of episode {shown(episode.key)}"
            reason = f"container broken at {at} ({_one_line(exc)}); re-created"
            return EpisodeReplay(out + unscored(episode, reason, i), _one_line(exc), at)
        prior = out[-1].ours if out[-1].ours is not None else prior
        if env.done:
            break
    if kind_spec(task.kind).reaches_network(task):  # replayed all the same: a later episode sees what it did
        out = [replace(t, ours=None, agree=False, reason=NETWORK) for t in out]
    return EpisodeReplay(out)


def bad_line(episode: RecordedEpisode, reason: str) -> str:
    """One line naming the file and the episode (its key in the file), and why it is bad."""
    return f"{shown(episode.source or 'the recording', 400)}: episode {shown(key_in_file(episode))}: {reason}"


def unscored(episode: RecordedEpisode, reason: str, start: int = 0) -> list[TurnResult]:
    return [TurnResult(episode.key, i, t.action, t.reward, None, False, reason)
            for i, t in enumerate(episode.turns) if i >= start]


def _one_line(error: Exception, limit: int = 200) -> str:
    return " ".join(str(error).split())[:limit]
