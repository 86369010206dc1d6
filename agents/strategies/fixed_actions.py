"""Agents that need no model, as Harbor's `oracle` and `nop`: `gold` plays the task's gold actions
(its kind's rule: the gold command then `submit`; a Harbor task's solve.sh then `submit`), one a
turn; `nop` only submits. `tasks check` and `validate` run them (a task's gold must score 1 and
doing nothing below 1); a sweep may too.

They play what they play, whatever the turn budget: the budget is a model's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model, Turn
from agents.strategies.turns import finish
from environments.base import ACTION_EXECUTED
from environments.kind import gold_actions

if TYPE_CHECKING:
    from environments.base import EpisodeEnvironment
    from tasks import Task


class Gold:
    name = "gold"

    def actions(self, task: Task) -> list[str]:
        return gold_actions(task)

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        await env.reset(task, multi_turn=True)
        outcome = EpisodeOutcome(task.id)
        for action in self.actions(task):
            if env.done:
                break
            step = await env.step(action)
            outcome.turns.append(Turn("", action, step.observation, step.reward,
                                      bool(step.info.get(ACTION_EXECUTED, True)), env.breakdown()))
        return finish(outcome, ran_out=False)


class Nop(Gold):
    name = "nop"

    def actions(self, task: Task) -> list[str]:
        return ["submit"]
