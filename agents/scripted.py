"""ScriptedModel: a Model that answers from a list, for tests and demos.

    model = ScriptedModel(["```bash\nls\n```", "```bash\nsubmit\n```"])

Each call returns the next output; an exception in the list is raised instead. Past the end it
raises ModelError (kind "unknown"), so a strategy that asks too often fails visibly. Every call's
messages are kept in `calls`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agents.base import AnswerStyle, Message
from agents.llm.errors import ModelError

if TYPE_CHECKING:
    from tasks import Task


class ScriptedModel:
    def __init__(self, outputs: Sequence[str | BaseException], name: str = "scripted") -> None:
        self.name = name
        self.outputs = list(outputs)
        self.calls: list[list[Message]] = []

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int,
                       style: AnswerStyle = "fenced") -> str:
        self.calls.append([dict(m) for m in messages])
        if len(self.calls) > len(self.outputs):
            raise ModelError(self.name, f"script exhausted after {len(self.outputs)} outputs")
        output = self.outputs[len(self.calls) - 1]
        if isinstance(output, BaseException):
            raise output
        return output
