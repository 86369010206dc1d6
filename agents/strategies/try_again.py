"""Try Again and Single Turn, by the paper's rules (`try_again`, `single`: the original's
`experiments/eval_n_turn.py` with its chat policy) or ours (`try_again_fenced`, `single_fenced`):
agents/strategies/rules.py says what differs.

Try Again: act, see the output (and the reward, where the kind shows it), act again, until reward
1, `skip`, the episode's end or `max_turns`. Every action is scored right after it without ending
the episode, by the original harness's rule (the environment's `harness_step`, environments/base.py).
The feedback is the output as
the rules clip it ("No output" when empty) and the reward; a turn without code feeds back the
retry message (the paper's harness: as the turn's observation, with the reward). Single Turn is
one turn of the same, scored as if submitted right after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from agents.base import EpisodeOutcome, Model
from agents.llm.errors import ModelError
from agents.strategies.turns import Dialogue, ask, begin, failed, finish, prompt
from agents.strategies.rules import AnswerRules, answer_rules
from foundation.outcome import Status

if TYPE_CHECKING:
    from agents.base import Turn
    from environments.base import EpisodeEnvironment
    from environments.kind import KindSpec
    from tasks import Task

Default = Literal["default"]  # an option left to the rules


class TryAgain:
    def __init__(self, rules: str | AnswerRules = "fenced", show_reward: bool = True,
                 dialogue_limit: int | None | Default = "default", observation_limit: int | Default = "default") -> None:
        self.rules = answer_rules(rules)
        self.name = "try_again" + self.rules.suffix
        self.show_reward = show_reward
        self.dialogue_limit = self.rules.dialogue_limit if dialogue_limit == "default" else dialogue_limit
        self.observation_limit = self.rules.observation_chars if observation_limit == "default" else observation_limit

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        outcome, dialogue = await self._begin(env, task, self._system(env.spec), multi_turn=max_turns > 1)
        for number in range(max_turns):
            try:
                output = await ask(model, dialogue, task, number, self.rules.style)
            except ModelError as exc:
                return failed(outcome, exc)
            turn, kept, blocked = await self.rules.turn(env, output)
            dialogue.body[-1]["content"] = kept
            if kept != output:
                turn.rewritten = kept  # the model's next call sees this, not its answer
            outcome.turns.append(turn)
            if blocked or turn.reward == 1.0 or (turn.action or "").strip().lower() == "skip" or env.done:
                return finish(outcome, ran_out=False)
            dialogue.add("user", self._feedback(env, task, turn))
        return finish(outcome, ran_out=True)

    async def _begin(self, env: EpisodeEnvironment, task: Task, system: str, *,
                     multi_turn: bool) -> tuple[EpisodeOutcome, Dialogue]:
        outcome, dialogue = await begin(env, task, system, self.dialogue_limit, multi_turn=multi_turn)
        dialogue.by_message = self.rules.by_message
        return outcome, dialogue

    def _shows_reward(self, spec: KindSpec) -> bool:
        return self.show_reward and spec.shows_reward

    def _system(self, spec: KindSpec) -> str:
        note = ", with a reward between 0 and 1 that says how close you are (1 means solved)" if self._shows_reward(spec) else ""
        return prompt("system", spec, reward_note=note)

    def _feedback(self, env: EpisodeEnvironment, task: Task, turn: Turn) -> str:
        if turn.action is None and not self.rules.frames_retry:
            return turn.observation  # the retry message, as it is
        if turn.action is None:  # the retry message, the turn's observation, as any other text
            shown = turn.observation[: self.observation_limit]
        else:
            shown = self.rules.shown(env, turn.observation, self.observation_limit, self.rules.observation_rows)
        reward_line = f"Reward: {turn.reward}\n" if self._shows_reward(env.spec) else ""
        return prompt("observation", env.spec, observation=shown or "No output", reward_line=reward_line,
                      query=task.query)


class Single(TryAgain):
    """Single Turn: one turn whatever `max_turns` says; success is that turn's reward being 1."""

    def __init__(self, rules: str | AnswerRules = "fenced", dialogue_limit: int | None | Default = "default") -> None:
        super().__init__(rules, dialogue_limit=dialogue_limit)
        self.name = "single" + self.rules.suffix

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int = 1) -> EpisodeOutcome:
        outcome, dialogue = await self._begin(env, task, prompt("single", env.spec), multi_turn=False)
        try:
            output = await ask(model, dialogue, task, 0, self.rules.style)
        except ModelError as exc:
            return failed(outcome, exc)
        turn, _, _ = await self.rules.turn(env, output)
        outcome.turns.append(turn)
        outcome.status = Status.SOLVED if turn.reward == 1.0 else Status.SUBMITTED
        return outcome
