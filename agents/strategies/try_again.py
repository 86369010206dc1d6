"""`try_again_fenced`, the project's own Try Again, which takes actions from fenced code blocks (the
parser of agents/parsing.py), not the paper's protocol (which is `try_again`: paper_*.py).

Try Again: act, see the output (and the reward), act again, until reward 1 or `max_turns`.

Every action is scored right after it without ending the episode, by the original harness's rule
(`common.harness_step`). A reply without code runs nothing: reward 0, the retry message back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model, Turn
from agents.llm.errors import ModelError
from agents.strategies.common import (
    FeedbackOptions,
    action_of,
    ask,
    begin,
    clip,
    failed,
    finish,
    prompt,
    scored_turn,
)
from environments.kind import kind_spec

if TYPE_CHECKING:
    from environments.base import Environment
    from tasks import Task


class TryAgain(FeedbackOptions):
    name = "try_again_fenced"

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        outcome, dialogue = await begin(env, task, self._system(env.kind), self.dialogue_limit)
        for number in range(max_turns):
            try:
                output = await ask(model, dialogue, task, number)
            except ModelError as exc:
                return failed(outcome, exc)
            turn = await scored_turn(env, output, action_of(output, env.kind))
            outcome.turns.append(turn)
            if turn.reward == 1.0 or env.done:
                return finish(outcome, ran_out=False)
            dialogue.add("user", self._feedback(env.kind, task, turn))
        return finish(outcome, ran_out=True)

    def _system(self, kind: str) -> str:
        shows = self.show_reward and kind_spec(kind).shows_reward
        note = ", with a reward between 0 and 1 that says how close you are (1 means solved)" if shows else ""
        return prompt("system", kind, reward_note=note)

    def _feedback(self, kind: str, task: Task, turn: Turn) -> str:
        if turn.action is None:
            return turn.observation  # the retry message, as it is
        observation = clip(turn.observation, self.observation_limit) or "No output"
        reward_line = f"Reward: {turn.reward}\n" if self.show_reward else ""
        return prompt("observation", kind, observation=observation, reward_line=reward_line, query=task.query)
