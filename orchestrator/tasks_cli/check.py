"""`tasks check DIR`: each task's image built, then two agents run it in a fresh container: the
oracle (the record's gold, or Harbor's solution/solve.sh), which must score 1, and an agent that
does nothing but submit, which must score below 1. One line per task says which held, or why not,
with the cause: solve.sh's exit status and last lines, the verifier's last lines, the build's
failing step (apt's `E:` line), the reward function's file and line. What each verifier wrote is
kept per task in a folder whose path is printed.

Verdicts: `ok`; `warn` (it works, but a task.toml key looks like a typo of one Harbor knows); `skip`
(it asks for what can't run here: a GPU, MCP servers); `FAIL` (the task is broken: a malformed or
missing file, a build that fails, an oracle below 1, a no-op that passes). The exit status is 1
when any task is FAIL or warn.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agents.base import Turn, get_strategy
from agents.episode import run_episode
from agents.models import OracleModel
from environments import make_environment
from environments.base import EpisodeEnvironment, TaskUnavailable, VerifierTimedOut
from environments.harbor import SOLVE_FAILED, HarborEnv
from environments.runtime import Runtime
from foundation.concurrency import TaskOwner, all_of
from foundation.settings import cache_dir
from foundation.timeline import Timeline
from orchestrator.images.engine_build import Line
from orchestrator.images.ensure import ensure_each
from orchestrator.tasksets.resolve import TaskSet
from tasks import Task

TICK = 15.0  # seconds between progress lines while tasks run
KEPT = ("test-stdout.txt", "reward.txt", "reward.json")  # what a verifier leaves in /logs/verifier
SHOWN = 3  # last lines of a script's output in a task's line
Say = Callable[[str], None]


@dataclass(frozen=True)
class Run:
    """One episode of a check."""

    reward: float | None
    problem: str  # why it could not be scored; "" when it was
    timed_out: bool = False  # the verifier ran past its time
    cause: str = ""  # below 1: what the scripts said (solve.sh's status, the verifier's last lines)
    files: dict[str, str] = field(default_factory=dict)  # kept: file name -> text


@dataclass(frozen=True)
class Check:
    task: Task
    oracle: float | None
    nothing: float | None
    problem: str  # "": as it should be
    seconds: float
    verdict: str = ""

    @property
    def name(self) -> str:
        return str(self.task.meta.get("name", self.task.index))

    def line(self) -> str:
        scores = f"oracle {_score(self.oracle)}, nothing {_score(self.nothing)}"
        return f"{self.verdict:<4} {self.name:<28} {scores:<28} {self.seconds:5.1f} s  {self.problem}".rstrip()


class Checker:
    """Runs the checks of one task set on one runtime, says what runs while it runs, keeps files."""

    def __init__(self, runtime: Runtime, kept: Path, say: Say, tick: float = TICK) -> None:
        self.runtime, self.kept, self.say, self.every = runtime, kept, say, tick
        self.running: dict[str, tuple[str, Timeline]] = {}  # task -> (the agent it runs, its episode's timeline)

    async def check(self, task: Task) -> Check:
        """The oracle's reward and the idle agent's, and what is wrong with them ("" when nothing)."""
        start = time.monotonic()
        oracle = await self._episode(task, "oracle")
        if oracle.timed_out:
            self.running.pop(task.id, None)
            return _verdict(task, Check(task, None, None, f"the oracle's episode: {oracle.problem} (doing nothing: not "
                                        "run, its verifier would time out too)", time.monotonic() - start))
        nothing = await self._episode(task, "nothing")
        self.running.pop(task.id, None)
        problem = ""
        if oracle.problem:
            problem = f"the oracle's episode: {oracle.problem}"
        elif oracle.reward != 1.0:
            problem = f"the oracle scores {_score(oracle.reward)}: {oracle.cause or 'check the gold and the reward'}"
        elif nothing.problem:
            problem = f"doing nothing: {nothing.problem}"
        elif nothing.reward is not None and nothing.reward >= 1.0:
            problem = "doing nothing scores 1: the reward (or test.sh) passes a task that is not done"
        return _verdict(task, Check(task, oracle.reward, nothing.reward, problem, time.monotonic() - start))

    async def _episode(self, task: Task, agent: str) -> Run:
        """The `gold` agent's episode ("oracle") or the `nop` agent's ("nothing"), as a sweep plays
        one (agents/episode.py: every step left submitted); its reward, and why it could not be scored."""
        timeline, files = Timeline(), {}
        self.running[task.id] = (agent, timeline)

        async def keep(env: EpisodeEnvironment) -> None:  # before the lease ends
            files.update(await _verifier_files(env))

        try:
            played = await run_episode(make_environment(task.kind, self.runtime),
                                       get_strategy("gold" if agent == "oracle" else "nop"), task, OracleModel(),
                                       max_turns=1, timeline=timeline, before_release=keep)
        except TaskUnavailable as exc:
            return Run(None, str(exc))
        turns = played.outcome.turns
        files["steps.txt"] = _transcript(turns)
        self._keep(task, agent, files)
        if played.failure is not None:
            return Run(None, str(played.failure), isinstance(played.failure, VerifierTimedOut), files=files)
        if not turns:  # the environment ended it before the agent acted
            return Run(None, "the episode ended before its first action", files=files)
        return Run(turns[-1].reward, "", cause=_cause(turns), files=files)

    def _keep(self, task: Task, agent: str, files: dict[str, str]) -> None:
        folder = self.kept / _slug(task.name or str(task.index)) / agent
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")

    async def tick(self) -> None:
        """Every few seconds (TICK), what each running task is doing and for how long."""
        while True:
            await asyncio.sleep(self.every)
            doing = [f"{task.split('/', 1)[-1]}: {_doing(agent, timeline)}" for task, (agent, timeline) in self.running.items()]
            if doing:
                self.say(f"... running: {'; '.join(doing)}")


async def check_all(task_set: TaskSet, tasks: list[Task], *, concurrency: int, say: Say,
                    tick: float = TICK) -> list[Check]:
    """Build what the tasks need (several at once), then check each task, printing its line as it
    ends; every task has its line, whatever went wrong with the others."""
    wanted = sorted({t.image for t in tasks if t.image and t.unavailable is None})
    failed = await ensure_each(wanted, None, progress=_builds(say))
    kept = cache_dir() / "tasks-check" / f"{_slug(task_set.label)}-{time.strftime('%Y%m%d-%H%M%S')}"
    images = [image for image in wanted if image not in failed]
    gate = asyncio.Semaphore(max(concurrency, 1))
    async with Runtime.open(images={i: c for i, c in task_set.pools().items() if i in images}) as runtime:
        checker = Checker(runtime, kept, say, tick)

        async def checked(task: Task) -> Check:
            async with gate:
                result = await _checked(checker, task, failed)
            print(result.line(), flush=True)
            return result

        async with TaskOwner("tasks-check") as owner:
            owner.spawn(checker.tick(), name="progress")
            results = await all_of(checked(task) for task in tasks)
    if kept.exists():
        say(f"what each verifier wrote, per task: {kept}")
    return list(results)


async def _checked(checker: Checker, task: Task, failed: dict[str, str]) -> Check:
    if reason := task.unavailable:
        reason = str(reason).removeprefix(f"{task.name}: ")
        return _verdict(task, Check(task, None, None, reason if task.malformed else
                                    f"unavailable here: {reason}", 0.0))
    if task.image in failed:
        return _verdict(task, Check(task, None, None, f"its image failed to build: {failed[task.image]}", 0.0))
    return await checker.check(task)


def _verdict(task: Task, check: Check) -> Check:
    warnings = list(task.meta.get("warnings") or [])
    if check.problem.startswith("unavailable here") and not task.malformed:
        verdict = "skip"
    elif check.problem:
        verdict = "FAIL"
    else:
        verdict = "warn" if warnings else "ok"
    problem = "; ".join([check.problem, *warnings] if check.problem else warnings)
    return Check(check.task, check.oracle, check.nothing, problem, check.seconds, verdict)


def _doing(agent: str, timeline: Timeline) -> str:
    """What an episode does now, and since when: the agent, or its verifier, running so long."""
    what = f"{agent}: the verifier" if timeline.running == "reward" else agent
    return f"{what} {time.time() - timeline.origin:.0f} s"


async def _verifier_files(env: object) -> dict[str, str]:
    """What the verifier left in /logs/verifier (a Harbor task's), read before the lease ends."""
    if not isinstance(env, HarborEnv) or env.sandbox is None:
        return {}
    found = {}
    for name in KEPT:
        result = await env.sandbox.exec(["cat", f"/logs/verifier/{name}"], cwd="/", timeout=30.0, cap=1 << 20)
        if result.exit_code == 0:
            found[name] = result.output
    return found


def _cause(turns: list[Turn]) -> str:
    """Why an episode scored below 1, in the scripts' own words: solve.sh's exit status and last
    lines when it failed, and the verifier's (or the last action's) last lines."""
    parts = []
    for turn in turns:
        found = re.search(re.escape(SOLVE_FAILED) + r" (\d+)\]", turn.observation)
        if found:
            parts.append(f"solve.sh exited {found.group(1)}: {_last_lines(turn.observation[: found.start()])}")
    if turns:
        last = turns[-1]
        verifier = last.action == "submit" and last.observation.startswith("Verifier")
        output = last.observation.split("\n", 1)[1] if verifier and "\n" in last.observation else last.observation
        parts.append(f"{'the verifier' if verifier else 'the last action'}: {_last_lines(output)}")
    return "; ".join(parts)


def _last_lines(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(line[:160] for line in lines[-SHOWN:]) if lines else "(no output)"


def _transcript(turns: list[Turn]) -> str:
    return "".join(f"$ {_short(turn.action or '')}\n{turn.observation}\n(reward {turn.reward:g})\n\n" for turn in turns)


def _short(action: str) -> str:
    return action if len(action) <= 400 else f"{action[:200]}… ({len(action)} characters)"


def _builds(say: Say) -> Callable[[Line], None]:
    def show(line: Line) -> None:
        if not line.detail and line.text.startswith(("building ", "built ", "failed: ", "using the prebuilt ")):
            say(f"[{line.image}] {line.text}")
    return show


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "task"


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
