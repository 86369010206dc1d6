"""The episode's entry point: a strategy's run, then what the kind asks at the end.

    outcome = await play(get_strategy("try_again"), env, task, model, max_turns=10)

The sweep's runner calls it; the strategies (`agents/strategies/`, their shared parts in
`turns.py`) never call back into it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agents.base import EpisodeOutcome, Model, Strategy, Turn
from environments.base import EpisodeEnvironment
from environments.kind import kind_spec
from foundation.outcome import STOPPED, Status

if TYPE_CHECKING:
    from tasks import Task


async def play(strategy: Strategy, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
    """Run `strategy`'s episode; for a kind scored only at `submit` (`submit_at_end`: Harbor's
    verifier), an episode the strategy left unsubmitted (turns out, Single's one action) is
    submitted here, as a last turn without a model answer. A multi-step task is run as Harbor runs
    it: each step a fresh run of the strategy with the step's instruction and a turn budget of its
    own, in the same container; the episode's record keeps every step's turns."""
    steps: list[dict[str, Any]] = list(task.meta.get("steps") or []) if kind_spec(task.env).submit_at_end else []
    if steps:
        task = replace(task, meta={**task.meta, "step_runs": True})
    outcome = await strategy.run(env, task, model, max_turns=max_turns)
    while True:
        while kind_spec(env.kind).submit_at_end and not env.done and _going(outcome):
            step = await env.step("submit")
            outcome.turns.append(Turn("", "submit", step.observation, step.reward, True, env.breakdown()))
            if step.done and step.reward == 1.0:
                outcome.status = Status.SOLVED
        following = env.pending_step if steps and _going(outcome) else None
        if following is None:
            return outcome
        instruction = str(steps[following]["instruction"])
        more = await strategy.run(env, replace(task, query=instruction, meta={**task.meta, "step_index": following}),
                                  model, max_turns=max_turns)
        outcome.turns += more.turns
        outcome.status, outcome.error = more.status, more.error


def _going(outcome: EpisodeOutcome) -> bool:
    return outcome.status not in STOPPED
