"""Gold validation of the Python environment: every MBPP task's gold, stepped and submitted.

    .venv/bin/python -m benchmarks.python_gold [--reward original|strict] [--concurrency 8] [--json OUT]

Per task: reset, step(gold), `submit <gold function name>` (the mode's rule for that name).
Prints the share scoring 1.0, every failure with its cause, and the wall time; the episodes run
`--concurrency` at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from environments import make_environment
from environments.rewards.python import MbppCheck
from environments.runtime import Runtime
from foundation.logs import configure
from foundation.settings import resolve_data_dir
from tasks import Task, load_tasks


def cause(step_observation: str, info: dict[str, Any]) -> str:
    """One line saying why a gold did not score 1.0."""
    if info.get("reason"):
        return info["reason"]
    if "error" in step_observation and "'output'" not in step_observation:
        return f"stepping the gold failed: {step_observation[:100]}"
    for test, pred in info.get("agent_obs", {}).items():
        gold = info["eval_obs"][test]
        if pred != gold:
            return f"{test[:60]!r}: submitted {pred} vs gold {gold}"[:220]
    return "unknown"


async def validate(runtime: Runtime, task: Task) -> dict[str, Any]:
    async with make_environment("python", runtime) as env:
        await env.reset(task)
        step = await env.step(task.gold_text)
        name = MbppCheck.of(task.gold_text, task.meta, strict=runtime.reward_mode == "strict").gold_name
        submitted = await env.step(f"submit {name or ''}")
        reward = submitted.reward
        return {"task": task.index, "reward": reward,
                "cause": "" if reward == 1 else cause(step.observation, submitted.info)}


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    tasks = load_tasks("mbpp", resolve_data_dir(args.data_dir))[: args.limit]
    queue: asyncio.Queue[Task] = asyncio.Queue()
    for task in tasks:
        queue.put_nowait(task)
    results: list[dict[str, Any]] = []
    async with Runtime.open(data_dir=resolve_data_dir(args.data_dir), reward_mode=args.reward) as runtime:

        async def worker() -> None:
            while not queue.empty():
                results.append(await validate(runtime, queue.get_nowait()))

        async with asyncio.TaskGroup() as group:
            for _ in range(args.concurrency):
                group.create_task(worker())
    return sorted(results, key=lambda r: r["task"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir")
    parser.add_argument("--reward", choices=("original", "strict"), default="original")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    configure(0)
    start = time.monotonic()
    results = asyncio.run(run(args))
    wall = time.monotonic() - start
    perfect = sum(r["reward"] == 1 for r in results)
    print(f"mode {args.reward}: {perfect}/{len(results)} golds score 1.0 ({perfect / len(results):.3%}); "
          f"wall {wall:.1f} s at concurrency {args.concurrency}")
    for r in results:
        if r["reward"] != 1:
            print(f"  task {r['task']:>3}: reward {r['reward']:.2f}  {r['cause']}")
    print("rewards:", dict(sorted(Counter(round(r["reward"], 3) for r in results).items())))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
