"""`tools`: the project's own protocol with native function calling, not the paper's (whose agents
wrote their actions as text).

The model is offered two tools: the kind's own (`bash`, `sql`, `python`; CTF acts through `bash`:
`KindSpec.tool_name`), whose one argument is the action, and `submit` (with the kind's parameter
when `submit` takes one: CTF's flag, Python's function name). Each call of an answer runs in order
and is one turn, scored by the original harness's rule (the environment's `harness_step`,
environments/base.py: Python auto-submits a `def`, CTF goes on after a wrong flag); its observation
goes back as a `tool` message answering the call's id. The episode ends at reward 1 or at `submit`
(the calls after either are not run), or after `max_turns` answers.

Nothing runs for an answer without a call (one turn, reward 0, the retry message back as the
user's, as in Try Again), nor for a call of an unknown tool or with arguments that are not a JSON
object holding the argument (a turn without action, whose observation says what was wrong).
Every turn's `output` is its whole answer: the text, then one `name(arguments)` line per call.

A task that offers MCP servers (`env.tool_servers()`, Harbor's `[[environment.mcp_servers]]`) has
their tools offered too, as `<server>__<tool>` (agents/mcp_tools.py), and the system prompt lists
the skills it offers (turns.skills_block). A call of such a tool is a turn like any other: its
action `mcp:<server>.<tool> {arguments}`, its observation the tool's result as text, reward 0 (the
kinds that offer servers are scored at the end), noted in the environment's history (`note`) so
that Harbor's trajectory shows it. A server that can't be reached at the start ends the episode
with a task failure (ToolServerError, a TaskUnavailable: one line naming it and its URL); one that
fails a call later, or does not answer it in time, gives that line as the call's observation, and
the episode goes on.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from string import Template
from typing import TYPE_CHECKING, Any

from agents.base import (
    EpisodeOutcome,
    Model,
    ToolAnswer,
    ToolCall,
    ToolMessage,
    ToolModel,
    Turn,
)
from agents.llm.errors import ModelError
from agents.mcp_tools import McpTools, ToolServerError
from agents.recording import assistant_message
from agents.strategies.turns import (
    Dialogue,
    FeedbackOptions,
    alongside,
    begin,
    clip,
    failed,
    finish,
    retry_message,
    scored_turn,
)
from environments.kind import KindSpec
from foundation.errors import ConfigError

if TYPE_CHECKING:
    from environments.base import EpisodeEnvironment
    from tasks import Task

SUBMIT = "submit"
SYSTEM = Template(
    "You work with a $setting through the `$tool` tool: each call runs $language code and gives back what it "
    "printed$reward_note.\n"
    "Use as many calls as you need: first look around (what is there, how it is laid out), then run the code that "
    "answers the question or does the task.\n"
    "When you are done, call `submit`: $submit_meaning.\n"
    "Do not ask questions and do not invent outputs.")
REWARD_NOTE = ", with a reward between 0 and 1 that says how close you are (1 means solved)"
MCP_NOTE = ("\n\nThe task also offers tools of its own, each named after the server that serves it, then `__`, "
            "then the tool: call them where they help.")


class BadCall(ValueError):
    """A tool call that can't be run: why, in words for the model."""


def tool_model(model: Model | ToolModel) -> ToolModel:
    """`model` if it can answer with tool calls; else a ConfigError, before the episode starts."""
    if not callable(getattr(model, "complete_tools", None)):
        raise ConfigError(f"model {model.name!r} can't answer with tool calls, which the tools strategy needs "
                          f"({type(model).__name__} has no complete_tools): choose another strategy for it")
    return model  # type: ignore[return-value]  # it has complete_tools, checked above


def tool_schemas(spec: KindSpec) -> list[dict[str, Any]]:
    """The tools offered for a kind, in OpenAI's format: its action tool, then `submit`."""
    action = spec.tool_description or f"Run {spec.language} code in the {spec.setting} and return what it printed."
    submit_arguments = {spec.submit_parameter: spec.submit_argument.strip(" <>")} if spec.submit_parameter else {}
    return [_function(spec.tool_name, action, {spec.tool_argument: f"the {spec.language} code to run"}),
            _function(SUBMIT, f"Submit your answer: {spec.submit_meaning}.", submit_arguments)]


def _function(name: str, description: str, arguments: dict[str, str]) -> dict[str, Any]:
    properties = {argument: {"type": "string", "description": text} for argument, text in arguments.items()}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": list(arguments)}}}


def read_call(call: ToolCall, spec: KindSpec) -> str:
    """The action `call` asks for ("ls", "submit", "submit FLAG"); BadCall says what is wrong."""
    if call.name not in (spec.tool_name, SUBMIT):
        raise BadCall(f"there is no tool named {call.name!r}")
    parameter = spec.tool_argument if call.name == spec.tool_name else spec.submit_parameter
    arguments = _arguments(call)
    if not parameter:
        return SUBMIT
    value = arguments.get(parameter)
    if not isinstance(value, str) or not value.strip():
        raise BadCall(f"the arguments of {call.name} lack {parameter!r} (a non-empty string)")
    return value if call.name == spec.tool_name else f"{SUBMIT} {value.strip()}"


def _arguments(call: ToolCall) -> dict[str, Any]:
    if not call.arguments.strip():  # how some providers send a call without arguments
        return {}
    try:
        parsed = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        raise BadCall(f"the arguments of {call.name} are not JSON ({exc.msg})") from None
    if not isinstance(parsed, dict):
        raise BadCall(f"the arguments of {call.name} are not a JSON object")
    return parsed


def bad_call_message(spec: KindSpec, problem: BadCall) -> str:
    """The observation of a call that ran nothing; its first words are those the replay reads as a
    turn without code (orchestrator/fidelity/replayed_turn.py RETRY)."""
    submit = f'{{"{spec.submit_parameter}": "..."}}' if spec.submit_parameter else "{}"
    return (f"No {spec.language} code was run: {problem}. "
            f'Call {spec.tool_name} with {{"{spec.tool_argument}": "..."}}, or {SUBMIT} with {submit}.')


def rendered(answer: ToolAnswer) -> str:
    """The answer as a turn's output: its text, then one `name(arguments)` line per call."""
    lines = [answer.text.strip(), *(f"{call.name}({call.arguments})" for call in answer.tool_calls)]
    return "\n".join(line for line in lines if line)


@dataclass
class Exchanges:
    """The dialogue with tools: the pinned head, then each answer with the feedback to it. Only the
    last `limit` answers are sent, whole: a tool result never loses the call it answers."""

    head: list[ToolMessage]
    limit: int | None
    answers: list[list[ToolMessage]] = field(default_factory=list)

    def window(self) -> list[ToolMessage]:
        kept = self.answers if self.limit is None else self.answers[-self.limit:]
        return self.head + [message for exchange in kept for message in exchange]


@asynccontextmanager
async def task_tools(env: EpisodeEnvironment, task: Task) -> AsyncIterator[McpTools]:
    """The tools of the MCP servers the task offers (none for a task that offers none: its
    environment may still be resetting), connected for the episode."""
    async with McpTools(env.tool_servers() if task.offers_extras else []) as tools:
        yield tools


class Tools(FeedbackOptions):
    name = "tools"

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        caller = tool_model(model)
        spec = env.spec
        outcome, dialogue = await begin(env, task, self._system(spec), None)
        async with task_tools(env, task) as mcp:
            if mcp.schemas:
                dialogue.head[0]["content"] += MCP_NOTE
            tools = tool_schemas(spec) + mcp.schemas
            exchanges = Exchanges(list(dialogue.head), self.dialogue_limit)
            for number in range(max_turns):
                try:
                    answer = await self._ask(caller, dialogue, exchanges, tools, task, number)
                except ModelError as exc:
                    return failed(outcome, exc)
                exchange = [assistant_message(answer)]
                exchanges.answers.append(exchange)
                if await self._act(env, spec, mcp, answer, outcome.turns, exchange):
                    return finish(outcome, ran_out=False)
        return finish(outcome, ran_out=True)

    @staticmethod
    async def _ask(model: ToolModel, dialogue: Dialogue, exchanges: Exchanges, tools: list[dict[str, Any]],
                   task: Task, turn: int) -> ToolAnswer:
        """The model's answer; the first is asked for while the environment resets (turns.ask)."""
        call = model.complete_tools(exchanges.window(), tools, task=task, turn=turn)
        setup, dialogue.setup = dialogue.setup, None
        return await call if setup is None else await alongside(call, setup)

    async def _act(self, env: EpisodeEnvironment, spec: KindSpec, mcp: McpTools, answer: ToolAnswer,
                   turns: list[Turn], exchange: list[ToolMessage]) -> bool:
        """Run the answer's calls in order, a turn each, their results added to `exchange`; whether
        the episode ended."""
        output = rendered(answer)
        if not answer.tool_calls:
            turns.append(Turn(output, None, retry_message(spec), 0.0, False))
            exchange.append({"role": "user", "content": turns[-1].observation})
            return False
        for call in answer.tool_calls:
            if call.name in mcp:
                turn = await mcp_turn(env, spec, mcp, output, call)
                result = clip(turn.observation, self.observation_limit) or "No output"
            else:
                turn = await self._kind_turn(env, spec, output, call)
                result = self._result(spec, turn)
            turns.append(turn)
            if turn.reward == 1.0 or env.done:
                return True
            exchange.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return False

    @staticmethod
    async def _kind_turn(env: EpisodeEnvironment, spec: KindSpec, output: str, call: ToolCall) -> Turn:
        """A call of the kind's tool or `submit`: run and scored by the harness's rule."""
        try:
            action = read_call(call, spec)
        except BadCall as problem:
            return Turn(output, None, bad_call_message(spec, problem), 0.0, False)
        return await scored_turn(env, output, action)

    def _system(self, spec: KindSpec) -> str:
        note = REWARD_NOTE if self.show_reward and spec.shows_reward else ""
        return SYSTEM.substitute(setting=spec.setting, tool=spec.tool_name, language=spec.language,
                                 reward_note=note, submit_meaning=spec.submit_meaning)

    def _result(self, spec: KindSpec, turn: Turn) -> str:
        """What the model gets back for a call: the observation, clipped, and the reward if shown."""
        if turn.action is None:
            return turn.observation
        observation = clip(turn.observation, self.observation_limit) or "No output"
        return f"{observation}\nReward: {turn.reward}" if self.show_reward and spec.shows_reward else observation


async def mcp_turn(env: EpisodeEnvironment, spec: KindSpec, mcp: McpTools, output: str, call: ToolCall) -> Turn:
    """A call of a task's MCP tool: its result (or why there is none) is the observation, noted in
    the environment's history as `mcp:<server>.<tool> {arguments}`; it is not scored."""
    try:
        arguments = _arguments(call)
    except BadCall as problem:
        return Turn(output, None, bad_call_message(spec, problem), 0.0, False)
    action = mcp.action(call.name, arguments)
    try:
        observation, executed = await mcp.call(call.name, arguments), True
    except ToolServerError as failure:
        observation, executed = f"Error: {failure}", False
    if hasattr(env, "note"):  # an Environment here (a cluster's offers no servers)
        env.note(action, observation)
    return Turn(output, action, observation, 0.0, executed)
