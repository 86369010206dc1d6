"""The agent interfaces: a Model answers prompts, a Strategy runs one episode with a Model.

    strategy = get_strategy("try_again")
    model = OracleModel()                              # or LLMModel(client, "openai/gpt-4o")
    outcome = await strategy.run(env, task, model, max_turns=10)

Every model, the offline ones included, goes through the same path: it returns text, from which
the strategy takes the action, so prompting and parsing are exercised even without an API key.

The names `single`, `try_again`, `react`, `plan_solve` and `plan_solve_refine` are the paper's
protocols, as the original's scripts ran them (docs/fidelity.md). The project's own variants,
which take actions from fenced code blocks, have names of their own: `single_fenced`,
`try_again_fenced`, `react_fenced`, `plan_solve_fenced`. Each pair is one strategy loop with the
paper's rules or ours as its `rules` option (agents/strategies/rules.py). And `tools`, which
acts through native function calling: its models are `ToolModel`s, which answer with tool calls;
and `terminus`, which types keystrokes into a terminal (Harbor's Terminus-2 protocol).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agents.llm.transport import ToolCall as ToolCall  # part of a Message: re-exported
from foundation.errors import ConfigError
from foundation.outcome import Status
from foundation.timeline import TurnTiming, turn_timing

if TYPE_CHECKING:
    from environments.base import EpisodeEnvironment
    from tasks import Task

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}
# A message of a dialogue with tools, in OpenAI's form: also an assistant's `tool_calls` (a list)
# and `tool` messages with the `tool_call_id` they answer.
ToolMessage = dict[str, Any]
# agent_error: an agent of yours raised (agents/own.py)
# The form a strategy reads an action from: a fenced code block (the project's variants), the
# paper's parsers ("paper"), a ReAct `Thought N: ... / Action N: execute[...]` answer ("react"),
# or a numbered plan whose steps are the actions ("plan": the paper's Plan & Solve asks for one).
# "terminus": one JSON object of keystrokes (agents/strategies/terminus.py).
AnswerStyle = Literal["fenced", "paper", "react", "plan", "terminus"]


class Model(Protocol):
    """A source of assistant messages. `task`, `turn` and `style` let offline models (oracle,
    replay) answer without reading the prompt, in the form the strategy reads; LLM-backed models
    ignore them (the prompt says the form)."""

    name: str

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int,
                       style: AnswerStyle = "fenced") -> str: ...


@dataclass(frozen=True)
class ToolAnswer:
    """A model's answer when offered tools: its text and the calls it made, in order."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


class ToolModel(Protocol):
    """A model that can answer with function calls (`tools`: OpenAI-format function schemas).
    The oracle and scripted models answer from `task` and `turn`, as in `Model.complete`."""

    name: str

    async def complete_tools(self, messages: Sequence[ToolMessage], tools: Sequence[dict[str, Any]], *,
                             task: Task, turn: int) -> ToolAnswer: ...


@dataclass
class Turn:
    output: str  # the model's whole answer (with tools: its text and a `name(arguments)` line per call)
    action: str | None  # the code taken from it; None when it held no code (nothing executed)
    observation: str
    reward: float
    executed: bool
    breakdown: dict[str, Any] | None = None  # the parts of the reward this turn computed, where the kind has them
    # What made it, taken from the episode's timeline when it is made (None outside a sweep).
    timing: TurnTiming | None = field(default=None, compare=False)
    rewritten: str | None = None  # what the dialogue kept in place of the answer, where the strategy changed it

    def __post_init__(self) -> None:
        if self.timing is None:
            self.timing = turn_timing(self.output)


@dataclass
class EpisodeOutcome:
    task_id: str
    turns: list[Turn] = field(default_factory=list)
    status: Status = Status.MAX_TURNS
    error: str | None = None

    @property
    def reward(self) -> float:
        """The best reward of the episode (the paper's success is best reward == 1)."""
        return max((t.reward for t in self.turns), default=0.0)

    @property
    def success(self) -> bool:
        return self.status != Status.BUDGET_EXHAUSTED and self.reward == 1.0


class Strategy(Protocol):
    name: str

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome: ...


# name -> ("module:Class", options), imported on first use
STRATEGIES: dict[str, tuple[str, dict[str, Any]]] = {
    "single": ("agents.strategies.try_again:Single", {"rules": "paper"}),
    "try_again": ("agents.strategies.try_again:TryAgain", {"rules": "paper"}),
    "react": ("agents.strategies.react:ReAct", {"rules": "paper"}),
    "plan_solve": ("agents.strategies.plan_solve:PlanSolve", {"rules": "paper"}),
    "plan_solve_refine": ("agents.strategies.plan_solve:PlanSolve", {"rules": "paper", "refine_turns": 3}),
    "single_fenced": ("agents.strategies.try_again:Single", {"rules": "fenced"}),
    "try_again_fenced": ("agents.strategies.try_again:TryAgain", {"rules": "fenced"}),
    "react_fenced": ("agents.strategies.react:ReAct", {"rules": "fenced"}),
    "plan_solve_fenced": ("agents.strategies.plan_solve:PlanSolve", {"rules": "fenced"}),
    "tools": ("agents.strategies.tools:Tools", {}),
    "terminus": ("agents.strategies.terminus:Terminus", {}),
    "gold": ("agents.strategies.fixed_actions:Gold", {}),  # no model: the task's gold actions (Harbor's oracle agent)
    "nop": ("agents.strategies.fixed_actions:Nop", {}),  # no model: `submit` alone (Harbor's nop agent)
}
PAPER_STRATEGIES = ("single", "try_again", "react", "plan_solve", "plan_solve_refine")


# agents of yours, by the name a sweep gives them (`my_agents.py:CoT`): registered once loaded
# (agents/own.py, agents/strategies/external.py), as datasets and kinds of your own are
AGENTS: dict[str, Strategy] = {}


def register_agent(strategy: Strategy) -> Strategy:
    """Make an agent of yours known by its name (again: the latest wins)."""
    AGENTS[strategy.name] = strategy
    return strategy


def get_strategy(name: str, **options: Any) -> Strategy:
    if name in AGENTS and not options:
        return AGENTS[name]
    try:
        target, preset = STRATEGIES[name]
    except KeyError:
        raise ConfigError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}, or an agent of yours "
                          "(`path.py:Name`)") from None
    module, cls = target.split(":")
    strategy: Strategy = getattr(importlib.import_module(module), cls)(**{**preset, **options})
    return strategy
