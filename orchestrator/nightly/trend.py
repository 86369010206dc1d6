"""The trend chart of the nightly report: one line per cell, a metric in [0, 1] across nights.

It shares report/svg.py's frame (axes, grid, legend, palette) so the nightly page reads like the
sweep report; what differs is the x axis (nights, labelled by date) and gaps: a night that did
not run a cell breaks its line instead of drawing a fake point.
"""

from __future__ import annotations

from html import escape

from orchestrator.report.svg import HEIGHT, LEFT, RIGHT, WIDTH, colour, frame, y_of

Series = tuple[str, list[float | None]]  # (cell name, value per night; None: not run that night)


def trend_chart(title: str, nights: list[str], series: list[Series], metric: str) -> str:
    """`nights` are the x labels, oldest first; each series has one value (or None) per night."""
    span = (WIDTH - RIGHT - LEFT) / max(len(nights) - 1, 1)
    every = max(1, len(nights) // 8)  # at most ~8 labels, so dates don't overlap
    body = [f'<text x="{LEFT + i * span:.1f}" y="{HEIGHT - 28}" text-anchor="middle" class="tick">{escape(label)}</text>'
            for i, label in enumerate(nights) if i % every == 0 or i == len(nights) - 1]
    for s, (name, values) in enumerate(series):
        for segment in _segments(values):
            coords = " ".join(f"{LEFT + i * span:.1f},{y_of(v):.1f}" for i, v in segment)
            body.append(f'<polyline points="{coords}" fill="none" stroke="{colour(s)}" stroke-width="2" '
                        f'data-series="{escape(name)}"><title>{escape(name)}</title></polyline>')
        body += [f'<circle cx="{LEFT + i * span:.1f}" cy="{y_of(v):.1f}" r="3.5" fill="{colour(s)}" class="point">'
                 f'<title>{escape(name)}: {metric} {v:.1%} on {escape(nights[i])}</title></circle>'
                 for i, v in enumerate(values) if v is not None]
    return frame(title, "night", body, [name for name, _ in series])


def _segments(values: list[float | None]) -> list[list[tuple[int, float]]]:
    """Runs of consecutive nights with a value; a single point still gets its circle, no line."""
    segments: list[list[tuple[int, float]]] = [[]]
    for i, value in enumerate(values):
        if value is None:
            segments.append([])
        else:
            segments[-1].append((i, value))
    return [s for s in segments if len(s) > 1]
