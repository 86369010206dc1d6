"""An episode's transcript: every message each model call sent, the tools it offered, and its answer.

A dialogue grows by appending (and, with a window, drops its oldest turns), so consecutive calls
share almost all of their messages. The transcript keeps each distinct message once, in the order
it first appeared, and a call as the runs of message numbers it sent (`[[0, 2], [5, 9]]`: messages
0-1 and 5-8), the tool list it offered (a number into the episode's distinct tool lists) and its
answer (a message number, with what else the provider sent beside it: finish reason, reasoning).
No prefix is stored twice; rebuilding call k's messages is a lookup per run.

A message is kept as the model saw it at the call: a strategy that edits a message afterwards
(the paper's Try Again puts its parser's reading in place of the answer) makes a new one.

Stored (table `transcripts`) as zlib-compressed JSON, `{"messages": [...], "tools": [[...]],
"calls": [{"sent": runs, "tools": n | null, "answer": n, "extra": {...}}]}`: the feedback
messages repeat their template and the question every turn, which the compression keeps once.
"""

from __future__ import annotations

import itertools
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.recording import FORMAT, Transcript, runs

__all__ = ["FORMAT", "Transcript", "runs", "decode", "prompt_lines", "prompts_beside", "turns_of_calls"]  # the writer's half: agents/recording.py

PROMPT_ROLES = ("system", "developer", "user")  # the roles of the messages a model is prompted with


@dataclass(frozen=True)
class Call:
    """One model call as read back: what it sent, the tools it offered, its answer; `added` are the
    messages of `sent` the dialogue gained since the call before (its answer left out when the
    dialogue carries it as it was: the page shows it once, as that call's answer)."""

    sent: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    answer: dict[str, Any]
    extra: dict[str, Any]
    added: list[dict[str, Any]]


@dataclass(frozen=True)
class StoredTranscript:
    messages: list[dict[str, Any]]
    calls: list[Call]


def _body(body: bytes, format_: int) -> dict[str, Any]:
    """A stored body's JSON; ValueError for a format this reader does not know."""
    if format_ != FORMAT:
        raise ValueError(f"transcript format {format_} is newer than this reader ({FORMAT})")
    data: dict[str, Any] = json.loads(zlib.decompress(body))
    return data


def decode(body: bytes, format_: int = FORMAT) -> StoredTranscript:
    """The transcript of a stored body; ValueError for a format this reader does not know."""
    data = _body(body, format_)
    messages, tools = data["messages"], data["tools"]
    calls: list[Call] = []
    before: list[int] = []
    answer = -1
    for call in data["calls"]:
        numbers = [n for start, stop in call["sent"] for n in range(start, stop)]
        added = numbers[kept(before, numbers):]
        if added and added[0] == answer:
            added = added[1:]
        calls.append(Call([messages[n] for n in numbers], tools[call["tools"]] if "tools" in call else None,
                          messages[call["answer"]], call.get("extra", {}), [messages[n] for n in added]))
        before, answer = numbers, call["answer"]
    return StoredTranscript(messages, calls)


def prompt_lines(body: bytes, format_: int = FORMAT) -> list[str]:
    """The prompts of a stored body: the lines of its system and user messages, each distinct one
    once (a dialogue sends its template again every turn), in the order they were first sent. What
    the viewer's full-text index keeps of a transcript: answers and tool results are the turns'
    outputs and observations. ValueError as `decode`."""
    messages = _body(body, format_)["messages"]
    texts = [content_text(m.get("content")) for m in messages if m.get("role") in PROMPT_ROLES]
    lines = dict.fromkeys(itertools.chain.from_iterable(text.splitlines() for text in texts))
    lines.pop("", None)
    return list(lines)


# What reading a stored body raises when it is not one this code can read (a newer format, damage).
UNREADABLE = (ValueError, KeyError, TypeError, zlib.error)


def prompts_beside(body: bytes, format_: int, observations: str | None) -> str:
    """The prompt lines of a stored body (`prompt_lines`) that are none of the episode's
    `observations`' lines, joined: what the full-text index and the search's snippets take of a
    transcript (the observations are theirs as such). ValueError as `decode`."""
    seen = set((observations or "").splitlines())
    return "\n".join(line for line in prompt_lines(body, format_) if line not in seen)


def content_text(content: Any) -> str:
    """A message's text: its content, or the text parts of content given as parts."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p["text"]) for p in parts if isinstance(p, dict) and p.get("text"))


def kept(before: Sequence[int], now: Sequence[int]) -> int:
    """How many leading messages of `now` the call before sent too. A dialogue keeps a head
    (system prompt, question), may drop its oldest turns after it (a window), and appends: so
    `now` is before's first h, then before's messages from h + d on, then what is new. The
    largest such explanation wins (a window of n messages: at most n**3 steps, n is small)."""
    best = 0
    for h in range(min(len(before), len(now)) + 1):
        if h and before[h - 1] != now[h - 1]:
            break
        for d in range(len(before) - h + 1):
            tail = before[h + d:]
            if len(tail) + h > best and list(now[h:h + len(tail)]) == list(tail):
                best = h + len(tail)
    return best


def answer_text(answer: Mapping[str, Any]) -> str:
    """An answer as a turn's `output` holds it: the text, then one `name(arguments)` line per tool
    call (the tools strategy's rendering)."""
    lines = [str(answer.get("content") or "").strip()]
    lines += [f"{c['function']['name']}({c['function']['arguments']})" for c in answer.get("tool_calls") or []
              if isinstance(c, dict) and "function" in c]
    return "\n".join(line for line in lines if line)


def turns_of_calls(calls: Sequence[Call], outputs: Sequence[str]) -> list[list[int]]:
    """For each call, the turns (indices into `outputs`) its answer produced. A turn belongs to the
    next call whose answer reads as the turn's output, or else to the previous turn's call (a tools
    answer makes a turn per tool call); the search goes forward only, over calls that made no turn
    (a plan). A turn no answer produced (a closing `submit` the strategy or the sweep made) stays
    with the call before it."""
    texts = [answer_text(call.answer) for call in calls]
    owned: list[list[int]] = [[] for _ in calls]
    at = -1
    for turn, whole in enumerate(outputs):
        output = whole.strip()
        ahead = next((i for i in range(at + 1, len(calls)) if texts[i] == output), None)
        if ahead is not None and (at < 0 or texts[at] != output or ahead == at + 1):
            at = ahead  # a model that repeats itself: the next call, not the same one again
        if calls:
            owned[max(at, 0)].append(turn)
    return owned
