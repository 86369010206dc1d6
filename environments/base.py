"""The environment interface: one episode slot of one kind, gym-like and async.

    async with make_environment("bash", runtime) as env:
        env.spec                                         # its kind's KindSpec (environments/kind.py)
        observation = await env.reset(task)             # the task's query
        step = await env.step("ls /testbed")             # StepResult(observation, reward, done, info)
        reward, info = await env.score()                 # the reward if submitted now; the episode goes on
        step = await env.step("submit")                  # ends the episode and scores it

`step` returns reward 0 and done=False for ordinary actions (as the original did); `score()` is
what the paper's "Try Again" runs called after every action. `skip` ends the episode with reward
0. A kind implements four hooks: `_start`, `_execute`, `_reward` and `_stop`, and may change
`harness_step`, one turn of the paper's multi-turn harness. `reset(task, multi_turn=True)` says
that such a harness drives the episode (a kind may then end it differently: CTF's wrong flag).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from foundation.concurrency import TaskOwner, stop
from foundation.errors import OrchestratorError
from foundation.outcome import FailureClass, Status
from foundation.timeline import span

if TYPE_CHECKING:
    from environments.kind import KindSpec
    from environments.runtime import Runtime
    from tasks import Task

ACTION_EXECUTED = "action_executed"


@dataclass(frozen=True, slots=True)
class ToolServer:
    """An MCP server a task offers its agent (Harbor's `[[environment.mcp_servers]]`): `url` is
    where this process reaches it (a service of the episode's own network, by its address there),
    `task_url` where the agent's container does (as task.toml gives it: the service's name)."""

    name: str
    transport: str  # "streamable-http" or "sse"
    url: str
    task_url: str


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill a task offers its agent (Harbor's `[environment] skills_dir`): a folder in the
    agent's container holding SKILL.md, whose front matter gives its name and description."""

    name: str
    description: str
    path: str  # the folder, in the container


class EpisodeError(OrchestratorError):
    """The environment was used out of order (step before reset, after done, ...)."""


class TaskUnavailable(OrchestratorError):
    """The task can't run here (its data is missing, or its set-up needs the internet)."""


class ScoringFailed(OrchestratorError):
    """The episode could not be scored: its reward is unknown, never the model's 0. A kind's
    `_reward` raises it; the environment then ends the episode, keeps it as `failure`, and the
    sweep stores the episode with this status and class (its turns kept)."""

    status = Status.TASK_ERROR
    failure_class = FailureClass.TASK


class RewardError(ScoringFailed):
    """A task's own reward function raised, or returned something other than a number in [0, 1]."""


class VerifierError(ScoringFailed):
    """A verifier that could not give a reward: it timed out, could not start, or wrote no reward file."""

    status = Status.VERIFIER_ERROR
    failure_class = FailureClass.VERIFIER


class VerifierOffline(VerifierError):
    """A verifier that failed for want of the internet its container did not have: the setting's
    failure (a task that needs the internet, run without it), never the model's 0."""

    status = Status.VERIFIER_OFFLINE
    failure_class = FailureClass.NETWORK


class VerifierTimedOut(VerifierError):
    """A verifier that ran past its time: an agent that did nothing would wait it out again."""


@dataclass(frozen=True, slots=True)
class StepResult:
    observation: str
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:  # `obs, reward, done, info = await env.step(a)`, as in gym
        return iter((self.observation, self.reward, self.done, self.info))


@dataclass(frozen=True, slots=True)
class HarnessStep:
    """One turn of the paper's multi-turn harness (`harness_step`): what the action's run gave and
    how the turn scored it."""

    reward: float
    observation: str
    executed: bool
    breakdown: dict[str, Any] | None = None  # the parts of the reward this turn computed, where the kind has them


class EpisodeEnvironment(Protocol):
    """What a strategy drives and a sweep's runner holds: an Environment on this machine, or one on
    a cluster's host (orchestrator/cluster/remote.py, RemoteEnvironment), call for call."""

    @property
    def kind(self) -> str: ...

    @property
    def spec(self) -> KindSpec:
        """The kind's spec, resolved once for the episode: what the strategies read of the kind."""
        ...

    @property
    def done(self) -> bool: ...

    @property
    def failure(self) -> ScoringFailed | None:
        """Why the episode could not be scored, if it could not."""
        ...

    @property
    def pending_step(self) -> int | None:
        """A multi-step task run a step a run (its task's meta `step_runs`): the next step's index
        once a step's submit ended the run, else None (agents/episode.py, play)."""
        ...

    async def reset(self, task: Task, *, multi_turn: bool = False) -> str: ...

    def begin_reset(self, task: Task, *, multi_turn: bool = False) -> asyncio.Future[str]: ...

    async def ready(self) -> None: ...

    async def step(self, action: str) -> StepResult: ...

    async def score(self) -> tuple[float, dict[str, Any]]: ...

    async def harness_step(self, action: str) -> HarnessStep: ...

    def observation_rows(self) -> list[Any] | None: ...

    def breakdown(self) -> dict[str, Any] | None: ...

    def tool_servers(self) -> list[ToolServer]:
        """The MCP servers the task offers, reachable now (after reset); [] for most tasks."""
        ...

    def skills(self) -> list[Skill]:
        """The skills the task offers (after reset); [] for most tasks."""
        ...

    async def close(self) -> None: ...


class Environment(ABC):
    """One episode at a time; several instances run side by side, each with its own container."""

    kind: ClassVar[str]
    spec: ClassVar[KindSpec]  # set by `register` (environments/kind.py): the class is its kind's
    scores_every_action: ClassVar[bool] = True  # see harness_step

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.task: Task | None = None
        self.observation: str | None = None
        self.done = False
        self.reward: float | None = None
        self.history: list[tuple[str, str]] = []
        self.multi_turn = False
        self.score_info: dict[str, Any] = {}  # the info of the last score or submission (the reward's terms)
        self.failure: ScoringFailed | None = None  # why the episode could not be scored, if it could not
        self.pending_step: int | None = None  # see EpisodeEnvironment.pending_step
        self._resetting: asyncio.Task[str] | None = None
        self._tasks = TaskOwner(f"{self.kind}-environment")

    async def __aenter__(self) -> Environment:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def reset(self, task: Task, *, multi_turn: bool = False) -> str:
        """Start an episode of `task` (ending any running one) and return its query. `multi_turn`:
        the episode is driven by a multi-turn harness (the agent may go on after a wrong answer)."""
        if task.kind != self.kind:
            raise EpisodeError(f"a {self.kind} environment can't run {task.kind} task {task.id}")
        if reason := task.unavailable:
            raise TaskUnavailable(f"task {task.id} is unavailable here: {reason}")
        await self._end()
        self.task, self.done, self.reward, self.history, self.failure = task, False, None, [], None
        self.pending_step = None
        self.multi_turn = multi_turn
        await self._start(task)
        self.observation = task.query
        return task.query

    def note(self, action: str, observation: str) -> None:
        """An action an agent ran itself, in the container (one installed there, the terminus
        harness), and what it printed: kept as if it had run here, so that a kind that judges the
        last output (the Bash reward, a reward of yours) or the trajectory (Harbor's) sees it."""
        self.history.append((action, observation))
        self.observation = observation

    def begin_reset(self, task: Task, *, multi_turn: bool = False) -> asyncio.Future[str]:
        """`reset(task)` in the background, so that an agent's first model call need not wait for
        a container or a connection. `step()` and `score()` wait for it first and raise its error,
        if it had one; `close()` cancels it if it is still running, and waits for it either way."""
        self._resetting = self._tasks.start(self.reset(task, multi_turn=multi_turn), name=f"reset {task.id}")
        return self._resetting

    async def ready(self) -> None:
        """Wait for a reset begun with `begin_reset`, raising its error."""
        if self._resetting is not None:
            await self._resetting  # kept until it succeeded: close() must still wait for a cancelled one
            self._resetting = None

    async def step(self, action: str) -> StepResult:
        await self.ready()
        if self.task is None:
            raise EpisodeError("step() before reset()")
        if self.done:
            raise EpisodeError(f"step() after the episode of {self.task.id} ended")
        self.score_info = {}  # a turn's breakdown is the scoring it did, if any
        word = action.strip().split(maxsplit=1)
        if word and word[0] == "submit":
            return await self._submit(word[1] if len(word) > 1 else "")
        if action.strip() == "skip":
            self.done, self.reward = True, 0.0
            return StepResult("skipped", 0.0, True, {ACTION_EXECUTED: True})
        with span("action"):
            observation, executed = await self._execute(action)
        self.observation = observation
        self.history.append((action, observation))
        return StepResult(observation, 0.0, False, {ACTION_EXECUTED: executed})

    async def _submit(self, argument: str) -> StepResult:
        self.history.append((f"submit {argument}".strip(), self.observation or ""))
        try:
            with span("reward"):
                reward, info = await self._reward(argument)
        except ScoringFailed as exc:
            return self._unscored(exc)
        self.done, self.reward, self.score_info = True, reward, info
        info[ACTION_EXECUTED] = True
        return StepResult(self.observation or "", reward, True, info)

    async def score(self) -> tuple[float, dict[str, Any]]:
        """The reward of the current state, as if submitted now, without ending the episode (unless
        it can't be scored: then it ends, with `failure` set, and the reward is 0)."""
        await self.ready()
        if self.task is None:
            raise EpisodeError("score() before reset()")
        try:
            with span("reward"):
                reward, self.score_info = await self._reward("")
        except ScoringFailed as exc:
            return 0.0, self._unscored(exc).info
        return reward, self.score_info

    def _unscored(self, failure: ScoringFailed) -> StepResult:
        """End the episode on a scoring failure: its reward is unknown (the sweep stores the failure)."""
        self.done, self.reward, self.failure = True, 0.0, failure
        self.score_info = {"scoring_failed": str(failure)}
        self.observation = f"The episode could not be scored: {failure}"
        return StepResult(self.observation, 0.0, True, {ACTION_EXECUTED: True, **self.score_info})

    def breakdown(self) -> dict[str, Any] | None:
        """The parts of the last reward this turn computed (None when it computed none): numbers,
        flags and short texts a reader can explain a score with. Kinds with a reward of parts say."""
        return None

    async def harness_step(self, action: str) -> HarnessStep:
        """One turn of the paper's multi-turn harness. `submit` and `skip` end the episode; any
        other action runs. Where the kind's harness scored every action (`scores_every_action`:
        Bash, SQL), an action, and a `skip`, is scored "if submitted now"; elsewhere they get 0."""
        stripped = action.strip()
        if stripped == "skip":  # ends the episode; eval_n_turn then submitted the state as it was
            reward = (await self.score())[0] if self.scores_every_action else 0.0
            step = await self.step(stripped)
            self.reward = reward
            return self.harness_turn(reward, step.observation, True)
        if stripped.startswith("submit"):
            step = await self.step(stripped)
            return self.harness_turn(step.reward, step.observation, True)
        step = await self.step(action)
        reward = (await self.score())[0] if self.scores_every_action else 0.0
        return self.harness_turn(reward, step.observation, bool(step.info.get(ACTION_EXECUTED)))

    def harness_turn(self, reward: float, observation: str, executed: bool) -> HarnessStep:
        """The turn's result, with the parts of the reward it computed."""
        return HarnessStep(reward, observation, executed, self.breakdown())

    def tool_servers(self) -> list[ToolServer]:
        """The MCP servers the task offers its agent, reachable from this process (after reset)."""
        return []

    def skills(self) -> list[Skill]:
        """The skills the task offers its agent (after reset)."""
        return []

    def observation_rows(self) -> list[Any] | None:
        """The last action's result as rows, where the kind has them (SQL), else None: the
        paper's harness clipped such an observation by rows, not characters."""
        return None

    async def close(self) -> None:
        resetting, self._resetting = self._resetting, None
        # The episode ended before using its reset (its model failed): stopped, and waited for
        # (what it leased is leased, to be ended below; its error is moot).
        await stop(resetting)
        await self._end()
        self.task = None

    async def _end(self) -> None:
        if self.task is not None:
            await self._stop()

    # ---------------------------------------------------------------- hooks for each kind

    @abstractmethod
    async def _start(self, task: Task) -> None:
        """Get a pristine place for the episode (lease a container, open a connection)."""

    @abstractmethod
    async def _execute(self, action: str) -> tuple[str, bool]:
        """Run one action; return its observation and whether it executed."""

    @abstractmethod
    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        """Score the current state. `argument` is what followed `submit` (a flag, a function name)."""

    @abstractmethod
    async def _stop(self) -> None:
        """Give the episode's resources back. Must not fail on cancellation."""


def _held_to_the_protocol(env: Environment) -> EpisodeEnvironment:
    """Never called: the type checker holds every Environment to EpisodeEnvironment here."""
    return env
