"""The episode's entry point: a strategy's run, then what the kind asks at the end.

    outcome = await play(get_strategy("try_again"), env, task, model, max_turns=10)

The sweep's runner calls it; the strategies (`agents/strategies/`, their shared parts in
`turns.py`) never call back into it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model, Strategy, Turn
from environments.base import EpisodeEnvironment
from environments.kind import kind_spec

if TYPE_CHECKING:
    from tasks import Task


async def play(strategy: Strategy, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
    """Run `strategy`'s episode; for a kind scored only at `submit` (`submit_at_end`: Harbor's
    verifier), an episode the strategy left unsubmitted (turns out, Single's one action) is
    submitted here, as a last turn without a model answer (a turn per step left, for a
    multi-step task)."""
    outcome = await strategy.run(env, task, model, max_turns=max_turns)
    # A multi-step task's `submit` ends one step: the steps left are submitted each in turn.
    while kind_spec(env.kind).submit_at_end and not env.done and outcome.status not in ("model_error", "budget_exhausted"):
        step = await env.step("submit")
        outcome.turns.append(Turn("", "submit", step.observation, step.reward, True, env.breakdown()))
        if step.done and step.reward == 1.0:
            outcome.status = "solved"
    return outcome
