"""SQL fidelity against the original: gold validation and trajectory replay.

    python -m checks.sql_fidelity gold spider wikisql            # reset, step(gold), submit
    python -m checks.sql_fidelity replay trajectories/sql/*.json --out /tmp/replay.json

`gold` reports the share of tasks whose own gold scores 1.0, and why the others don't. `replay`
re-runs the recorded episodes turn by turn: step(action) then score(), as the paper's "Try Again"
harness did, and compares each turn's reward with the recorded one (agreement: |ours - recorded|
<= 0.01). Turns where the model gave no code were not executed by the harness (reward 0, a retry
message as observation): they are not executed here either. `replay_file` and `validate_gold`
are the functions to call from elsewhere (the generic replay command).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from environments import make_environment
from environments.base import Environment
from environments.runtime import Runtime
from foundation.logs import configure
from foundation.settings import resolve_data_dir
from tasks import Task, load_tasks

RETRY_PREFIX = "Format your SQL command"  # the harness's message when the model's reply held no code
TOLERANCE = 0.01


async def each_in_env(runtime: Runtime, items: Sequence[Any], concurrency: int,
                      work: Callable[[Environment, Any], Awaitable[Any]]) -> list[Any]:
    """Run `work(env, item)` for every item on `concurrency` environments, results in item order."""
    results: list[Any] = [None] * len(items)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(len(items)):
        queue.put_nowait(index)

    async def worker() -> None:
        async with make_environment("sql", runtime) as env:
            while not queue.empty():
                index = queue.get_nowait()
                results[index] = await work(env, items[index])

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(items))):
            group.create_task(worker())
    return results


# ------------------------------------------------------------------ gold validation

@dataclass
class GoldCheck:
    task: str
    reward: float
    observation: str


async def check_gold(env: Environment, task: Task) -> GoldCheck:
    await env.reset(task)
    observation, _, _, _ = await env.step(task.gold_text)
    _, reward, _, _ = await env.step("submit")
    return GoldCheck(task.id, float(reward), observation[:300])


async def validate_gold(runtime: Runtime, tasks: Sequence[Task], concurrency: int = 16) -> list[GoldCheck]:
    return await each_in_env(runtime, tasks, concurrency, check_gold)


# ------------------------------------------------------------------ replay

@dataclass
class Turn:
    task: int
    turn: int
    action: str
    recorded_reward: float
    reward: float
    recorded_observation: str
    observation: str
    executed: bool

    @property
    def agrees(self) -> bool:
        return abs(self.reward - self.recorded_reward) <= TOLERANCE


@dataclass
class ReplayReport:
    file: str
    turns: list[Turn] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def agreement(self) -> float:
        return sum(t.agrees for t in self.turns) / max(len(self.turns), 1)

    @property
    def observation_agreement(self) -> float:
        executed = [t for t in self.turns if t.executed]
        return sum(t.observation == t.recorded_observation for t in executed) / max(len(executed), 1)

    def episodes_final_agree(self) -> tuple[int, int]:
        last: dict[int, Turn] = {}
        for t in self.turns:
            last[t.task] = t
        return sum(t.agrees for t in last.values()), len(last)


async def replay_episode(env: Environment, item: tuple[Task, dict[str, Any]]) -> list[Turn]:
    task, episode = item
    history = episode["turn_history"]
    await env.reset(task)
    turns = []
    for number, (action, recorded_obs, recorded_reward) in enumerate(
            zip(history["actions"], history["observations"], history["rewards"], strict=False)):
        if action == "blocked" or recorded_obs.startswith(RETRY_PREFIX):
            turns.append(Turn(task.index, number, action, float(recorded_reward), 0.0, recorded_obs, recorded_obs,
                              executed=False))
            continue
        observation, _, _, _ = await env.step(action)
        reward, _ = await env.score()
        turns.append(Turn(task.index, number, action, float(recorded_reward), float(reward), recorded_obs,
                          observation, True))
    return turns


async def replay_file(runtime: Runtime, path: Path, tasks: Sequence[Task], concurrency: int = 16) -> ReplayReport:
    """Replay every episode of one trajectory file; `tasks` is the dataset it was recorded on."""
    episodes = json.loads(path.read_text())
    items = [(tasks[int(key)], episode) for key, episode in episodes.items()]
    start = time.monotonic()
    per_episode = await each_in_env(runtime, items, concurrency, replay_episode)
    return ReplayReport(path.name, [turn for turns in per_episode for turn in turns], time.monotonic() - start)


# ------------------------------------------------------------------ command line

async def main_gold(args: argparse.Namespace, runtime: Runtime) -> dict[str, Any]:
    summary = {}
    for name in args.datasets:
        tasks = load_tasks(name, runtime.data_dir)
        start = time.monotonic()
        checks = await validate_gold(runtime, tasks, args.concurrency)
        seconds = time.monotonic() - start
        failures = [c for c in checks if c.reward != 1.0]
        print(f"{name}: {len(checks) - len(failures)}/{len(checks)} gold solutions score 1.0 "
              f"({(len(checks) - len(failures)) / len(checks):.1%}), {seconds:.1f} s at concurrency {args.concurrency}")
        causes = Counter(f.observation.split(" near ")[0][:90] for f in failures)
        for cause, count in causes.most_common():
            print(f"  {count:4d}  {cause}")
        summary[name] = {"passed": len(checks) - len(failures), "total": len(checks), "seconds": seconds,
                         "failures": [asdict(f) for f in failures]}
    return summary


async def main_replay(args: argparse.Namespace, runtime: Runtime) -> dict[str, Any]:
    tasks = load_tasks("spider", runtime.data_dir)
    summary = {}
    for name in args.files:
        report = await replay_file(runtime, Path(name), tasks, args.concurrency)
        agreed, episodes = report.episodes_final_agree()
        print(f"{report.file}: {report.agreement:.2%} of {len(report.turns)} turns agree; final reward agrees in "
              f"{agreed}/{episodes} episodes; observations identical in {report.observation_agreement:.2%} of "
              f"executed turns; {report.seconds:.1f} s")
        summary[report.file] = {"agreement": report.agreement, "turns": len(report.turns), "seconds": report.seconds,
                                "observation_agreement": report.observation_agreement,
                                "mismatches": [asdict(t) for t in report.turns if not t.agrees]}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--mode", choices=["original", "strict"], default="original")
    parser.add_argument("--out", help="write the details (failures, mismatches) here as JSON")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("gold").add_argument("datasets", nargs="+")
    commands.add_parser("replay").add_argument("files", nargs="+")
    args = parser.parse_args()
    configure(0)

    async def run() -> dict[str, Any]:
        async with Runtime.open(data_dir=resolve_data_dir(args.data_dir), reward_mode=args.mode) as runtime:
            return await (main_gold if args.command == "gold" else main_replay)(args, runtime)

    summary = asyncio.run(run())
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
