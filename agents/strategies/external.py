"""An agent of yours (agents/own.py) run as a strategy: the episode and the model handed to it, each
step a turn of the episode's record, the model's every call the sweep's.

    strategy = ExternalStrategy(load_agent("my_agents.py:CoT", base_dir), gateway)
    outcome = await play(strategy, env, task, model, max_turns=10)

A step runs as the original harness runs an action of the kind (`harness_step`); the model's text
since the last step is that turn's output. A plain `def run` runs in a worker thread: its calls
wait for the event loop, and once the episode has ended (its deadline, an error) they raise at
once, so the thread ends with its next call. The episode's status: out of turns, submitted or
solved as for the built-in strategies; `model_error` or `budget_exhausted` when a model call
failed (through the model, or through the gateway's SDK door); `agent_error` when the agent raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from agents.base import EpisodeOutcome, Message, Model, Turn
from agents.llm.errors import ModelError
from agents.own import AgentError, Answer, GatewayAccess, LoadedAgent, OutOfTurns, Step
from agents.strategies.turns import failed, finish
from agents.strategies.tools import tool_model, tool_schemas
from foundation.concurrency import in_context
from foundation.errors import OrchestratorError
from foundation.outcome import Status

if TYPE_CHECKING:
    from environments.base import EpisodeEnvironment
    from tasks import Task

T = TypeVar("T")
CALL_TIMEOUT = 3600.0  # seconds a blocking call of a thread's agent may wait (the episode's deadline ends it sooner)


class EpisodeEnded(OrchestratorError):
    """A call of an agent's after its episode ended (its deadline passed, or it failed)."""


class Doors(Protocol):
    """What serves SDK clients (agents/gateway): a door per episode, closed when it ends."""

    def open(self, model: ModelHandle, *, container: str | None = None) -> Door: ...


class Door(Protocol):
    @property
    def access(self) -> GatewayAccess: ...

    def close(self) -> None: ...


Rewrite = Callable[[Answer, Sequence[dict[str, Any]] | None], Answer]


class ModelHandle:
    """The sweep's model for one episode, as an agent (or an SDK client through the gateway) calls
    it: each call is the next turn of the model's, its text the pending output of the next step.
    `log` keeps each call's messages and answer (an installed agent's steps are read from it);
    `rewrite` puts an answer in the agent's own form (an offline model answers in the kind's);
    past `max_calls` calls that offer tools (an agent's steps; the calls it makes for other ends,
    a summary or a title, offer none), or ten times as many calls in all, a call raises OutOfTurns;
    with `every_call`, past `max_calls` calls of any kind (an agent of yours: its turns).
    A call that offers tools is the next turn of an offline model's answers (the oracle's), the
    others are turns of their own."""

    def __init__(self, model: Model, task: Task, *, rewrite: Rewrite | None = None, max_calls: int | None = None,
                 every_call: bool = False) -> None:
        self.model, self.task, self.calls, self.pending = model, task, 0, ""
        self.rewrite, self.max_calls, self.every_call = rewrite, max_calls, every_call
        self.tool_calls = 0  # calls that offered tools
        self.failure: ModelError | None = None  # the first call that failed: the episode's status
        self.closed = False
        self.log: list[tuple[list[dict[str, Any]], Answer]] = []
        # The episode's context (its timeline, where its calls are recorded): made where the episode
        # plays; an agent's calls through the gateway arrive in the gateway's task, which has neither.
        self._episode = contextvars.copy_context()

    @property
    def name(self) -> str:
        return self.model.name

    async def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> Answer:
        if self.closed:
            raise EpisodeEnded(f"the episode of {self.task.id} has ended")
        if self.max_calls is not None and (self.tool_calls >= self.max_calls and tools or self.calls >= 10 * self.max_calls
                                           or self.every_call and self.calls >= self.max_calls):
            raise OutOfTurns(f"the episode's {self.max_calls} turns (model calls) are used up")
        turn, self.calls = (self.tool_calls if tools else self.calls), self.calls + 1
        self.tool_calls += 1 if tools else 0
        try:
            if tools:
                answer = await self._in_episode(
                    tool_model(self.model).complete_tools(list(messages), list(tools), task=self.task, turn=turn))
                result = Answer(answer.text, answer.tool_calls)
            else:
                text = await self._in_episode(
                    self.model.complete(cast(Sequence[Message], messages), task=self.task, turn=turn))
                result = Answer(text)
        except ModelError as error:
            self.failure = self.failure or error
            raise
        if self.rewrite is not None:
            result = self.rewrite(result, tools)
        # the turn's output, as the tools strategy records it: the text, then a line per call
        self.pending = "\n".join([result.text, *(f"{c.name}({c.arguments})" for c in result.tool_calls)]).strip()
        self.log.append((list(messages), result))
        return result

    async def _in_episode(self, call: Coroutine[Any, Any, T]) -> T:
        return await in_context(self._episode, call)


class EpisodeHandle:
    """The Episode an agent drives (agents/own.py): the environment's steps, counted and recorded."""

    def __init__(self, env: EpisodeEnvironment, task: Task, outcome: EpisodeOutcome, model: ModelHandle,
                 max_turns: int, gateway: GatewayAccess | None) -> None:
        self.env, self.task, self.outcome, self.model = env, task, outcome, model
        self.spec = env.spec
        self._max_turns, self._gateway, self.closed = max_turns, gateway, False

    query = property(lambda self: self.task.query)
    task_id = property(lambda self: self.task.id)
    kind = property(lambda self: self.task.kind)
    language = property(lambda self: self.spec.language)
    max_turns = property(lambda self: self._max_turns)
    turns_left = property(lambda self: max(self._max_turns - len(self.outcome.turns), 0))
    done = property(lambda self: self.env.done)
    gateway = property(lambda self: self._gateway)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return tool_schemas(self.spec)

    async def step(self, action: str) -> Step:
        if self.closed:
            raise EpisodeEnded(f"the episode of {self.task.id} has ended")
        if self.env.done:
            raise EpisodeEnded(f"the episode of {self.task.id} has ended: it was submitted")
        if len(self.outcome.turns) >= self._max_turns and action.split(maxsplit=1)[:1] != ["submit"]:
            raise OutOfTurns(f"the episode's {self._max_turns} turns are used up")  # its last word, `submit`, is not
        step = await self.env.harness_step(action)
        self.outcome.turns.append(Turn(self.model.pending, action, step.observation, step.reward, step.executed,
                                       step.breakdown))
        self.model.pending = ""
        return Step(step.observation, step.reward if self.spec.shows_reward or self.env.done else None, self.env.done)

    async def submit(self, answer: str = "") -> Step:
        return await self.step(f"submit {answer}".strip())


class _Blocking:
    """Calls of a thread's agent, run on the event loop; cancelled with the episode."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.pending, self.closed = loop, set[concurrent.futures.Future[Any]](), False

    def wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self.closed:
            coroutine.close()
            raise EpisodeEnded("the episode has ended")
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        self.pending.add(future)
        try:
            return future.result(CALL_TIMEOUT)
        except concurrent.futures.CancelledError:
            raise EpisodeEnded("the episode has ended") from None
        finally:
            self.pending.discard(future)

    def close(self) -> None:
        self.closed = True
        for future in list(self.pending):
            future.cancel()


class BlockingEpisode:
    """An EpisodeHandle for a plain `def run`: the same names, `step` and `submit` blocking."""

    def __init__(self, handle: EpisodeHandle, calls: _Blocking) -> None:
        self._handle, self._calls = handle, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def step(self, action: str) -> Step:
        return self._calls.wait(self._handle.step(action))

    def submit(self, answer: str = "") -> Step:
        return self._calls.wait(self._handle.submit(answer))


class BlockingModel:
    def __init__(self, model: ModelHandle, calls: _Blocking) -> None:
        self._model, self._calls, self.name = model, calls, model.name

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> Answer:
        return self._calls.wait(self._model.complete(messages, tools))


class ExternalStrategy:
    """The Strategy protocol over an agent of yours; `doors` serves its SDK clients (or None)."""

    def __init__(self, agent: LoadedAgent, doors: Doors | None = None) -> None:
        self.agent, self.doors, self.name = agent, doors, agent.name

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        outcome = EpisodeOutcome(task.id)
        await env.reset(task, multi_turn=True)
        # its model calls are its turns too, through the gateway's door as through `episode.model`
        handle_model = ModelHandle(model, task, max_calls=max_turns, every_call=True)
        door = self.doors.open(handle_model) if self.doors is not None else None
        episode = EpisodeHandle(env, task, outcome, handle_model, max_turns, door.access if door else None)
        try:
            await self._run(episode, handle_model)
        except OutOfTurns:
            pass
        except ModelError as error:
            return failed(outcome, error)
        except AgentError as error:
            if handle_model.failure is not None:  # an SDK's error over a model call that failed: the model's
                return failed(outcome, handle_model.failure)
            outcome.status, outcome.error = Status.AGENT_ERROR, str(error)
            return outcome
        finally:
            episode.closed = handle_model.closed = True
            if door is not None:
                door.close()
        if handle_model.failure is not None:  # the agent went on after a failed call: the model's failure
            return failed(outcome, handle_model.failure)
        return finish(outcome, ran_out=len(outcome.turns) >= max_turns and not env.done)

    async def _run(self, episode: EpisodeHandle, model: ModelHandle) -> None:
        """The agent's run; AgentError names where it raised (OutOfTurns and ModelError pass)."""
        try:
            run = self.agent.runner()
            if self.agent.is_async:
                result = await run(episode, model)
            else:
                result = await self._in_thread(run, episode, model)
        except (OutOfTurns, ModelError, asyncio.CancelledError):
            raise
        except Exception as exc:  # noqa: BLE001 — the user's code: any error is that episode's
            raise AgentError(f"{self.agent.where(exc)} raised {type(exc).__name__}: {str(exc)[:300]}") from exc
        if result is not None:
            raise AgentError(f"{self.agent.where()} returned {result!r:.80}; run(episode, model) returns nothing "
                             "(the episode's steps are its result)")

    async def _in_thread(self, run: Any, episode: EpisodeHandle, model: ModelHandle) -> Any:
        calls = _Blocking(asyncio.get_running_loop())
        try:
            return await asyncio.to_thread(run, BlockingEpisode(episode, calls), BlockingModel(model, calls))
        finally:
            calls.close()
