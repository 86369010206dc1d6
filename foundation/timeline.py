"""An episode's timeline: when each model call, action and scoring began and how long it took,
and which of them made each turn.

    timeline = Timeline()
    with timeline.current():                     # the episode's task (a ContextVar: its own only)
        with span("action"): ...                 # an environment runs an action
        with span("reward"): ...                 # ... or scores one
        began = record_call(start)               # a model call returned (the episode's next call)
        timing = turn_timing(output)             # a turn was made: what it took since the last

The environment and the model wrapper report what they do; a turn, when it is made, takes the
spans since the turn before. Outside an episode (a test driving an environment by hand) nothing
is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["call", "action", "reward"]


@dataclass(frozen=True, slots=True)
class Span:
    kind: Kind
    start: float  # seconds since the episode began
    duration: float
    call: int | None = None  # a call's number among the episode's calls


@dataclass(frozen=True, slots=True)
class TurnTiming:
    """What made one turn: its spans (the calls, actions and scorings since the turn before, in
    the order they began) and the call whose answer it is (None: no answer made it, as a closing
    `submit` the sweep sent)."""

    spans: tuple[Span, ...]
    call: int | None
    # When the first span began, and how long until the last ended; None without spans. Derived
    # once, when the turn is made (the runner reads them as it stores the turn).
    start: float | None = field(init=False)
    duration: float | None = field(init=False)

    def __post_init__(self) -> None:
        start = self.spans[0].start if self.spans else None
        duration = max(s.start + s.duration for s in self.spans) - self.spans[0].start if self.spans else None
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "duration", duration)


@dataclass
class Timeline:
    origin: float = field(default_factory=time.time)  # the episode's start, wall clock
    _spans: list[Span] = field(default_factory=list)
    _calls: int = 0
    _taken: int = 0  # spans already given to a turn
    _last_call: int | None = None
    running: Kind | None = None  # what the episode is doing now, if inside a span (`tasks check` shows it)

    @contextmanager
    def current(self) -> Iterator[Timeline]:
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

    def add(self, span: Span) -> None:
        self._spans.append(span)

    def call(self, start: float) -> float:
        number, self._calls = self._calls, self._calls + 1
        self._spans.append(Span("call", start - self.origin, time.time() - start, number))
        return start - self.origin

    def turn(self, output: str) -> TurnTiming:
        spans = tuple(sorted(self._spans[self._taken:], key=lambda s: s.start))
        self._taken = len(self._spans)
        calls = [s.call for s in spans if s.call is not None]
        if calls:
            self._last_call = calls[-1]
        # A turn without a call of its own (a tools answer's second call of a function) is the
        # previous call's; a turn without output (a closing `submit` the sweep sent) is none's.
        return TurnTiming(spans, self._last_call if output.strip() else None)


_CURRENT: ContextVar[Timeline | None] = ContextVar("episode_timeline", default=None)


@contextmanager
def span(kind: Kind) -> Iterator[None]:
    """Time what the block does as a span of the current episode's timeline, if there is one."""
    timeline = _CURRENT.get()
    if timeline is None:
        yield
        return
    start, before = time.time(), timeline.running
    timeline.running = kind
    try:
        yield
    finally:
        timeline.running = before
        timeline.add(Span(kind, start - timeline.origin, time.time() - start))


def record_call(start: float) -> float | None:
    """A model call that began at `start` (wall clock) returned now: the next of the episode's calls
    (its number is its place among them). Returns when it began, in seconds since the episode began."""
    timeline = _CURRENT.get()
    return None if timeline is None else timeline.call(start)


def turn_timing(output: str) -> TurnTiming | None:
    """The timing of a turn made now, with output `output`; None outside an episode."""
    timeline = _CURRENT.get()
    return None if timeline is None else timeline.turn(output)
