"""The calls an episode makes of its host agent: one typed table, shared by both ends.

    value = await env._on_env(STEP, "ls")         # remote.py: StepResult, as the table says
    STEP.check(agent._step)                       # agent.py: the type checker holds the method to it

The remote environment (remote.py) sends a call by its entry here, over the agent's channel or
as a Ray actor call; the host agent (agent.py) answers it with the method the entry names, and
`held_to_the_table` there has the type checker compare each method with its entry's arguments and
reply. On the wire a call is its name and its arguments, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

from environments.base import HarnessStep, ScoringFailed, StepResult
from tasks import Task

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reply(Generic[T]):
    """A call's value, with the environment's state the strategies read without a call."""

    value: T
    done: bool
    rows: list[Any] | None
    host: str
    env_id: int
    breakdown: dict[str, Any] | None = None
    failure: ScoringFailed | None = None
    pending_step: int | None = None  # a multi-step task's next step, its run to begin (environments.base)


@dataclass(frozen=True, slots=True)
class RemoteCall(Generic[P, R]):
    """One call of the table: its name on the wire; its arguments and reply are the type's."""

    name: str
    opens: bool = False  # its answer holds an environment on the host (a caller that gave up must close it)

    def check(self, method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        """`method`, which the type checker has compared with this entry."""
        return method


OPEN_ENV: RemoteCall[[str], int] = RemoteCall("open_env", opens=True)  # kind -> env_id
OPEN_RESET: RemoteCall[[str, Task, bool], Reply[str]] = RemoteCall("open_reset", opens=True)  # kind, task, multi_turn
RESET: RemoteCall[[int, Task, bool], Reply[str]] = RemoteCall("reset")
STEP: RemoteCall[[int, str], Reply[StepResult]] = RemoteCall("step")
SCORE: RemoteCall[[int], Reply[tuple[float, dict[str, Any]]]] = RemoteCall("score")
HARNESS_STEP: RemoteCall[[int, str], Reply[HarnessStep]] = RemoteCall("harness_step")
CLOSE: RemoteCall[[int], None] = RemoteCall("close")

CALLS: dict[str, RemoteCall[..., Any]] = {call.name: call for call in
                                          (OPEN_ENV, OPEN_RESET, RESET, STEP, SCORE, HARNESS_STEP, CLOSE)}
OPENING = frozenset(call.name for call in CALLS.values() if call.opens)
