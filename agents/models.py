"""The models a strategy can run with: an LLM through LLMClient, and the oracle (the replay of a
trajectory file is the application's: orchestrator/fidelity/replay_model.py).

    model = LLMModel(client, "openai/gpt-4o")
    model = OracleModel()                                       # the task's gold solution

Offline models answer like an LLM would, with the action in a fenced block of the kind's
language (or, asked with tools, as a call of the kind's tool), so the strategies' prompting and
parsing run the same path with or without a key.
`check_llm` rejects a bad name, or a real provider without its key, with one ConfigError
line before any container starts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from agents.base import AnswerStyle, Message, ToolAnswer, ToolCall, ToolMessage
from agents.recording import recorded
from environments.kind import gold_actions, kind_spec
from foundation.errors import ConfigError

if TYPE_CHECKING:
    from agents.llm import LLM, Completion, LLMClient
    from tasks import Task

def fenced(task: Task, action: str) -> str:
    """`action` as a model would write it: one fenced block in the language of the task's kind."""
    return f"```{kind_spec(task.kind).fence}\n{action}\n```"


def answer_as(task: Task, action: str, style: AnswerStyle = "fenced", turn: int = 0) -> str:
    """`action` as a model would write it for a strategy that reads `style`: a fenced block; for
    the paper's parsers a bare command (its Bash rule lower-cases fenced code), SQL still fenced
    (its keyword rule would start at a SHOW inside a column name); for ReAct one numbered
    Thought and Action, the code inside `execute[...]`."""
    if style == "react":
        line = action.strip() if action.strip().split(maxsplit=1)[:1] == ["submit"] else f"execute[{action}]"
        return f"Thought {turn + 1}: I know what to do.\nAction {turn + 1}: {line}"
    if style == "terminus":  # keystrokes; `submit` is the task marked complete (and confirmed)
        done = action.strip().split(maxsplit=1)[:1] == ["submit"]
        commands = [] if done else [{"keystrokes": f"{action}\n", "duration": 600.0}]  # the wait ends once idle
        return json.dumps({"analysis": "I know what to do.", "plan": "Done." if done else "Type the command.",
                           "commands": commands, "task_complete": done})
    if style == "plan":
        return plan_as([action])
    if style == "paper" and not kind_spec(task.kind).paper_fenced:
        return action
    return fenced(task, action)


def plan_as(actions: Sequence[str]) -> str:
    """`actions` as the numbered plan a model would write for Plan & Solve: one step each, on a line."""
    return "\n".join(f"{n}. Run {' '.join(action.split())}" for n, action in enumerate(actions, 1))


def planned(actions: Sequence[str]) -> list[str]:
    """The gold's actions a plan holds: every one up to the last that is not a `submit` (the
    submits between them end a multi-step task's steps); the closing submit is the episode's own
    end. At least the first: a gold that is only a submit (CTF's flag) plans that."""
    last = max((i for i, action in enumerate(actions) if action.split()[:1] != ["submit"]), default=0)
    return list(actions[:last + 1])


def tool_call_as(task: Task, action: str, call_id: str) -> ToolCall:
    """`action` as a model offered tools would make it: `submit` (with the kind's parameter, when
    it takes one: CTF's flag) or a call of the kind's tool with the action as its argument."""
    spec = kind_spec(task.kind)
    word, _, rest = action.strip().partition(" ")
    if word != "submit":
        return ToolCall(call_id, spec.tool_name, json.dumps({spec.tool_argument: action}))
    arguments = {spec.submit_parameter: rest.strip()} if spec.submit_parameter else {}
    return ToolCall(call_id, "submit", json.dumps(arguments))


class LLMModel:
    """A model behind an LLM client (the `LLM` protocol: LLMClient, or a stand-in); `params` (temperature, max_tokens, ...) go with every call, and
    `route(task, style, turn)`'s with each (an offline server's key of the task it answers).
    `completion` is the call itself, with everything the provider answered; `complete` and
    `complete_tools` record theirs into the episode's context (agents/recording.py)."""

    def __init__(self, client: LLM, model: str, *,
                 route: Callable[[Task, AnswerStyle | Literal["tools"], int], dict[str, Any]] | None = None,
                 **params: Any) -> None:
        self.client, self.name, self.params, self.route = client, model, params, route

    async def completion(self, messages: Sequence[Message] | Sequence[ToolMessage], *, task: Task, turn: int,
                         style: AnswerStyle | Literal["tools"], tools: Sequence[dict[str, Any]] | None = None,
                         ) -> Completion:
        params = dict(self.params)
        for key, value in (self.route(task, style, turn) if self.route is not None else {}).items():
            both_dicts = isinstance(value, dict) and isinstance(params.get(key), dict)
            params[key] = {**params[key], **value} if both_dicts else value  # extra_body: merged
        if tools is not None:
            params["tools"] = tools
        return await self.client.complete(self.name, messages, **params)

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int,
                       style: AnswerStyle = "fenced") -> str:
        start = time.time()
        completion = await self.completion(messages, task=task, turn=turn, style=style)
        recorded(start, messages, completion.text, usage=completion.usage, extra=_extra(completion))
        return completion.text

    async def complete_tools(self, messages: Sequence[ToolMessage], tools: Sequence[dict[str, Any]], *,
                             task: Task, turn: int) -> ToolAnswer:
        start = time.time()
        completion = await self.completion(messages, task=task, turn=turn, style="tools", tools=tools)
        answer = ToolAnswer(completion.text, completion.tool_calls)
        recorded(start, messages, answer, tools=tools, usage=completion.usage, extra=_extra(completion))
        return answer


def _extra(completion: Completion) -> dict[str, Any]:
    """What the provider sent beside the answer (finish reason, reasoning), for the transcript."""
    extra: dict[str, Any] = {"finish_reason": completion.finish_reason} if completion.finish_reason else {}
    return extra | json.loads(completion.raw) if completion.raw else extra


class OracleModel:
    """Answers the gold solution: the actions `validate` runs, one per turn (then `submit` again);
    asked for a plan, a step for each of them; asked with tools, all of them as calls of the first
    answer (then `submit` again)."""

    name = "oracle"

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int,
                       style: AnswerStyle = "fenced") -> str:
        start, actions = time.time(), gold_actions(task)
        if style == "plan":  # every step of the gold: the turns that follow answer them in order
            text = plan_as(planned(actions))
        else:
            text = answer_as(task, actions[min(turn, len(actions) - 1)], style, turn)
        recorded(start, messages, text)
        return text

    async def complete_tools(self, messages: Sequence[ToolMessage], tools: Sequence[dict[str, Any]], *,
                             task: Task, turn: int) -> ToolAnswer:
        start, actions = time.time(), gold_actions(task)
        actions = actions if turn == 0 else actions[-1:]
        answer = ToolAnswer("", tuple(tool_call_as(task, action, f"call_oracle_{turn}_{i}")
                                      for i, action in enumerate(actions)))
        recorded(start, messages, answer, tools=tools)
        return answer


def check_llm(name: str, client: LLMClient) -> None:
    """Raise ConfigError unless litellm can route `name` and, for a real provider, its key is set."""
    from agents.llm._litellm import litellm

    spec = client._spec(name)  # noqa: SLF001 — the client's own view of the model (api_base, key)
    provider = _provider(name, litellm)
    if provider is None:
        raise ConfigError(f"unknown model {name!r}: not in litellm's model list; use oracle, replay:PATH, "
                          "or a provider-prefixed name such as openai/<model> (with an api_base for a local server)")
    if spec.api_key is not None:
        return
    routed = name if "/" in name else f"{provider}/{name}"
    missing = litellm.validate_environment(model=routed).get("missing_keys") or []
    if spec.api_base is not None:  # the endpoint is given; its key is still needed (a local one takes any)
        missing = [var for var in missing if not var.endswith("_BASE")]
    if missing:
        raise ConfigError(f"model {name!r} needs {', '.join(missing)} in the environment (not set)")


def _provider(name: str, litellm: Any) -> str | None:
    entry = litellm.model_cost.get(name)
    if isinstance(entry, dict) and entry.get("litellm_provider"):
        return str(entry["litellm_provider"])
    if "/" not in name or name.split("/", 1)[0] not in litellm.provider_list:
        return None
    try:
        return str(litellm.get_llm_provider(name)[1])
    except Exception:  # noqa: BLE001 — litellm raises assorted types for a name it can't route
        return None
