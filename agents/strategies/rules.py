"""How a strategy reads a model's answers and shows it what its actions did: the paper's rules or
ours. Every strategy loop (try_again.py, react.py, plan_solve.py) takes one as its `rules` option;
the loop is the same, the rules say what differs.

- **paper** (`PaperRules`): the original harness's scripts (`experiments/eval_n_turn.py`,
  `eval_react.py`, `eval_plan_solve.py` with their chat policy). An answer is read by the paper's
  parser for the kind (agents/strategies/paper_parsing.py), quirks included, and what the parser made
  of it is what the n-turn harness kept in the dialogue; an answer the original's parser raised on
  ended its episode (a "blocked" turn). Observations are clipped silently, by characters or, for a
  SQL result, by rows. The dialogue keeps the last 5 messages.
- **fenced** (`FencedRules`, the strategies named `*_fenced`): the action is the first fenced code
  block of the kind's language (agents/parsing.py); the answer stays in the dialogue as written;
  observations are cut at 800 characters, saying so; the dialogue keeps the last 10 turns.

With either, an answer without code runs nothing: reward 0, the retry message as its observation.
An action runs and is scored as the original's multi-turn harness did (`harness_step`: Bash and
SQL "if submitted now", Python's `def` auto-submitted, CTF only at `submit FLAG`).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from agents.base import AnswerStyle, Turn
from agents.parsing import extract_action, extract_react_action
from agents.strategies.turns import (
    DIALOGUE_LIMIT,
    OBSERVATION_LIMIT,
    Dialogue,
    ask,
    clip,
    prompt,
    scored_turn,
)
from agents.strategies.paper_parsing import PaperParseError, paper_action, react_action
from foundation.errors import ConfigError

if TYPE_CHECKING:
    from agents.base import Model
    from environments.base import EpisodeEnvironment
    from environments.kind import KindSpec
    from tasks import Task

BLOCKED = "blocked: the original's parser raised on this answer, which ended its episode"
FORCED = "EXCEEDED MAX TURNS: submit"  # the paper's ReAct: the output of the turn that submits for the model
_PAPER_STEP = re.compile(r"\d+\.\s(.*?)(?=\s\d+\.|\Z)", re.DOTALL)  # the original's pattern for plan items
_STEP = re.compile(r"^\s*\d+[.)]\s+(.*?)(?=^\s*\d+[.)]\s|\Z)", re.MULTILINE | re.DOTALL)


class Reading(NamedTuple):
    """One answer, read and acted on: the turn, the answer as the dialogue keeps it, and whether
    the episode ends here because the answer could not be read (the paper's parser raised)."""

    turn: Turn
    kept: str
    blocked: bool = False


def paper_clip(env: EpisodeEnvironment, observation: str, chars: int, rows: int) -> str:
    """An observation as the paper's harness put it into a prompt: the last action's result of
    more than `rows` rows (SQL) cut to its first `rows`, any other text to its first `chars`
    characters, silently."""
    result = env.observation_rows()
    if result is not None:
        return str(result[:rows]) if len(result) > rows else observation
    return observation[:chars]


def paper_plan_steps(plan: str) -> list[str]:
    """The plan's steps as the original found them (the text of each, as it stands)."""
    return _PAPER_STEP.findall(plan)


def plan_steps(plan: str) -> list[str]:
    """The numbered steps of a plan ("1. ...", "2) ..."), each on one line; [] if none."""
    return [" ".join(step.split()) for step in _STEP.findall(plan) if step.strip()]


def split_answer(output: str, number: int) -> tuple[str, str | None]:
    """(thought, action line) of the paper's ReAct turn `number`; None when it has no `Action N:`
    line (anything from `Observation N:` on is the model's invention, cut as the original's stop
    sequence cut it)."""
    output = re.split(rf"\n?Observation {number}:", output, maxsplit=1)[0]
    output = re.sub(rf"^\s*Thought {number}:\s*", "", output.strip())
    parts = output.split(f"\nAction {number}: ")
    if len(parts) != 2:
        return output.split("\n")[0], None
    return parts[0].strip(), parts[1].strip()


class AnswerRules(ABC):
    """What differs between the paper's protocols and ours; the strategy loops hold the rest."""

    name: ClassVar[str]
    suffix: ClassVar[str]  # of the strategy's name ("try_again" + "_fenced")
    style: ClassVar[AnswerStyle]  # the form an offline model answers in for a turn
    by_message: ClassVar[bool]  # the dialogue's limit counts messages, not turns
    dialogue_limit: ClassVar[int | None]  # Try Again's and Single's default
    observation_chars: ClassVar[int]  # of an observation in Try Again's feedback
    observation_rows: ClassVar[int]  # of a SQL result there, where the rules clip by rows
    frames_retry: ClassVar[bool]  # the retry message is fed back as an observation, with the reward

    async def turn(self, env: EpisodeEnvironment, output: str) -> Reading:
        """The turn of answer `output`: its action run and scored the harness's way."""
        try:
            action, kept = self.action(output, env.spec)
        except PaperParseError:
            return Reading(Turn(output, None, BLOCKED, 0.0, False), output, blocked=True)
        return Reading(await scored_turn(env, output, action), kept)

    @abstractmethod
    def action(self, output: str, spec: KindSpec) -> tuple[str | None, str]:
        """(the action of `output`, None without code; the answer as the dialogue keeps it)."""

    @abstractmethod
    def shown(self, env: EpisodeEnvironment, observation: str, chars: int, rows: int) -> str:
        """An observation as a prompt shows it: at most `chars` characters (or `rows` rows)."""

    # ------------------------------------------------------------------ ReAct

    react_prompt: ClassVar[str]  # the system prompt's template
    react_style: ClassVar[AnswerStyle]
    react_dialogue_limit: ClassVar[int | None]
    forced: ClassVar[str]  # the output recorded for the turn that submits for a model out of turns

    @abstractmethod
    def react_question(self, spec: KindSpec, task: Task) -> str: ...

    @abstractmethod
    async def react_action(self, model: Model, dialogue: Dialogue, task: Task, spec: KindSpec, number: int,
                           output: str) -> tuple[str | None, str]:
        """(the action of turn `number`'s answer `output`, None without code; the observation
        of a turn without code)."""

    @abstractmethod
    def react_observation(self, env: EpisodeEnvironment, observation: str) -> str:
        """What a ReAct turn records as its observation."""

    @abstractmethod
    def react_feedback(self, spec: KindSpec, number: int, turn: Turn, chars: int) -> str:
        """The user message after ReAct turn `number`."""

    # ------------------------------------------------------------------ Plan & Solve

    plan_style: ClassVar[AnswerStyle]
    plan_dialogue_limit: ClassVar[int | None]
    pins_plan: ClassVar[bool]  # the plan stays in view however long the dialogue gets
    runs_every_step: ClassVar[bool]  # a reward of 1 does not end the plan
    step_chars: ClassVar[int]
    refine_chars: ClassVar[int]

    @abstractmethod
    def plan_question(self, spec: KindSpec, task: Task) -> str: ...

    @abstractmethod
    def steps(self, plan: str, task: Task) -> list[str]: ...

    @abstractmethod
    def step_message(self, env: EpisodeEnvironment, step: str, last: Turn | None, chars: int) -> str: ...

    @abstractmethod
    def refine_intro(self, spec: KindSpec) -> str | None:
        """The system message before the refine turns, if any."""

    @abstractmethod
    def refine_message(self, env: EpisodeEnvironment, last: Turn | None, chars: int) -> str: ...


class PaperRules(AnswerRules):
    name, suffix = "paper", ""
    style: ClassVar[AnswerStyle] = "paper"
    by_message = True
    dialogue_limit = 5  # the paper's runs: --dialogue_limit 5, counted in messages
    observation_chars, observation_rows = 1000, 50  # the chat policy's response_limit and row cut
    frames_retry = True

    def action(self, output: str, spec: KindSpec) -> tuple[str | None, str]:
        action, is_code = paper_action(output, spec)
        return (action if is_code else None), action  # the harness kept what its parser made of the answer

    def shown(self, env: EpisodeEnvironment, observation: str, chars: int, rows: int) -> str:
        return paper_clip(env, observation, chars, rows)

    react_prompt = "paper_react"
    react_style: ClassVar[AnswerStyle] = "react"
    react_dialogue_limit = None
    react_chars, react_rows = 350, 25
    forced = FORCED

    def react_question(self, spec: KindSpec, task: Task) -> str:
        return prompt("query", spec, query=task.query) if spec.prompts == "task" else f"Question: {task.query}"

    async def react_action(self, model: Model, dialogue: Dialogue, task: Task, spec: KindSpec, number: int,
                           output: str) -> tuple[str | None, str]:
        """The paper's ReAct rule (`react_action`: `submit`, or the code inside `execute[...]`),
        plus `submit ARGUMENT` for the kinds whose submission needs one (ours: the paper ran ReAct
        on Bash and SQL only). Without an `Action N:` line, the model is asked once more for that
        line alone, and the first line of its answer is the action."""
        argument = spec.submit_argument
        _, line = split_answer(output, number)
        if line is None:
            dialogue.add("user", prompt("paper_react_action", spec, turn=number, submit_argument=argument))
            line = (await ask(model, dialogue, task, number - 1, "react")).strip().split("\n")[0]
            line = re.sub(rf"^Action {number}:\s*", "", line)
        words = line.split(maxsplit=1)
        if argument and len(words) == 2 and words[0] == "submit":
            return line, ""
        action, is_code = react_action(line, spec)
        return (action, "") if is_code else (None, prompt("paper_react_no_code", spec).strip())

    def react_observation(self, env: EpisodeEnvironment, observation: str) -> str:
        return paper_clip(env, observation, self.react_chars, self.react_rows)  # and so kept in the dialogue

    def react_feedback(self, spec: KindSpec, number: int, turn: Turn, chars: int) -> str:
        return f"Observation {number}: {turn.observation}"

    plan_style: ClassVar[AnswerStyle] = "plan"
    plan_dialogue_limit = None  # never cut
    pins_plan = False
    runs_every_step = True
    step_chars, refine_chars, plan_rows = 1000, 250, 25

    def plan_question(self, spec: KindSpec, task: Task) -> str:
        return f"Question: {task.query}"

    def steps(self, plan: str, task: Task) -> list[str]:
        return paper_plan_steps(plan)

    def step_message(self, env: EpisodeEnvironment, step: str, last: Turn | None, chars: int) -> str:
        shown = "" if last is None else f"Observation: {self.shown(env, last.observation, chars, self.plan_rows)}\n"
        return f"{shown}Step: {step}"

    def refine_intro(self, spec: KindSpec) -> str | None:
        return prompt("plan_after", spec)

    def refine_message(self, env: EpisodeEnvironment, last: Turn | None, chars: int) -> str:
        return self.shown(env, last.observation, chars, self.plan_rows) if last else "None"


class FencedRules(AnswerRules):
    name, suffix = "fenced", "_fenced"
    style: ClassVar[AnswerStyle] = "fenced"
    by_message = False
    dialogue_limit = DIALOGUE_LIMIT  # turns
    observation_chars = OBSERVATION_LIMIT
    observation_rows = 0  # not cut by rows: by characters, saying so
    frames_retry = False

    def action(self, output: str, spec: KindSpec) -> tuple[str | None, str]:
        return extract_action(output, spec), output

    def shown(self, env: EpisodeEnvironment, observation: str, chars: int, rows: int) -> str:
        return clip(observation, chars)

    react_prompt = "react"
    react_style: ClassVar[AnswerStyle] = "fenced"
    react_dialogue_limit = DIALOGUE_LIMIT
    forced = ""

    def react_question(self, spec: KindSpec, task: Task) -> str:
        return f"Question: {task.query}"

    async def react_action(self, model: Model, dialogue: Dialogue, task: Task, spec: KindSpec, number: int,
                           output: str) -> tuple[str | None, str]:
        """`Action: execute[CODE]`, `Action: submit [FLAG]`, or a fenced block (agents/parsing.py)."""
        action = extract_react_action(output, spec)
        argument = spec.submit_argument
        return action, "" if action is not None else prompt("react_no_action", spec, submit_argument=argument)

    def react_observation(self, env: EpisodeEnvironment, observation: str) -> str:
        return observation

    def react_feedback(self, spec: KindSpec, number: int, turn: Turn, chars: int) -> str:
        if turn.action is None:
            return turn.observation
        return prompt("react_observation", spec, observation=clip(turn.observation, chars) or "No output")

    plan_style: ClassVar[AnswerStyle] = "plan"  # a numbered plan: an offline model answers one in this style
    plan_dialogue_limit = DIALOGUE_LIMIT
    pins_plan = True
    runs_every_step = False
    step_chars = refine_chars = OBSERVATION_LIMIT

    def plan_question(self, spec: KindSpec, task: Task) -> str:
        return prompt("query", spec, query=task.query)

    def steps(self, plan: str, task: Task) -> list[str]:
        return plan_steps(plan) or [f"Answer the question: {task.query}"]

    def step_message(self, env: EpisodeEnvironment, step: str, last: Turn | None, chars: int) -> str:
        line = f"Observation: {clip(last.observation, chars) or 'No output'}" if last else ""
        return prompt("plan_step", env.spec, observation_line=line, step=step).lstrip()

    def refine_intro(self, spec: KindSpec) -> str | None:
        return None

    def refine_message(self, env: EpisodeEnvironment, last: Turn | None, chars: int) -> str:
        shown = clip(last.observation, chars) or "No output" if last else "No output"
        return prompt("plan_refine", env.spec, observation=shown)


RULES: dict[str, AnswerRules] = {rules.name: rules for rules in (PaperRules(), FencedRules())}


def answer_rules(name: str | AnswerRules) -> AnswerRules:
    if isinstance(name, AnswerRules):
        return name
    try:
        return RULES[name]
    except KeyError:
        raise ConfigError(f"unknown rules {name!r}; known: {', '.join(RULES)}") from None
