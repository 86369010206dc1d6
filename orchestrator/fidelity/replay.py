"""`python -m orchestrator replay FILE`: replay recorded trajectories through our environments.

Turn by turn, as the original harness did: a turn whose recorded observation is the "no code"
retry message is not executed and scores 0; otherwise the action runs and the reward is scored
right after it ("if submitted now"), without ending the episode. Bash and SQL score every action;
Python auto-submits a `def` (other actions score 0); CTF scores `submit FLAG` (other actions 0).
We then compare our reward with the recorded one, within 0.01.

Bash recordings of the original also replay through its container lifecycle (`--containers`):
each file's episodes in order, in one agent and one gold container that are never replaced, only
"reset" the original's leaky way. The rewards themselves are computed by the same code either way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from agents.strategies.common import harness_step
from environments import make_environment
from environments.base import Environment, TaskUnavailable
from environments.bash_lifecycle import OriginalLifecycleBashEnv
from environments.runtime import Runtime
from orchestrator.fidelity.trajectories import Episode, TaskFinder, read_episodes
from orchestrator.settings import resolve_data_dir
from orchestrator.store.export import HARNESS

TOLERANCE = 0.01 + 1e-9
RETRY = re.compile(r"^(Format your .* as follows|No code|Your output did not contain)", re.IGNORECASE)


@dataclass
class TurnResult:
    episode: str
    turn: int
    action: str
    recorded: float | None
    ours: float | None
    agree: bool
    reason: str = ""


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
    episodes = []
    for path in args.files:
        for episode in read_episodes(path)[: args.limit]:
            key = f"{path.name}#{episode.key}" if len(args.files) > 1 else episode.key
            episodes.append(replace(episode, key=key))
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
    return 0


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
        async with make_environment(kind, runtime) as env:
            _prepare(env)
            while not queue.empty():
                results.extend(await replay_episode(env, finder, queue.get_nowait()))

    async def in_one_harness(file_episodes: list[Episode]) -> None:
        async with OriginalLifecycleBashEnv(runtime) as env:
            for episode in file_episodes:
                results.extend(await replay_episode(env, finder, episode))

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


def _prepare(env: Environment) -> None:
    if env.kind == "ctf":
        env.wrong_flag_ends = False  # type: ignore[attr-defined] — the multi-turn harness let agents retry


async def replay_episode(env: Environment, finder: TaskFinder, episode: Episode) -> list[TurnResult]:
    task = finder.find(episode)

    def unscored(reason: str) -> list[TurnResult]:
        return [TurnResult(episode.key, i, t.action, t.reward, None, False, reason) for i, t in enumerate(episode.turns)]

    if task is None:
        return unscored("task not found in the data")
    try:
        await env.reset(task)
    except TaskUnavailable as exc:
        return unscored(str(exc))
    out = []
    for i, turn in enumerate(episode.turns):
        if isinstance(turn.observation, str) and RETRY.match(turn.observation):
            ours, observation = 0.0, turn.observation  # the harness executed nothing on that turn
        else:
            ours, observation = await harness_turn(env, turn.action)
        recorded = turn.reward
        agree = recorded is not None and abs(float(recorded) - ours) <= TOLERANCE
        reason = "" if agree else _reason(turn.observation, observation)
        out.append(TurnResult(episode.key, i, turn.action, recorded, ours, agree, reason))
        if env.done:
            break
    return out


async def harness_turn(env: Environment, action: str) -> tuple[float, str]:
    """One turn of the original's multi-turn harness (shared with our strategies); the older CTF
    harness prefixed shell commands with `cmd `."""
    if env.kind == "ctf" and action.strip().startswith("cmd "):
        action = action.strip()[4:]
    reward, observation, _ = await harness_step(env, action)
    return reward, observation


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
    by_turn: dict[int, list[TurnResult]] = defaultdict(list)
    for result in results:
        if result.ours is not None:
            by_turn[result.turn].append(result)
    print(f"{'turn':>4}  {'turns':>6}  {'agree':>6}  share")
    for turn in sorted(by_turn):
        rows = by_turn[turn]
        agree = sum(r.agree for r in rows)
        print(f"{turn + 1:>4}  {len(rows):>6}  {agree:>6}  {agree / len(rows):.3f}")
    unscored = [r for r in results if r.ours is None]
    results = [r for r in results if r.ours is not None]
    mismatches = [r for r in results if not r.agree]
    if mismatches:
        print(f"\n{len(mismatches)} mismatches (recorded -> ours), first {min(show, len(mismatches))}:")
        for r in mismatches[:show]:
            ours = "-" if r.ours is None else f"{r.ours:.2f}"
            print(f"  ep {r.episode} turn {r.turn + 1}: {r.recorded} -> {ours}  {r.action[:50]!r}  {r.reason}")
    if unscored:
        episodes = sorted({r.episode for r in unscored})
        print(f"\n{len(unscored)} turns of {len(episodes)} episodes not scored: {unscored[0].reason} (and alike)")
    agreed = sum(r.agree for r in results)
    print(f"agreement: {agreed / max(len(results), 1):.3f} ({len(results)} turns)")


def write_json(path: Path, results: list[TurnResult]) -> None:
    episodes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for result in results:
        episodes[result.episode].append({k: v for k, v in asdict(result).items() if k != "episode"})
    path.write_text(json.dumps(episodes, indent=1))
