"""`react_fenced`, the project's own ReAct, which takes actions from fenced code blocks (the
parser of agents/parsing.py), not the paper's protocol (which is `react`: paper_*.py).

ReAct: Thought / Action / Observation turns. Actions run as plain steps (reward 0); the episode
ends when the model submits (the submission is scored) or skips. Out of turns, it is submitted for
it, as the original did, and that submission is recorded as one more turn (with no output).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model, Turn
from agents.llm.errors import ModelError
from agents.parsing import extract_react_action
from agents.strategies.common import (
    DIALOGUE_LIMIT,
    OBSERVATION_LIMIT,
    ask,
    begin,
    clip,
    failed,
    finish,
    prompt,
)
from environments.base import ACTION_EXECUTED
from environments.kind import kind_spec

if TYPE_CHECKING:
    from environments.base import Environment
    from tasks import Task

class ReAct:
    name = "react_fenced"

    def __init__(self, dialogue_limit: int | None = DIALOGUE_LIMIT, observation_limit: int = OBSERVATION_LIMIT) -> None:
        self.dialogue_limit = dialogue_limit
        self.observation_limit = observation_limit

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        spec = kind_spec(env.kind)
        argument, meaning = spec.submit_argument, spec.submit_meaning
        system = prompt("react", env.kind, submit_argument=argument, submit_meaning=meaning)
        outcome, dialogue = await begin(env, task, system, self.dialogue_limit, question=f"Question: {task.query}")
        for number in range(max_turns):
            try:
                output = await ask(model, dialogue, task, number)
            except ModelError as exc:
                return failed(outcome, exc)
            turn = await self._turn(env, output, argument)
            outcome.turns.append(turn)
            if env.done or turn.reward == 1.0:
                return finish(outcome, ran_out=False)
            dialogue.add("user", self._feedback(env.kind, turn))
        step = await env.step("submit")  # out of turns: what is there is the answer
        outcome.turns.append(Turn("", "submit", step.observation, step.reward, True, env.breakdown()))
        return finish(outcome, ran_out=True)

    async def _turn(self, env: Environment, output: str, argument: str) -> Turn:
        action = extract_react_action(output, env.kind)
        if action is None:
            return Turn(output, None, prompt("react_no_action", env.kind, submit_argument=argument), 0.0, False)
        step = await env.step(action)
        return Turn(output, action, step.observation, step.reward, bool(step.info.get(ACTION_EXECUTED)), env.breakdown())

    def _feedback(self, kind: str, turn: Turn) -> str:
        if turn.action is None:
            return turn.observation
        observation = clip(turn.observation, self.observation_limit) or "No output"
        return prompt("react_observation", kind, observation=observation)
