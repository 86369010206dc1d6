"""What an episode's model calls were, recorded by the models themselves into the episode's context.

    calls = EpisodeCalls(transcript=Transcript())
    with calls.current():                        # the episode's task (a ContextVar: its own only)
        ... a strategy asks its model ...        # LLMModel, OracleModel, a replay: each call `recorded`

A model records each call as it returns (`recorded`): its place on the episode's timeline
(foundation/timeline.py), for an LLM what it cost (`LLMCall`: tokens, latency, attempts, the
served name), and with a transcript, what it sent, the tools it offered and its answer. Outside
an episode with calls to keep (a test driving a strategy by hand, `tasks check`) nothing is kept.
An agent's calls through the gateway arrive in the gateway's task: `ModelHandle` makes them in the
episode's context (agents/strategies/external.py).

The transcript's layout is the store's (orchestrator/store/transcript.py reads it back).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.base import ToolAnswer, ToolMessage
from foundation.timeline import record_call

if TYPE_CHECKING:
    from agents.llm.usage import Usage


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One LLM call of an episode, as the store keeps it."""

    model: str
    served_model: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int
    cost_usd: float | None
    started_s: float | None = None  # seconds since the episode began; None in stores written before


FORMAT = 1  # the body's layout; a reader refuses one it does not know
LEVEL = 6  # zlib's default: level 9 saves 1-2% more for twice the time


@dataclass
class Transcript:
    """Filled as the episode's model calls return (`record`), encoded once when it is stored."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[list[dict[str, Any]]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    _seen: dict[Any, int] = field(default_factory=dict, repr=False)
    _tool_seen: dict[str, int] = field(default_factory=dict, repr=False)

    def record(self, sent: Sequence[Mapping[str, Any]], answer: Mapping[str, Any],
               tools: Sequence[Mapping[str, Any]] | None = None, extra: Mapping[str, Any] | None = None) -> None:
        """One call: the messages it sent, its answer as the dialogue carries it, the tools it offered,
        and what else the provider sent with the answer."""
        numbers = [self._number(message) for message in sent]
        call: dict[str, Any] = {"sent": runs(numbers), "answer": self._number(answer)}
        if tools:
            call["tools"] = self._tool_number(tools)
        if extra:
            call["extra"] = dict(extra)
        self.calls.append(call)

    def _number(self, message: Mapping[str, Any]) -> int:
        key = _key(message)
        number = self._seen.get(key)
        if number is None:
            number = self._seen[key] = len(self.messages)
            self.messages.append(dict(message))  # a copy: the strategy may change its own afterwards
        return number

    def _tool_number(self, tools: Sequence[Mapping[str, Any]]) -> int:
        text = json.dumps(tools, sort_keys=True)
        if text not in self._tool_seen:
            self._tool_seen[text] = len(self.tools)
            self.tools.append([dict(tool) for tool in tools])
        return self._tool_seen[text]

    def encode(self) -> bytes:
        body = {"messages": self.messages, "tools": self.tools, "calls": self.calls}
        return zlib.compress(json.dumps(body, separators=(",", ":"), default=str).encode(), LEVEL)


def _key(message: Mapping[str, Any]) -> Any:
    """What makes two messages the same. A plain one (role and text) is keyed by the pair, whose
    strings hash once (the dialogue sends the same string objects call after call)."""
    content = message.get("content")
    if len(message) == 2 and isinstance(content, str):
        return message.get("role"), content
    return json.dumps(message, sort_keys=True, default=str)


def runs(numbers: Sequence[int]) -> list[list[int]]:
    """Consecutive numbers as half-open runs: [0, 1, 4, 5, 6] -> [[0, 2], [4, 7]]."""
    found: list[list[int]] = []
    for n in numbers:
        if found and found[-1][1] == n:
            found[-1][1] = n + 1
        else:
            found.append([n, n + 1])
    return found


@dataclass
class EpisodeCalls:
    """Where an episode's model calls are kept: its LLM calls, and its transcript if it keeps one."""

    calls: list[LLMCall] = field(default_factory=list)
    transcript: Transcript | None = None

    @contextmanager
    def current(self) -> Iterator[EpisodeCalls]:
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)


_CURRENT: ContextVar[EpisodeCalls | None] = ContextVar("episode_calls", default=None)


def recorded(start: float, sent: Sequence[Mapping[str, Any]], answer: str | ToolAnswer, *,
             tools: Sequence[Mapping[str, Any]] | None = None, usage: Usage | None = None,
             extra: Mapping[str, Any] | None = None) -> None:
    """A model call that began at `start` (wall clock) returned `answer` now: on the episode's
    timeline, among its LLM calls when it has a `usage` (an LLM's), and in its transcript."""
    began = record_call(start)
    calls = _CURRENT.get()
    if calls is None:
        return
    if usage is not None:
        calls.calls.append(LLMCall(usage.model, usage.served_model, usage.prompt_tokens, usage.completion_tokens,
                                   usage.latency_s, usage.attempts, usage.cost_usd, started_s=began))
    if calls.transcript is not None:
        message: Mapping[str, Any] = (assistant_message(answer) if isinstance(answer, ToolAnswer)
                                      else {"role": "assistant", "content": answer})
        calls.transcript.record(sent, message, tools, extra)


def assistant_message(answer: ToolAnswer) -> ToolMessage:
    """The answer as the dialogue carries it, in OpenAI's form (litellm converts it for others)."""
    if not answer.tool_calls:
        return {"role": "assistant", "content": answer.text}
    calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
             for c in answer.tool_calls]
    return {"role": "assistant", "content": answer.text or None, "tool_calls": calls}
