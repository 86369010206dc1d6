"""An episode's timeline: a row per turn, each span (model call, action, scoring) a bar placed at
when it began and as long as it took, on one scale for the whole episode; the durations in words
beside it. Each row is a small SVG (the page's Content-Security-Policy allows no inline style):
the kinds differ in colour and in height, so they stay apart without colour too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.store.records import TurnRecord
from orchestrator.view.layout import esc

KINDS = {"call": "model call", "action": "action", "reward": "scoring"}
BAND = {"call": (0, 14), "action": (2, 10), "reward": (4, 6)}  # each kind's y and height in a row 14 high
WIDTH = 1000  # the rows' drawing width; the SVG stretches it to the column


def timeline(turns: Sequence[TurnRecord]) -> str:
    """The timeline of the turns whose spans were stored; "" when none were (an older store)."""
    timed = [(i, t) for i, t in enumerate(turns) if t.spans]
    if not timed:
        return ""
    spans = [s for _, t in timed for s in _spans(t)]
    origin = min(s[1] for s in spans)
    total = max(s[1] + s[2] for s in spans) - origin or 1.0
    rows = [_row(i, t, origin, total) for i, t in timed]
    legend = " ".join(f'<svg class="tl-key" viewBox="0 0 20 14"><rect class="tl-{k}" x="0" y="{BAND[k][0]}" width="20" '
                      f'height="{BAND[k][1]}"/></svg>{esc(v)}' for k, v in KINDS.items())
    return (f'<div class="timeline" id="timeline"><p class="small">{legend} · the episode\'s turns over '
            f"{_seconds(total)}, from its first model call</p>{''.join(rows)}</div>")


def _spans(turn: TurnRecord) -> list[tuple[str, float, float]]:
    found = []
    for item in turn.spans or []:
        if isinstance(item, list) and len(item) == 3 and item[0] in KINDS and _number(item[1]) and _number(item[2]):
            found.append((str(item[0]), float(item[1]), max(float(item[2]), 0.0)))
    return found


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _row(i: int, turn: TurnRecord, origin: float, total: float) -> str:
    bars = []
    for kind, start, took in _spans(turn):
        x, width = WIDTH * (start - origin) / total, max(WIDTH * took / total, 2.0)
        y, height = BAND[kind]
        title = f"{KINDS[kind]}: {_seconds(took)}, from {_seconds(start - origin)}"
        bars.append(f'<rect class="tl-{kind}" x="{x:.1f}" y="{y}" width="{min(width, WIDTH - x):.1f}" '
                    f'height="{height}"><title>{esc(title)}</title></rect>')
    track = (f'<svg class="tl-track" viewBox="0 0 {WIDTH} 14" preserveAspectRatio="none" role="img" '
             f'aria-label="turn {i + 1}: {esc(words(turn))}">{"".join(bars)}</svg>')
    return (f'<div class="tl-row"><a class="tl-label" href="#turn-{i + 1}">turn {i + 1}</a>{track}'
            f'<span class="tl-words small">{esc(words(turn))}</span></div>')


def words(turn: TurnRecord) -> str:
    """How long the turn took, and its parts: "2.31 s: model call 2.10 s · action 0.15 s · scoring 0.06 s"."""
    parts: dict[str, float] = {}
    for kind, _, took in _spans(turn):
        parts[kind] = parts.get(kind, 0.0) + took
    inner = " · ".join(f"{KINDS[k]} {_seconds(v)}" for k, v in parts.items())
    head = _seconds(turn.duration_s) if turn.duration_s is not None else ""
    return f"{head}: {inner}" if head and inner else head or inner


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"

