"""Plan & Solve, by the paper's rules (`plan_solve`, and `plan_solve_refine` with 3 refine turns:
the original's `experiments/eval_plan_solve.py`) or ours (`plan_solve_fenced`):
agents/strategies/rules.py says what differs.

1. The model writes a numbered plan; its steps are the numbered items (the paper: the original's
   pattern, `N. text` up to the next ` N.`; ours: one per line, a plan without any is one step,
   the question). The plan is not a turn.
2. A system message asks for the plan's execution; every step is one turn, its message the step
   after the previous output, as the rules clip it. By the paper's rules every step runs, even
   after a reward of 1, and the dialogue is never cut; by ours a reward of 1 ends the plan, and
   the plan stays in view while the dialogue keeps its last 10 turns.
3. With refine turns, when the last step's reward is below 1 (and the episode has not ended), each
   refine turn shows the last output (the paper: after a system message saying the plan is done,
   the output alone, clipped to 250 characters), up to `refine_turns` turns or a reward of 1.

`max_turns` is not the paper's: a plan longer than it is cut to its first `max_turns` steps (the
episode's status is then `max_turns`, unless it reached reward 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model
from agents.llm.errors import ModelError
from agents.strategies.turns import Dialogue, ask, begin, failed, finish, prompt
from agents.strategies.rules import AnswerRules, answer_rules
from agents.strategies.try_again import Default

if TYPE_CHECKING:
    from agents.base import Turn
    from environments.base import EpisodeEnvironment
    from tasks import Task


class PlanSolve:
    def __init__(self, rules: str | AnswerRules = "fenced", refine_turns: int = 0, refine: bool | None = None,
                 dialogue_limit: int | None | Default = "default", observation_limit: int | Default = "default") -> None:
        """`refine`: whether to refine (default: when `refine_turns` > 0; `refine = true` alone gives one turn)."""
        self.rules = answer_rules(rules)
        self.refine_turns = (refine_turns or 1) if refine else 0 if refine is False else refine_turns
        self.name = "plan_solve" + ("_refine" if self.refine_turns and not self.rules.suffix else self.rules.suffix)
        self.dialogue_limit = self.rules.plan_dialogue_limit if dialogue_limit == "default" else dialogue_limit
        self.step_chars = self.rules.step_chars if observation_limit == "default" else observation_limit
        self.refine_chars = self.rules.refine_chars if observation_limit == "default" else observation_limit

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        rules = self.rules
        outcome, dialogue = await begin(env, task, prompt("plan", env.spec), self.dialogue_limit,
                                        question=rules.plan_question(env.spec, task))
        steps: list[str] = []
        try:
            steps = rules.steps(await ask(model, dialogue, task, 0, rules.plan_style), task)
            if rules.pins_plan:  # the plan stays in view however long the dialogue gets
                dialogue.head += dialogue.body
                dialogue.body = []
                dialogue.head.append({"role": "system", "content": prompt("plan_execute", env.spec)})
            else:
                dialogue.add("system", prompt("plan_execute", env.spec))
            ended = await self._execute(env, task, model, dialogue, outcome, steps[:max_turns])
            if not ended and self.refine_turns and (not outcome.turns or outcome.turns[-1].reward != 1.0):
                await self._refine(env, task, model, dialogue, outcome)
        except ModelError as exc:
            return failed(outcome, exc)
        return finish(outcome, ran_out=len(steps) > max_turns and outcome.reward < 1.0)

    async def _execute(self, env: EpisodeEnvironment, task: Task, model: Model, dialogue: Dialogue,
                       outcome: EpisodeOutcome, steps: list[str]) -> bool:
        """Every step, one turn each; True when the episode ended (it was done, or an answer blocked it)."""
        last: Turn | None = None
        for step in steps:
            dialogue.add("user", self.rules.step_message(env, step, last, self.step_chars))
            last, blocked = await self._turn(env, task, model, dialogue, outcome)
            if blocked or env.done:
                return True
            if last.reward == 1.0 and not self.rules.runs_every_step:
                return False
        return False

    async def _refine(self, env: EpisodeEnvironment, task: Task, model: Model, dialogue: Dialogue,
                      outcome: EpisodeOutcome) -> None:
        intro = self.rules.refine_intro(env.spec)
        if intro is not None:
            dialogue.add("system", intro)
        for _ in range(self.refine_turns):
            last = outcome.turns[-1] if outcome.turns else None
            dialogue.add("user", self.rules.refine_message(env, last, self.refine_chars))
            turn, blocked = await self._turn(env, task, model, dialogue, outcome)
            if blocked or env.done or turn.reward == 1.0:
                return

    async def _turn(self, env: EpisodeEnvironment, task: Task, model: Model, dialogue: Dialogue,
                    outcome: EpisodeOutcome) -> tuple[Turn, bool]:
        """One step's answer, run and scored (the answer itself, not its parse, stays in the
        dialogue); the plan is no turn: the first step is turn 0."""
        output = await ask(model, dialogue, task, len(outcome.turns), self.rules.style)
        turn, _, blocked = await self.rules.turn(env, output)
        outcome.turns.append(turn)
        return turn, blocked
