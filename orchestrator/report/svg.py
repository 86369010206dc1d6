"""Two small inline-SVG charts: lines of a rate against a budget, and grouped bars with whiskers.

Hand-written rather than matplotlib so report.html is one self-contained file with no extra
dependency. Both charts plot shares in [0, 1] on a fixed y axis, which keeps the code small and
makes charts comparable across task sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

# Okabe-Ito: distinguishable by colour-blind readers, and in greyscale print.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
WIDTH, HEIGHT = 720, 320
LEFT, RIGHT, TOP, BOTTOM = 52, 190, 34, 44  # plot margins; the legend sits in the right one


@dataclass(frozen=True)
class Bar:
    """One bar: a share in [0, 1] with its confidence interval."""

    value: float
    low: float
    high: float


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def y_of(value: float) -> float:
    """The y coordinate of a share in [0, 1] (charts that share the frame use it too)."""
    return TOP + (1 - value) * (HEIGHT - TOP - BOTTOM)


def frame(title: str, x_label: str, body: list[str], legend: list[str]) -> str:
    """The common parts: title, y axis with 0..100% grid lines, x label and legend."""
    plot_right = WIDTH - RIGHT
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" class="chart">'),
             f'<text x="{LEFT}" y="20" class="title">{escape(title)}</text>']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        y = y_of(tick)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{plot_right}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{tick:.0%}</text>')
    parts.append(f'<text x="{(LEFT + plot_right) / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle" '
                 f'class="label">{escape(x_label)}</text>')
    parts += body
    for i, name in enumerate(legend):
        y = TOP + 8 + 18 * i
        parts.append(f'<rect x="{plot_right + 14}" y="{y - 9}" width="12" height="12" fill="{colour(i)}"/>')
        parts.append(f'<text x="{plot_right + 32}" y="{y + 1}" class="legend">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def line_chart(title: str, x_label: str, series: list[tuple[str, list[float]]]) -> str:
    """One polyline per series; point i of a series is plotted at x = i + 1 (e.g. a turn budget)."""
    longest = max((len(values) for _, values in series), default=1)
    span = (WIDTH - RIGHT - LEFT) / max(longest - 1, 1)
    body = []
    for t in range(1, longest + 1):
        x = LEFT + (t - 1) * span
        body.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" class="tick">{t}</text>')
    for i, (name, values) in enumerate(series):
        points = [(LEFT + j * span, y_of(v)) for j, v in enumerate(values)]
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        body.append(f'<polyline points="{coords}" fill="none" stroke="{colour(i)}" stroke-width="2" '
                    f'data-series="{escape(name)}"><title>{escape(name)}</title></polyline>')
        for j, (x, y) in enumerate(points):
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour(i)}">'
                        f'<title>{escape(name)}: {values[j]:.1%} within {j + 1} turns</title></circle>')
    return frame(title, x_label, body, [name for name, _ in series])


def bar_chart(title: str, groups: list[str], series: list[str], bars: dict[tuple[str, str], Bar]) -> str:
    """Bars grouped along x (`groups`), one colour per series, each with a CI whisker.

    A (group, series) pair missing from `bars` leaves a gap rather than a zero-height bar, so
    "not run" never reads as "0%".
    """
    group_width = (WIDTH - RIGHT - LEFT) / max(len(groups), 1)
    bar_width = group_width * 0.8 / max(len(series), 1)
    body = []
    for g, group in enumerate(groups):
        x0 = LEFT + g * group_width + group_width * 0.1
        body.append(f'<text x="{x0 + group_width * 0.4:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
                    f'class="tick">{escape(group)}</text>')
        for s, name in enumerate(series):
            bar = bars.get((group, name))
            if bar is not None:
                body += _bar(x0 + s * bar_width, bar_width, bar, colour(s), f"{name} on {group}")
    return frame(title, "task set", body, series)


def _bar(x: float, width: float, bar: Bar, fill: str, name: str) -> list[str]:
    top, base, mid = y_of(bar.value), y_of(0), x + width / 2
    tip = f"{name}: {bar.value:.1%} (95% CI {bar.low:.1%}–{bar.high:.1%})"
    return [
        (f'<rect x="{x + 1:.1f}" y="{top:.1f}" width="{max(width - 2, 1):.1f}" height="{base - top:.1f}" '
        f'fill="{fill}" class="bar"><title>{escape(tip)}</title></rect>'),
        f'<line x1="{mid:.1f}" y1="{y_of(bar.low):.1f}" x2="{mid:.1f}" y2="{y_of(bar.high):.1f}" class="whisker"/>',
        *(f'<line x1="{mid - 4:.1f}" y1="{y_of(end):.1f}" x2="{mid + 4:.1f}" y2="{y_of(end):.1f}" class="whisker"/>'
          for end in (bar.low, bar.high)),
    ]
