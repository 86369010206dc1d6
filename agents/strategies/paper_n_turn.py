"""Single and Try Again as the paper ran them (the original's `experiments/eval_n_turn.py` with its
chat policy), in prompts of our own.

Per turn: the model's answer is parsed by the paper's rule (`paper_common.paper_turn`), and what
the parser made of it, not the answer, goes back into the dialogue as the assistant's message.
The feedback is the output clipped as the policy clipped it (1,000 characters, or 50 rows of a
SQL result), "No output" when empty, and the reward; a turn without code feeds back the retry
message the same way, with reward 0. The dialogue keeps the system prompt, the question and the
last 5 messages. The episode ends at reward 1, at `skip`, after `max_turns`, or on an answer the
original's parser raised on. Single is one turn of the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model
from agents.llm.errors import ModelError
from agents.strategies.common import ask, begin, failed, finish, prompt
from agents.strategies.paper_common import paper_clip, paper_turn
from environments.kind import kind_spec

if TYPE_CHECKING:
    from agents.base import Turn
    from environments.base import Environment
    from tasks import Task

DIALOGUE_MESSAGES = 5  # the paper's runs: --dialogue_limit 5, counted in messages
OBSERVATION_CHARS, OBSERVATION_ROWS = 1000, 50  # the chat policy's response_limit and row cut


class PaperTryAgain:
    name = "try_again"

    def __init__(self, dialogue_limit: int | None = DIALOGUE_MESSAGES, show_reward: bool = True) -> None:
        self.dialogue_limit = dialogue_limit
        self.show_reward = show_reward

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        outcome, dialogue = await begin(env, task, self._system(env.kind), self.dialogue_limit,
                                        multi_turn=max_turns > 1)
        dialogue.by_message = True
        for number in range(max_turns):
            try:
                output = await ask(model, dialogue, task, number, "paper")
            except ModelError as exc:
                return failed(outcome, exc)
            turn, parsed, blocked = await paper_turn(env, output)
            dialogue.body[-1]["content"] = parsed  # the harness kept what its parser made of the answer
            outcome.turns.append(turn)
            if blocked or turn.reward == 1.0 or (turn.action or "").strip().lower() == "skip" or env.done:
                return finish(outcome, ran_out=False)
            dialogue.add("user", self._feedback(env, task, turn))
        return finish(outcome, ran_out=True)

    def _system(self, kind: str) -> str:
        shows = self.show_reward and kind_spec(kind).shows_reward
        note = ", with a reward between 0 and 1 that says how close you are (1 means solved)" if shows else ""
        return prompt("system", kind, reward_note=note)

    def _feedback(self, env: Environment, task: Task, turn: Turn) -> str:
        observation = paper_clip(env, turn.observation, OBSERVATION_CHARS, OBSERVATION_ROWS) or "No output"
        reward_line = f"Reward: {turn.reward}\n" if self.show_reward and kind_spec(env.kind).shows_reward else ""
        return prompt("observation", env.kind, observation=observation, reward_line=reward_line, query=task.query)


class PaperSingle:
    """The paper's Single Turn: Try Again with one turn; success is that turn's reward being 1."""

    name = "single"

    def __init__(self, dialogue_limit: int | None = DIALOGUE_MESSAGES) -> None:
        self.dialogue_limit = dialogue_limit

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int = 1) -> EpisodeOutcome:
        outcome, dialogue = await begin(env, task, prompt("single", env.kind), self.dialogue_limit, multi_turn=False)
        try:
            output = await ask(model, dialogue, task, 0, "paper")
        except ModelError as exc:
            return failed(outcome, exc)
        turn, _, _ = await paper_turn(env, output)
        outcome.turns.append(turn)
        outcome.status = "solved" if turn.reward == 1.0 else "submitted"
        return outcome
