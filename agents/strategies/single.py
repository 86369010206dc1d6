"""`single_fenced`, the project's own Single Turn, which takes actions from fenced code blocks (the
parser of agents/parsing.py), not the paper's protocol (which is `single`: paper_*.py).

Single Turn: the model gets one action; it runs and is scored as if submitted right after."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model
from agents.llm.errors import ModelError
from agents.strategies.common import (
    DIALOGUE_LIMIT,
    action_of,
    ask,
    begin,
    failed,
    prompt,
    scored_turn,
)

if TYPE_CHECKING:
    from environments.base import Environment
    from tasks import Task


class SingleTurn:
    name = "single_fenced"

    def __init__(self, dialogue_limit: int | None = DIALOGUE_LIMIT) -> None:
        self.dialogue_limit = dialogue_limit

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int = 1) -> EpisodeOutcome:
        """One turn whatever `max_turns` says; success is that turn's reward being 1."""
        outcome, dialogue = await begin(env, task, prompt("single", env.kind), self.dialogue_limit, multi_turn=False)
        try:
            output = await ask(model, dialogue, task, 0)
        except ModelError as exc:
            return failed(outcome, exc)
        turn = await scored_turn(env, output, action_of(output, env.kind))
        outcome.turns.append(turn)
        outcome.status = "solved" if turn.reward == 1.0 else "submitted"
        return outcome
