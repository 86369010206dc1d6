"""ReAct, by the paper's rules (`react`: the original's `experiments/eval_react.py`) or ours
(`react_fenced`): agents/strategies/rules.py says what differs.

Thought / Action / Observation turns. Actions run as plain steps (reward 0); the episode ends
when the model submits (the submission is scored) or skips. Out of turns, it is submitted for the
model, as the original did, and that submission is recorded as one more turn. An answer without
an action runs nothing: reward 0, an error observation.

- paper: turn N's answer is `Thought N: ...` and `Action N: ...`, the action read by the paper's
  ReAct rule (`submit`, or the code inside `execute[...]`, SQL up to a `;`); without an `Action N:`
  line the model is asked once more for that line alone. The observation is clipped to 350
  characters, or 25 rows of a SQL result, and so kept; the dialogue is never cut. The paper ran
  ReAct on Bash and SQL only; for Python and CTF, which need an argument, `submit ARGUMENT` is
  accepted too (ours).
- fenced: `Action: execute[CODE]`, `Action: submit [FLAG]` or a fenced block; the observation is
  kept whole and shown cut at 800 characters; the dialogue keeps the last 10 turns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model, Turn
from agents.llm.errors import ModelError
from agents.strategies.turns import ask, begin, failed, finish, prompt
from agents.strategies.rules import AnswerRules, answer_rules
from agents.strategies.try_again import Default
from environments.base import ACTION_EXECUTED

if TYPE_CHECKING:
    from agents.strategies.turns import Dialogue
    from environments.base import EpisodeEnvironment
    from tasks import Task


class ReAct:
    def __init__(self, rules: str | AnswerRules = "fenced", dialogue_limit: int | None | Default = "default",
                 observation_limit: int | Default = "default") -> None:
        self.rules = answer_rules(rules)
        self.name = "react" + self.rules.suffix
        self.dialogue_limit = self.rules.react_dialogue_limit if dialogue_limit == "default" else dialogue_limit
        self.observation_limit = self.rules.observation_chars if observation_limit == "default" else observation_limit

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        spec = env.spec
        system = prompt(self.rules.react_prompt, spec, submit_argument=spec.submit_argument,
                        submit_meaning=spec.submit_meaning)
        outcome, dialogue = await begin(env, task, system, self.dialogue_limit,
                                        question=self.rules.react_question(spec, task))
        try:
            for number in range(1, max_turns + 1):
                turn = await self._turn(env, task, model, dialogue, number)
                outcome.turns.append(turn)
                if env.done:
                    return finish(outcome, ran_out=False)
                dialogue.add("user", self.rules.react_feedback(spec, number, turn, self.observation_limit))
        except ModelError as exc:
            return failed(outcome, exc)
        step = await env.step("submit")  # out of turns: the state is the answer
        outcome.turns.append(Turn(self.rules.forced, "submit", step.observation, step.reward, True, env.breakdown()))
        return finish(outcome, ran_out=True)

    async def _turn(self, env: EpisodeEnvironment, task: Task, model: Model, dialogue: Dialogue, number: int) -> Turn:
        output = await ask(model, dialogue, task, number - 1, self.rules.react_style)
        action, no_code = await self.rules.react_action(model, dialogue, task, env.spec, number, output)
        if action is None:
            return Turn(output, None, no_code, 0.0, False)
        step = await env.step(action)
        observation = self.rules.react_observation(env, step.observation)
        return Turn(output, action, observation, step.reward, bool(step.info.get(ACTION_EXECUTED)), env.breakdown())
