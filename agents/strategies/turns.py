"""What the strategies share, turn by turn: prompt templates, the dialogue window, observation clipping, asking
the model, and one turn of the original's multi-turn harness.

A turn whose output holds no code executes nothing: reward 0, the retry message as observation.
Otherwise the action runs and is scored as the original harness did (`harness_step`).

What a kind's prompts say (its language, its setting, what `submit` takes) is its `KindSpec`,
which the episode's environment carries (`env.spec`, resolved once) and the strategies hand on.

A task may offer its agent skills and MCP servers (Harbor's task.toml: `skills_dir`,
`[[environment.mcp_servers]]`), which its environment knows once it is reset. For such a task
(the task's `offers_extras` says) the strategy's first answer waits for the reset, and the system
prompt lists the skills (`skills_block`); for the others the first answer is asked for while the
environment resets.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any, TypeVar

from agents.base import AnswerStyle, EpisodeOutcome, Message, Model, Turn
from agents.llm.errors import ModelError
from environments.base import EpisodeEnvironment, HarnessStep, Skill
from environments.kind import KindSpec
from foundation.concurrency import TaskOwner
from foundation.outcome import Status

if TYPE_CHECKING:
    from tasks import Task

PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
OBSERVATION_LIMIT = 800  # characters of an observation put into the prompt, as in the original
TRUNCATED = "\n The Observation is truncated due to the length is too long."
DIALOGUE_LIMIT = 10  # turns kept in the prompt besides the system prompt and the question
T = TypeVar("T")


class FeedbackOptions:
    """The options of a strategy that feeds each turn's result back: whether the reward is shown,
    how many turns the prompt keeps (None: all), how many characters of an observation."""

    def __init__(self, show_reward: bool = True, dialogue_limit: int | None = DIALOGUE_LIMIT,
                 observation_limit: int = OBSERVATION_LIMIT) -> None:
        self.show_reward = show_reward
        self.dialogue_limit = dialogue_limit
        self.observation_limit = observation_limit


def prompt(name: str, spec: KindSpec, **fields: object) -> str:
    """Template `name` for the kind of `spec` (a strategy's: its environment's, `env.spec`):
    `<name>_<family>.txt` if there is one, else `<name>.txt` (the family is the kind's `prompts`,
    by default its name), with $language, $setting, $submit_argument, $submit_meaning and `fields`
    filled in."""
    values = {"language": spec.language, "setting": spec.setting, "submit_argument": spec.submit_argument,
              "submit_meaning": spec.submit_meaning, **fields}
    return _template(name, spec.prompt_family).substitute(values)


@functools.cache
def _template(name: str, family: str) -> Template:
    """Read once per process: strategies ask for prompts every turn, inside the event loop."""
    path = PROMPTS / f"{name}_{family}.txt"
    if not path.is_file():
        path = PROMPTS / f"{name}.txt"
    return Template(path.read_text())


def retry_message(spec: KindSpec) -> str:
    """The observation of a turn without code (the replay recognises it by its first words)."""
    return prompt("retry", spec)


def clip(observation: str, limit: int = OBSERVATION_LIMIT) -> str:
    """`observation` cut to `limit` characters, saying so, before it goes into a prompt."""
    if len(observation) <= limit:
        return observation
    return observation[:limit] + TRUNCATED


@dataclass
class Dialogue:
    """The messages of an episode: a pinned head (system prompt, question) and the turns after it,
    of which only the last `limit` (an answer and the feedback to it) are sent; with `by_message`,
    the last `limit` messages, as the paper's chat policy kept them."""

    head: list[Message]
    limit: int | None = DIALOGUE_LIMIT
    body: list[Message] = field(default_factory=list)
    setup: asyncio.Future[Any] | None = None  # the environment's reset, while the first answer is asked for
    by_message: bool = False

    def add(self, role: str, content: str) -> None:
        self.body.append({"role": role, "content": content})

    def window(self) -> list[Message]:
        kept = None if self.limit is None else self.limit if self.by_message else 2 * self.limit
        if kept is None or len(self.body) <= kept:
            return self.head + self.body
        return self.head + self.body[len(self.body) - kept:]


async def ask(model: Model, dialogue: Dialogue, task: Task, turn: int, style: AnswerStyle = "fenced") -> str:
    """The model's answer to the dialogue's window; it becomes part of the dialogue.

    The first answer is asked for while the environment resets (the question needs nothing from
    it): the container lease or database connection no longer adds to the episode's first turn.
    If the reset fails, the call is cancelled and the reset's error raised, as if it came first.
    """
    call = model.complete(dialogue.window(), task=task, turn=turn, style=style)
    setup, dialogue.setup = dialogue.setup, None
    output = await call if setup is None else await alongside(call, setup)
    dialogue.add("assistant", output)
    return output


async def alongside(call: Coroutine[Any, Any, T], setup: asyncio.Future[Any]) -> T:
    """`call`'s result, awaited while `setup` runs; if `setup` fails, `call` is cancelled and
    `setup`'s error raised."""
    async with TaskOwner("answer") as owner:  # leaving it stops the answer, if it is still running
        answer = owner.start(call, name="first answer")
        await setup  # usually done first; if it fails, the answer is moot
        return await answer


async def harness_step(env: EpisodeEnvironment, action: str) -> HarnessStep:
    """Run `action` as the original's multi-turn harness did.
    The kind's rule (`Environment.harness_step`): Bash and SQL score every action without ending
    the episode; Python auto-submits a `def` (other actions score 0); CTF scores only `submit
    FLAG`. A bare `submit` or `skip` ends it."""
    return await env.harness_step(action)


async def scored_turn(env: EpisodeEnvironment, output: str, action: str | None) -> Turn:
    """One turn of the harness: the retry message when there is no code, else run and score."""
    if action is None:
        return Turn(output, None, retry_message(env.spec), 0.0, False)
    step = await harness_step(env, action)
    return Turn(output, action, step.observation, step.reward, step.executed, step.breakdown)


async def begin(env: EpisodeEnvironment, task: Task, system: str, dialogue_limit: int | None, *,
                question: str | None = None, multi_turn: bool = True) -> tuple[EpisodeOutcome, Dialogue]:
    """Start an episode the way every strategy does: reset the environment (`multi_turn`: as the
    multi-turn harness, which lets CTF agents retry a wrong flag), open the dialogue with the
    system prompt (and the skills the task offers) and the question."""
    # awaited alongside the first answer (see ask()), unless the task may offer skills: they are
    # known once the environment is reset
    setup: asyncio.Future[str] | None = env.begin_reset(task, multi_turn=multi_turn)
    if task.offers_extras:
        await env.ready()
        setup, system = None, system + skills_block(env.spec, env.skills())
    question = question if question is not None else prompt("query", env.spec, query=task.query)
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    return EpisodeOutcome(task.id), Dialogue(messages, dialogue_limit, setup=setup)


SKILL_DESCRIPTION = 300  # characters of a skill's description in the prompt


def skills_block(spec: KindSpec, skills: list[Skill]) -> str:
    """The skills a task offers, for the end of a system prompt ("" when it offers none): each
    one's name, description and where its SKILL.md is in the container."""
    if not skills:
        return ""
    lines = []
    for skill in skills:
        description = " ".join(skill.description.split())
        if len(description) > SKILL_DESCRIPTION:
            description = description[:SKILL_DESCRIPTION - 3].rstrip() + "..."
        lines.append(f"- {skill.name}: {description} ({skill.path.rstrip('/')}/SKILL.md)")
    return "\n\n" + prompt("skills", spec, skills="\n".join(lines)).rstrip("\n")


def failed(outcome: EpisodeOutcome, error: ModelError) -> EpisodeOutcome:
    """The episode ends on a model failure or a spent budget: recorded as such, never scored as
    an answer (EpisodeOutcome.success is False for both)."""
    outcome.status = Status.BUDGET_EXHAUSTED if error.kind == "budget" else Status.MODEL_ERROR
    outcome.error = str(error)
    return outcome


def finish(outcome: EpisodeOutcome, *, ran_out: bool) -> EpisodeOutcome:
    """Set the status: solved when the last turn reached reward 1, else out of turns or submitted."""
    if outcome.turns and outcome.turns[-1].reward == 1.0:
        outcome.status = Status.SOLVED
    else:
        outcome.status = Status.MAX_TURNS if ran_out else Status.SUBMITTED
    return outcome
