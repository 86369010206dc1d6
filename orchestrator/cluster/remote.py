"""The driver's side of a host agent: what strategies use of `Environment`, served by an
environment on another node. A strategy runs unchanged against it.

    async with RemoteEnvironment(agent, "bash") as env:
        outcome = await strategy.run(env, task, model, max_turns=5)
    env.hosts                # the host of every step, in order

Each call goes to the agent over its `channel` when one is given (orchestrator/cluster/channel.py:
a websocket, about 0.03 ms a call), else as an actor call (`actor.method.remote(...)`, about 1 ms);
the reply carries the state the strategies read without awaiting (`done`, `observation_rows()`),
kept here until the next one.

Ray's errors end here: an error raised by the environment on the host is raised again as itself
(an EpisodeError stays one), and an agent that is gone (its worker or node died) is `HostLost`.
With `lost` (a future the sweep's heartbeat completes when the host stops answering), a call in
flight ends as `HostLost` at once instead of waiting for Ray to declare the node dead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import ray.exceptions

from environments.base import EpisodeEnvironment, HarnessStep, ScoringFailed, Skill, StepResult, ToolServer
from environments.kind import kind_spec
from foundation.concurrency import TaskOwner, stop
from foundation.timeline import span
from orchestrator.cluster.remote_calls import CLOSE, HARNESS_STEP, OPEN_ENV, OPEN_RESET, RESET, SCORE, STEP, RemoteCall, Reply
from orchestrator.cluster.channel import Channel, HostLost

if TYPE_CHECKING:
    from tasks import Task

__all__ = ["HostLost", "RemoteEnvironment"]
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class RemoteEnvironment:
    def __init__(self, agent: Any, kind: str, lost: asyncio.Future[None] | None = None,
                 close_later: Callable[[asyncio.Future[Any]], None] | None = None,
                 channel: Channel | None = None) -> None:
        """`lost`: completed when the host is known to be lost. `close_later`: takes the answer of
        the environment's `close` call, which then runs off the episode's path (the sweep waits for
        them all before its hosts shut down); without it, leaving waits for the close. `channel`:
        the agent's direct channel, for every call (else Ray's actor calls)."""
        self.agent = agent
        self.channel = channel
        self.kind = kind
        self.spec = kind_spec(kind)  # what the strategies read of the kind, resolved once (environments/kind.py)
        self.lost = lost
        self.close_later = close_later
        self.env_id: int | None = None
        self.task: Task | None = None
        self.done = False
        self.hosts: list[str] = []  # the host that served each call, in order
        self.failure: ScoringFailed | None = None  # why the episode could not be scored (environments.base)
        self.pending_step: int | None = None  # as the host's environment says (environments.base)
        self._rows: list[Any] | None = None
        self._breakdown: dict[str, Any] | None = None
        self._resetting: asyncio.Task[str] | None = None
        self._tasks = TaskOwner(f"remote-{kind}")

    async def __aenter__(self) -> RemoteEnvironment:
        return self  # the environment opens on the host with its first reset (one call for both), or `open`

    async def open(self) -> None:
        """Open the environment on the host now (it counts as in flight there from here)."""
        if self.env_id is None:
            try:
                self.env_id = await self._send(OPEN_ENV, self.kind)
            except ray.exceptions.RayActorError as exc:
                raise HostLost(f"the host agent is gone before the episode began: {type(exc).__name__}") from exc

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def host(self) -> str | None:
        return self.hosts[-1] if self.hosts else None

    async def reset(self, task: Task, *, multi_turn: bool = False) -> str:
        self.task = task
        if self.env_id is None:
            return self._took(await self._sent(OPEN_RESET, self.kind, task, multi_turn))
        return await self._on_env(RESET, task, multi_turn)

    def begin_reset(self, task: Task, *, multi_turn: bool = False) -> asyncio.Future[str]:
        """As `Environment.begin_reset`: the reset runs while the first answer is asked for."""
        self._resetting = self._tasks.start(self.reset(task, multi_turn=multi_turn), name=f"reset {task.id}")
        return self._resetting

    async def ready(self) -> None:
        if self._resetting is not None:
            await self._resetting
            self._resetting = None

    # The episode's timeline sees each call to the host as a whole: an action there (with its
    # scoring, in a harness step), or a scoring.
    async def step(self, action: str) -> StepResult:
        await self.ready()
        with span("reward" if action.strip().startswith("submit") else "action"):
            return await self._on_env(STEP, action)

    async def score(self) -> tuple[float, dict[str, Any]]:
        await self.ready()
        with span("reward"):
            return await self._on_env(SCORE)

    async def harness_step(self, action: str) -> HarnessStep:
        await self.ready()
        with span("action"):
            return await self._on_env(HARNESS_STEP, action)

    def observation_rows(self) -> list[Any] | None:
        return self._rows

    def breakdown(self) -> dict[str, Any] | None:
        return self._breakdown

    def tool_servers(self) -> list[ToolServer]:
        return []  # a task's MCP servers are reached from the process beside them: not across hosts (docs/cluster.md)

    def skills(self) -> list[Skill]:
        return []

    async def close(self) -> None:
        resetting, self._resetting = self._resetting, None
        await stop(resetting)
        env_id, self.env_id = self.env_id, None
        if env_id is None or (self.lost is not None and self.lost.done()):
            return  # a lost host has nothing left to give back
        with contextlib.suppress(ray.exceptions.RayActorError, HostLost):
            closing = await self._submit(CLOSE, env_id)
            if self.close_later is not None:
                self.close_later(closing)
                return
            await asyncio.shield(self._answer(closing, CLOSE.name))  # a cancelled episode still gives it back

    async def _on_env(self, call: RemoteCall[Concatenate[int, P], Reply[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """A call on this environment (opened first: a step before any reset gets the host's
        environment to say what is wrong)."""
        await self.open()
        assert self.env_id is not None
        return self._took(await self._sent(call, self.env_id, *args, **kwargs))

    async def _sent(self, call: RemoteCall[P, Reply[T]], *args: P.args, **kwargs: P.kwargs) -> Reply[T]:
        """The call's reply; the environment's own error raised as itself, a host gone as HostLost."""
        try:
            return await self._send(call, *args, **kwargs)
        except ray.exceptions.RayTaskError as exc:
            raise exc.cause from None  # the environment's own error, as a local one would raise it
        except ray.exceptions.RayActorError as exc:
            raise HostLost(f"the host agent of {self.host or 'this environment'} is gone during {call.name}: "
                           f"{type(exc).__name__}") from exc

    def _took(self, reply: Reply[T]) -> T:
        """The reply's value, its state kept for the strategies to read."""
        self.env_id, self.done, self._rows = reply.env_id, reply.done, reply.rows
        self._breakdown, self.failure, self.pending_step = reply.breakdown, reply.failure, reply.pending_step
        self.hosts.append(reply.host)
        return reply.value

    async def _send(self, call: RemoteCall[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        answer: R = await self._answer(await self._submit(call, *args, **kwargs), call.name)
        return answer

    async def _submit(self, call: RemoteCall[P, R], *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[Any]:
        """The call sent (by its name and its arguments, as the table says); its answer to come."""
        assert not kwargs, "a remote call's arguments go by position"
        if self.channel is not None:
            return await self.channel.submit(call.name, *args)
        return asyncio.wrap_future(getattr(self.agent, call.name).remote(*args).future())

    async def _answer(self, answer: asyncio.Future[Any], method: str) -> Any:
        """The call's value, or HostLost as soon as the host is known to be lost (the call is
        given up here; the host finishes or drops it)."""
        lost = self.lost
        if lost is None:
            return await answer
        if lost.done():
            answer.cancel()
            raise HostLost(f"the host of this environment was lost before {method}")
        cancel = _Canceller(answer)
        lost.add_done_callback(cancel)
        try:
            return await answer
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if lost.done() and not (task is not None and task.cancelling()):
                raise HostLost(f"the host of this environment stopped answering during {method}") from None
            raise
        finally:
            lost.remove_done_callback(cancel)


class _Canceller:
    """Cancels a call when the host's `lost` future completes."""

    __slots__ = ("call",)

    def __init__(self, call: asyncio.Future[Any]) -> None:
        self.call = call

    def __call__(self, lost: asyncio.Future[None]) -> None:
        self.call.cancel()


def _held_to_the_protocol(env: RemoteEnvironment) -> EpisodeEnvironment:
    """Never called: the type checker holds the remote environment to EpisodeEnvironment here."""
    return env
