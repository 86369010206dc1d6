"""ReAct as the paper ran it (the original's `experiments/eval_react.py`), in prompts of our own.

Turn N: the model writes `Thought N: ...` and `Action N: ...` (anything from `Observation N:` on
is its own invention and is cut, as the original's stop sequence cut it). Without an `Action N:`
line, it is asked once more for that line alone, and its first line is the action. The action is
read by the paper's ReAct rule (environments/paper_parsing.react_action): `submit`, or the code inside
`execute[...]` (SQL up to a `;`); anything else is no code: nothing runs, reward 0, an error
observation. Code runs as a plain step: reward 0, except `submit`, which scores and ends the
episode. The observation is clipped to 350 characters, or 25 rows of a SQL result, and so kept in
the dialogue and the record. After `max_turns` turns without a submission, one more turn submits
for the model ("forced submit"). The paper ran ReAct on Bash and SQL only; for Python and CTF,
which need an argument, `submit ARGUMENT` is accepted too (ours).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Model, Turn
from agents.llm.errors import ModelError
from agents.strategies.common import ask, begin, failed, finish, prompt
from agents.strategies.paper_common import paper_clip
from environments.base import ACTION_EXECUTED
from environments.kind import kind_spec
from environments.paper_parsing import react_action

if TYPE_CHECKING:
    from agents.strategies.common import Dialogue
    from environments.base import Environment
    from tasks import Task

OBSERVATION_CHARS, OBSERVATION_ROWS = 350, 25
FORCED = "EXCEEDED MAX TURNS: submit"


def split_answer(output: str, number: int) -> tuple[str, str | None]:
    """(thought, action line) of turn `number`'s answer; None when it has no `Action N:` line."""
    output = re.split(rf"\n?Observation {number}:", output, maxsplit=1)[0]
    output = re.sub(rf"^\s*Thought {number}:\s*", "", output.strip())
    parts = output.split(f"\nAction {number}: ")
    if len(parts) != 2:
        return output.split("\n")[0], None
    return parts[0].strip(), parts[1].strip()


def read_action(line: str, kind: str) -> tuple[str, bool]:
    """The paper's ReAct rule, plus `submit ARGUMENT` for the kinds whose submission needs one."""
    words = line.split(maxsplit=1)
    if kind_spec(kind).submit_argument and len(words) == 2 and words[0] == "submit":
        return line, True
    return react_action(line, kind)


class PaperReAct:
    name = "react"

    async def run(self, env: Environment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        spec = kind_spec(env.kind)
        argument, meaning = spec.submit_argument, spec.submit_meaning
        system = prompt("paper_react", env.kind, submit_argument=argument, submit_meaning=meaning)
        question = prompt("query", env.kind, query=task.query) if spec.prompts == "task" else f"Question: {task.query}"
        outcome, dialogue = await begin(env, task, system, None, question=question)
        try:
            for number in range(1, max_turns + 1):
                turn = await self._turn(env, task, model, dialogue, number, argument)
                outcome.turns.append(turn)
                if env.done:
                    return finish(outcome, ran_out=False)
                dialogue.add("user", f"Observation {number}: {turn.observation}")
        except ModelError as exc:
            return failed(outcome, exc)
        step = await env.step("submit")  # out of turns: the state is the answer
        outcome.turns.append(Turn(FORCED, "submit", step.observation, step.reward, True, env.breakdown()))
        return finish(outcome, ran_out=True)

    async def _turn(self, env: Environment, task: Task, model: Model, dialogue: Dialogue, number: int,
                    argument: str) -> Turn:
        output = await ask(model, dialogue, task, number - 1, "react")
        _, line = split_answer(output, number)
        if line is None:  # as the original, ask once more for the action alone
            dialogue.add("user", prompt("paper_react_action", env.kind, turn=number, submit_argument=argument))
            line = (await ask(model, dialogue, task, number - 1, "react")).strip().split("\n")[0]
            line = re.sub(rf"^Action {number}:\s*", "", line)
        action, is_code = read_action(line, env.kind)
        if not is_code:
            return Turn(output, None, prompt("paper_react_no_code", env.kind).strip(), 0.0, False)
        step = await env.step(action)
        observation = paper_clip(env, step.observation, OBSERVATION_CHARS, OBSERVATION_ROWS)
        return Turn(output, action, observation, step.reward, bool(step.info.get(ACTION_EXECUTED)), env.breakdown())
