"""`plan_solve_fenced`, the project's own Plan & Solve, which takes actions from fenced code blocks (the
parser of agents/parsing.py), not the paper's protocol (which is `plan_solve`: paper_*.py).

Plan & Solve: the model first writes a numbered plan; then, one turn per step, it gets the
step (and the previous output) and answers with the action for it, which runs and is scored as
the original harness did. With `refine`, when the plan ends below reward 1, it gets
`refine_turns` more turns to revise after seeing the result. The plan itself is not a turn.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model, Turn
from agents.llm.errors import ModelError
from agents.strategies.common import (
    DIALOGUE_LIMIT,
    OBSERVATION_LIMIT,
    Dialogue,
    action_of,
    ask,
    begin,
    clip,
    failed,
    finish,
    prompt,
    scored_turn,
)

if TYPE_CHECKING:
    from environments.base import Environment
    from tasks import Task

_STEP = re.compile(r"^\s*\d+[.)]\s+(.*?)(?=^\s*\d+[.)]\s|\Z)", re.MULTILINE | re.DOTALL)


def plan_steps(plan: str) -> list[str]:
    """The numbered steps of a plan ("1. ...", "2) ..."), each on one line; [] if none."""
    return [" ".join(step.split()) for step in _STEP.findall(plan) if step.strip()]


class PlanSolve:
    name = "plan_solve_fenced"

    def __init__(self, refine: bool = False, refine_turns: int = 1, dialogue_limit: int | None = DIALOGUE_LIMIT,
                 observation_limit: int = OBSERVATION_LIMIT) -> None:
        self.refine = refine
        self.refine_turns = refine_turns
        self.dialogue_limit = dialogue_limit
        self.observation_limit = observation_limit

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        """At most `max_turns` plan steps are carried out (a longer plan is cut)."""
        outcome, dialogue = await begin(env, task, prompt("plan", env.kind), self.dialogue_limit)
        try:
            plan = await ask(model, dialogue, task, 0)
            steps = plan_steps(plan) or [f"Answer the question: {task.query}"]
            dialogue.head += dialogue.body  # the plan stays in view however long the dialogue gets
            dialogue.body = []
            dialogue.head.append({"role": "system", "content": prompt("plan_execute", env.kind)})
            await self._execute(env, task, model, dialogue, outcome, steps[:max_turns])
            if self.refine and not env.done and outcome.reward < 1.0:
                await self._refine(env, task, model, dialogue, outcome)
        except ModelError as exc:
            return failed(outcome, exc)
        return finish(outcome, ran_out=len(steps) > max_turns and outcome.reward < 1.0)

    async def _execute(self, env: Environment, task: Task, model: Model, dialogue: Dialogue,
                       outcome: EpisodeOutcome, steps: list[str]) -> None:
        for step in steps:
            last = outcome.turns[-1] if outcome.turns else None
            observation_line = f"Observation: {self._shown(last)}" if last else ""
            dialogue.add("user", prompt("plan_step", env.kind, observation_line=observation_line, step=step).lstrip())
            if await self._turn(env, task, model, dialogue, outcome) or env.done:
                return

    async def _refine(self, env: Environment, task: Task, model: Model, dialogue: Dialogue,
                      outcome: EpisodeOutcome) -> None:
        for _ in range(self.refine_turns):
            last = outcome.turns[-1] if outcome.turns else None
            dialogue.add("user", prompt("plan_refine", env.kind, observation=self._shown(last)))
            if await self._turn(env, task, model, dialogue, outcome) or env.done:
                return

    async def _turn(self, env: Environment, task: Task, model: Model, dialogue: Dialogue,
                    outcome: EpisodeOutcome) -> bool:
        """One step's action, run and scored; True when it solved the task."""
        output = await ask(model, dialogue, task, len(outcome.turns))  # the plan is no turn: the first step is turn 0
        turn = await scored_turn(env, output, action_of(output, env.kind))
        outcome.turns.append(turn)
        return turn.reward == 1.0

    def _shown(self, turn: Turn | None) -> str:
        if turn is None:
            return "No output"
        return clip(turn.observation, self.observation_limit) or "No output"
