"""An episode's stored transcript in Inspect AI's terms, for `export --format inspect` (inspect_log.py).

The sample's messages are the conversation as the viewer's episode page shows it: each call's new
messages, then its answer (a window that drops old turns repeats nothing). Each call is also a
ModelEvent, with exactly the messages it sent, the tools it offered and its answer with its usage,
so `inspect view` shows every call as the model had it. The turns an answer produced ride in the
answer's metadata (reward, executed, the reward's breakdown).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from inspect_ai.event import ModelEvent
from inspect_ai.model import (ChatCompletionChoice, ChatMessage, ChatMessageAssistant, ChatMessageSystem,
                              ChatMessageTool, ChatMessageUser, GenerateConfig, ModelOutput, ModelUsage, StopReason)
from inspect_ai.tool import ToolCall, ToolInfo, ToolParams

from orchestrator.store.transcript import StoredTranscript, turns_of_calls

STOP: dict[str, StopReason] = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls",
                               "function_call": "tool_calls", "content_filter": "content_filter"}


def conversation(model: str, transcript: StoredTranscript,
                 turns: Sequence[sqlite3.Row | Mapping[str, Any]]) -> list[ChatMessage]:
    """Every message once, in order: each call's new messages, then its answer (with its turns)."""
    owned = turns_of_calls(transcript.calls, [t["output"] for t in turns])
    messages: list[ChatMessage] = []
    for call, mine in zip(transcript.calls, owned, strict=True):
        messages += [chat_message(m, model) for m in call.added]
        messages.append(chat_message(call.answer, model, _turns_metadata([turns[i] for i in mine])))
    return messages


def model_events(model: str, transcript: StoredTranscript, usage: Sequence[ModelUsage | None],
                 when: datetime) -> list[ModelEvent]:
    """One ModelEvent per call: what it sent, the tools it offered, its answer and usage."""
    events = []
    for call, used in zip(transcript.calls, usage, strict=True):
        answer = chat_message(call.answer, model)
        assert isinstance(answer, ChatMessageAssistant)
        stop = STOP.get(str(call.extra.get("finish_reason")), "unknown")
        output = ModelOutput(model=model, choices=[ChatCompletionChoice(message=answer, stop_reason=stop)], usage=used)
        events.append(ModelEvent(model=model, input=[chat_message(m, model) for m in call.sent],
                                 tools=[tool_info(t) for t in call.tools or []],
                                 tool_choice="auto" if call.tools else "none", config=GenerateConfig(),
                                 output=output, timestamp=when, metadata=dict(call.extra) or None))
    return events


def chat_message(m: Mapping[str, Any], model: str, metadata: dict[str, Any] | None = None) -> ChatMessage:
    """An OpenAI-form message (what the dialogue carries) as Inspect's."""
    role, content = m.get("role"), m.get("content")
    text = content if isinstance(content, str) else "" if content is None else json.dumps(content)
    if role == "system":
        return ChatMessageSystem(content=text)
    if role == "tool":
        return ChatMessageTool(content=text, tool_call_id=m.get("tool_call_id"))
    if role == "assistant":
        calls = [_tool_call(c) for c in m.get("tool_calls") or [] if isinstance(c, dict) and "function" in c]
        return ChatMessageAssistant(content=text, model=model, tool_calls=calls or None, metadata=metadata)
    return ChatMessageUser(content=text)


def _tool_call(call: Mapping[str, Any]) -> ToolCall:
    function = call["function"]
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):  # what the model sent was no JSON object: kept as it came
        arguments = {"_raw": function.get("arguments")}
    return ToolCall(id=str(call.get("id", "")), function=str(function.get("name", "")), arguments=arguments)


def tool_info(tool: Mapping[str, Any]) -> ToolInfo:
    """An OpenAI-format function schema as Inspect's ToolInfo."""
    function = tool.get("function", tool)
    parameters = function.get("parameters") or {}
    return ToolInfo(name=function.get("name", ""), description=function.get("description", ""),
                    parameters=ToolParams(properties=parameters.get("properties", {}),
                                          required=parameters.get("required", [])))


def _turns_metadata(turns: Sequence[sqlite3.Row | Mapping[str, Any]]) -> dict[str, Any] | None:
    if not turns:
        return None
    return {"turns": [{"turn": t["idx"] + 1, "action": t["action"], "reward": t["reward"],
                       "executed": bool(t["executed"]),
                       "breakdown": _breakdown(t)} for t in turns]}


def _breakdown(turn: sqlite3.Row | Mapping[str, Any]) -> Any:
    text = turn["breakdown"] if "breakdown" in turn.keys() else None  # a store from before the column
    return json.loads(text) if text else None
