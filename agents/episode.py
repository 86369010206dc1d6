"""One episode, as every command plays it: the environment leased, the strategy (or your agent)
played, what the kind asks at the end submitted, the scoring failure read, the lease ended.

    played = await run_episode(site_lease, get_strategy("try_again"), task, model, max_turns=10)

The sweep's runner (orchestrator/sweep/runner.py, which records it and re-runs infrastructure
failures), `tasks check` (the `gold` and `nop` agents), `validate` (`gold`) and nightly's gate
(a sweep of the oracle) all play episodes here; the strategies (`agents/strategies/`) never call
back into it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agents.base import EpisodeOutcome, Model, Strategy, Turn
from agents.recording import EpisodeCalls
from environments.base import EpisodeEnvironment, ScoringFailed
from foundation.outcome import STOPPED, Status
from foundation.timeline import Timeline

if TYPE_CHECKING:
    from tasks import Task


@dataclass
class Played:
    outcome: EpisodeOutcome
    failure: ScoringFailed | None  # why the environment could not score it (a verifier's error, a timeout)


async def run_episode(lease: AbstractAsyncContextManager[EpisodeEnvironment], strategy: Strategy, task: Task,
                      model: Model, *, max_turns: int, timeline: Timeline | None = None,
                      calls: EpisodeCalls | None = None,
                      before_release: Callable[[EpisodeEnvironment], Awaitable[None]] | None = None) -> Played:
    """Lease an environment (`lease`: the site's, or `make_environment`'s), play the episode in it
    (its calls, actions and scorings on `timeline`, if given; what its model calls cost and sent
    in `calls`, if given: agents/recording.py), and, before the lease ends, let `before_release`
    read what the container holds (a verifier's files)."""
    async with lease as env:
        with contextlib.ExitStack() as context:
            if timeline is not None:
                context.enter_context(timeline.current())
            if calls is not None:
                context.enter_context(calls.current())
            outcome = await play(strategy, env, task, model, max_turns=max_turns)
        if before_release is not None:
            await before_release(env)
        return Played(outcome, env.failure)


async def play(strategy: Strategy, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
    """Run `strategy`'s episode; for a kind scored only at `submit` (`submit_at_end`: Harbor's
    verifier), an episode the strategy left unsubmitted (turns out, Single's one action) is
    submitted here, as a last turn without a model answer. A multi-step task is run as Harbor runs
    it: each step a fresh run of the strategy with the step's instruction and a turn budget of its
    own, in the same container; the episode's record keeps every step's turns."""
    steps: list[dict[str, Any]] = list(task.meta.get("steps") or []) if env.spec.submit_at_end else []
    if steps:
        task = replace(task, meta={**task.meta, "step_runs": True})
    outcome = await strategy.run(env, task, model, max_turns=max_turns)
    while True:
        while env.spec.submit_at_end and not env.done and _going(outcome):
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
