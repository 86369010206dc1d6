"""ScriptedModel: a Model that answers from a list, for the tests (no product code uses it).

    model = ScriptedModel(["```bash\nls\n```", "```bash\nsubmit\n```"])
    model = ScriptedModel([called(("bash", {"command": "ls"}), ("submit", "{}")), "no call at all"])

Each call returns the next output; an exception in the list is raised instead. Past the end it
raises ModelError (kind "unknown"), so a strategy that asks too often fails visibly. Every call's
messages are kept in `calls` (and the tools offered, for `complete_tools`, in `offered`).

A `ToolAnswer` in the list is an answer with tool calls, for the `tools` strategy; there a plain
string is an answer of text alone. `complete` refuses a ToolAnswer.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents.base import AnswerStyle, Message, ToolAnswer, ToolCall, ToolMessage
from agents.llm.errors import ModelError
from agents.recording import recorded

if TYPE_CHECKING:
    from tasks import Task


def called(*calls: tuple[str, str | Mapping[str, Any]], text: str = "") -> ToolAnswer:
    """An answer that calls each `(name, arguments)` in order: arguments as raw JSON text (which
    may be invalid on purpose) or a mapping to encode. Each call gets a unique id, as a provider's."""
    return ToolAnswer(text, tuple(
        ToolCall(f"call_{uuid.uuid4().hex[:12]}", name,
                 arguments if isinstance(arguments, str) else json.dumps(arguments))
        for name, arguments in calls))


class ScriptedModel:
    def __init__(self, outputs: Sequence[str | ToolAnswer | BaseException], name: str = "scripted") -> None:
        self.name = name
        self.outputs = list(outputs)
        self.calls: list[list[dict[str, Any]]] = []
        self.offered: list[list[dict[str, Any]]] = []

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int,
                       style: AnswerStyle = "fenced") -> str:
        start, output = time.time(), self._next(messages)
        if isinstance(output, ToolAnswer):
            raise ModelError(self.name, "scripted a tool answer, but the strategy asked for text")
        recorded(start, messages, output)  # into the episode's context, as every model does
        return output

    async def complete_tools(self, messages: Sequence[ToolMessage], tools: Sequence[dict[str, Any]], *,
                             task: Task, turn: int) -> ToolAnswer:
        self.offered.append([dict(t) for t in tools])
        start, output = time.time(), self._next(messages)
        answer = output if isinstance(output, ToolAnswer) else ToolAnswer(output)
        recorded(start, messages, answer, tools=tools)
        return answer

    def _next(self, messages: Sequence[dict[str, Any]]) -> str | ToolAnswer:
        self.calls.append([dict(m) for m in messages])
        if len(self.calls) > len(self.outputs):
            raise ModelError(self.name, f"script exhausted after {len(self.outputs)} outputs")
        output = self.outputs[len(self.calls) - 1]
        if isinstance(output, BaseException):
            raise output
        return output
