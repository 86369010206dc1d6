"""Plan & Solve as the paper ran it (the original's `experiments/eval_plan_solve.py`), in prompts of
our own; `plan_solve_refine` is the paper's variant with 3 refine turns.

1. The model writes a plan; its steps are the numbered items the original's pattern found
   (`N. text`, up to the next ` N.`), and the plan is not a turn.
2. A system message asks for the plan's execution. Every step is one turn, all of them, even
   after a reward of 1: the user message is `Step: <step>`, after the first with the previous
   output before it (`Observation: ...`, clipped to 1,000 characters or 25 rows). The answer is
   parsed and run as in the n-turn harness (`paper_common.paper_turn`); the answer itself, not the
   parse, stays in the dialogue, which is never cut.
3. With refine turns, when the last step's reward is below 1: a system message says the plan is
   done, and each refine turn sends the last output alone (clipped to 250 characters or 25 rows),
   up to `refine_turns` turns or a reward of 1.

`max_turns` is not the paper's: a plan longer than it is cut to its first `max_turns` steps (the
sweep's turn budget; plans were short).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model
from agents.llm.errors import ModelError
from agents.strategies.common import Dialogue, ask, begin, failed, finish, prompt
from agents.strategies.paper_common import paper_clip, paper_turn

if TYPE_CHECKING:
    from agents.base import Turn
    from environments.base import Environment
    from tasks import Task

STEP = re.compile(r"\d+\.\s(.*?)(?=\s\d+\.|\Z)", re.DOTALL)  # the original's pattern for plan items
STEP_CHARS, REFINE_CHARS, ROWS = 1000, 250, 25


def paper_plan_steps(plan: str) -> list[str]:
    """The plan's steps as the original found them (the text of each, as it stands)."""
    return STEP.findall(plan)


class PaperPlanSolve:
    name = "plan_solve"

    def __init__(self, refine_turns: int = 0) -> None:
        self.refine_turns = refine_turns
        if refine_turns:
            self.name = "plan_solve_refine"

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        outcome, dialogue = await begin(env, task, prompt("plan", env.kind), None,
                                        question=f"Question: {task.query}")
        try:
            steps = paper_plan_steps(await ask(model, dialogue, task, 0, "plan"))[:max_turns]
            dialogue.add("system", prompt("plan_execute", env.kind))
            blocked = await self._execute(env, task, model, dialogue, outcome, steps)
            if not blocked and self.refine_turns and not env.done and (not outcome.turns or outcome.turns[-1].reward != 1):
                await self._refine(env, task, model, dialogue, outcome)
        except ModelError as exc:
            return failed(outcome, exc)
        return finish(outcome, ran_out=False)

    async def _execute(self, env: Environment, task: Task, model: Model, dialogue: Dialogue,
                       outcome: EpisodeOutcome, steps: list[str]) -> bool:
        """Every step, one turn each; True when an answer blocked the episode."""
        last: Turn | None = None
        for step in steps:
            shown = "" if last is None else f"Observation: {paper_clip(env, last.observation, STEP_CHARS, ROWS)}\n"
            dialogue.add("user", f"{shown}Step: {step}")
            last, blocked = await self._turn(env, task, model, dialogue, outcome)
            if blocked or env.done:
                return blocked
        return False

    async def _refine(self, env: Environment, task: Task, model: Model, dialogue: Dialogue,
                      outcome: EpisodeOutcome) -> None:
        dialogue.add("system", prompt("plan_after", env.kind))
        for _ in range(self.refine_turns):
            last = outcome.turns[-1] if outcome.turns else None
            dialogue.add("user", paper_clip(env, last.observation, REFINE_CHARS, ROWS) if last else "None")
            turn, blocked = await self._turn(env, task, model, dialogue, outcome)
            if blocked or env.done or turn.reward == 1:
                return

    async def _turn(self, env: Environment, task: Task, model: Model, dialogue: Dialogue,
                    outcome: EpisodeOutcome) -> tuple[Turn, bool]:
        output = await ask(model, dialogue, task, len(outcome.turns), "paper")
        turn, _, blocked = await paper_turn(env, output)
        outcome.turns.append(turn)
        return turn, blocked
