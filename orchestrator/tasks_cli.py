"""`python -m orchestrator tasks check DIR`: the authoring loop for tasks of your own.

DIR is an environment of your own (a directory with environment.toml) or Harbor task folders (one,
or a folder of them). Each task's image is built, then two agents run it in a fresh container: the
oracle (the record's gold, or Harbor's solution/solve.sh), which must score 1, and an agent that
does nothing but submit, which must score below 1. One line per task says which held, or why not
(a verifier error, a reward function that raised, a task we can't run here).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from environments import make_environment
from environments.base import TaskUnavailable
from environments.kind import gold_actions
from environments.runtime import Runtime
from foundation.errors import ConfigError
from orchestrator.images.ensure import ensure_images
from orchestrator.tasksets import of_directory
from tasks import Task

NOTHING = ["submit"]  # the agent that does nothing


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tasks", help="tasks of your own: check that each is solvable and not trivial")
    cmds = parser.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    check = cmds.add_parser("check", help="build each task, run its oracle (must score 1) and an agent that does "
                            "nothing (must score below 1): one line per task")
    check.add_argument("dir", type=Path, metavar="DIR", help="an environment of your own (with environment.toml), "
                       "a Harbor task folder, or a folder of them")
    check.add_argument("--only", action="append", metavar="TASK", help="only this task (its index, or a Harbor "
                       "folder's name); repeatable")
    check.add_argument("--concurrency", type=int, default=4, help="tasks checked at once")
    check.add_argument("--allow-internet", action="store_true", help="Harbor: give the network to tasks whose "
                       "task.toml allows the internet")
    check.set_defaults(handler=run)


@dataclass(frozen=True)
class Check:
    task: Task
    oracle: float | None
    nothing: float | None
    problem: str  # "": as it should be
    seconds: float

    @property
    def name(self) -> str:
        return str(self.task.meta.get("name", self.task.index))

    def line(self) -> str:
        verdict = "ok  " if not self.problem else ("skip" if self.problem.startswith("unavailable") else "FAIL")
        scores = f"oracle {_score(self.oracle)}, nothing {_score(self.nothing)}"
        return f"{verdict} {self.name:<28} {scores:<28} {self.seconds:5.1f} s  {self.problem}".rstrip()


async def run(args: argparse.Namespace) -> int:
    task_set = of_directory(args.dir, allow_internet=args.allow_internet)
    tasks = [t for t in task_set.tasks if not args.only or str(t.meta.get("name", t.index)) in args.only]
    if not tasks:
        raise ConfigError(f"no task of {args.dir} is named {', '.join(args.only)}")
    print(f"{len(tasks)} tasks in {args.dir}; building their {len(task_set.images)} images where needed",
          file=sys.stderr)
    await ensure_images(task_set.images, None)
    gate = asyncio.Semaphore(max(args.concurrency, 1))
    async with Runtime.open(images=task_set.pools()) as runtime:

        async def checked(task: Task) -> Check:
            async with gate:
                result = await check(runtime, task)
            print(result.line(), flush=True)
            return result

        results = await asyncio.gather(*(checked(task) for task in tasks))
    bad = [r for r in results if r.problem and not r.problem.startswith("unavailable")]
    skipped = sum(1 for r in results if r.problem.startswith("unavailable"))
    print(f"{len(results)} tasks: {len(results) - len(bad) - skipped} ok, {len(bad)} not, {skipped} unavailable here")
    return 1 if bad else 0


async def check(runtime: Runtime, task: Task) -> Check:
    """The oracle's reward and the idle agent's, and what is wrong with them ("" when nothing)."""
    start = time.monotonic()
    if reason := task.meta.get("unavailable"):
        return Check(task, None, None, f"unavailable here: {reason}", 0.0)
    oracle, failure = await episode(runtime, task, gold_actions(task))
    problem = ""
    if failure:
        problem = f"the oracle's episode: {failure}"
    elif oracle != 1.0:
        problem = "the oracle scores below 1: check the gold (or solution/solve.sh) and the reward"
    nothing, failure = await episode(runtime, task, NOTHING)
    if failure and not problem:
        problem = f"doing nothing: {failure}"
    elif nothing is not None and nothing >= 1.0 and not problem:
        problem = "doing nothing scores 1: the reward (or test.sh) passes a task that is not done"
    return Check(task, oracle, nothing, problem, time.monotonic() - start)


async def episode(runtime: Runtime, task: Task, actions: list[str]) -> tuple[float | None, str]:
    """Run `actions` (one a turn, then `submit` if the episode is still open) in a fresh episode:
    its reward, and why it could not be scored ("" when it was)."""
    try:
        async with make_environment(task.env, runtime) as env:
            await env.reset(task, multi_turn=True)
            step = None
            for action in actions:
                if env.done:
                    break
                step = await env.step(action)
            if not env.done:
                step = await env.step("submit")
            assert step is not None
            if env.failure is not None:
                return None, str(env.failure)
            return step.reward, ""
    except TaskUnavailable as exc:
        return None, str(exc)


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"
