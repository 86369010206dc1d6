"""The agent interfaces: a Model answers prompts, a Strategy runs one episode with a Model.

    strategy = get_strategy("try_again")
    model = resolve_model("oracle", client=...)        # or "openai/gpt-4o", or "replay:FILE"
    outcome = await strategy.run(env, task, model, max_turns=10)

Every model, the offline ones included, goes through the same path: it returns text, from which
the strategy takes the action (a fenced code block), so prompting and parsing are exercised even
without an API key.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from environments.base import Environment
    from tasks import Task

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}
EpisodeStatus = Literal["submitted", "max_turns", "solved", "model_error", "budget_exhausted"]


class Model(Protocol):
    """A source of assistant messages. `task` and `turn` let offline models (oracle, replay) answer
    without reading the prompt; LLM-backed models ignore them."""

    name: str

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int) -> str: ...


@dataclass
class Turn:
    output: str  # the model's whole answer
    action: str | None  # the code taken from it; None when it held no code (nothing executed)
    observation: str
    reward: float
    executed: bool


@dataclass
class EpisodeOutcome:
    task_id: str
    turns: list[Turn] = field(default_factory=list)
    status: EpisodeStatus = "max_turns"
    error: str | None = None

    @property
    def reward(self) -> float:
        """The best reward of the episode (the paper's success is best reward == 1)."""
        return max((t.reward for t in self.turns), default=0.0)

    @property
    def success(self) -> bool:
        return self.status != "budget_exhausted" and self.reward == 1.0


class Strategy(Protocol):
    name: str

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome: ...


# name -> "module:Class", imported on first use
STRATEGIES = {
    "single": "agents.strategies.single:SingleTurn",
    "try_again": "agents.strategies.try_again:TryAgain",
    "react": "agents.strategies.react:ReAct",
    "plan_solve": "agents.strategies.plan_solve:PlanSolve",
}


def get_strategy(name: str, **options: Any) -> Strategy:
    try:
        module, cls = STRATEGIES[name].split(":")
    except KeyError:
        raise ConfigError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}") from None
    return getattr(importlib.import_module(module), cls)(**options)
