"""Charts of a store where people would rather look than read: tokens, cost and LLM latency per
cell; mean reward against the turn; the turn at which solved episodes were solved.

Their numbers are the store's (orchestrator/store/chart_data.py, read in the background refresh of
the overview); they are drawn here as inline SVG in the report's palette.
"""

from __future__ import annotations

from html import escape

from orchestrator.report.svg import PALETTE, colour
from orchestrator.store.chart_data import Cell

WIDTH = 900
PALETTE_SIZE = len(PALETTE)


def name(cell: Cell) -> str:
    return " / ".join(cell)


def hbars(title: str, values: list[tuple[str, float, str]], chart_id: str) -> str:
    """Horizontal bars, one per (label, value, value text), scaled to the largest value."""
    top, row, label_w = 30, 22, 360
    height = top + row * len(values) + 10
    biggest = max((v for _, v, _ in values), default=0) or 1
    parts = [_svg_open(title, WIDTH, height, chart_id), f'<text x="4" y="18" class="title">{escape(title)}</text>']
    for i, (label, value, text) in enumerate(values):
        y, width = top + i * row, (WIDTH - label_w - 90) * value / biggest
        parts += [f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" class="tick">{escape(label)}</text>',
                  f'<rect x="{label_w}" y="{y + 3}" width="{max(width, 1):.1f}" height="{row - 6}" '
                  f'fill="{colour(0)}" class="bar"><title>{escape(label)}: {escape(text)}</title></rect>',
                  f'<text x="{label_w + width + 5:.1f}" y="{y + 14}" class="tick">{escape(text)}</text>']
    return "\n".join([*parts, "</svg>"])


def lines(title: str, x_label: str, series: list[tuple[str, list[float]]], chart_id: str, *, top_value: float = 1.0,
          width: int = WIDTH, height: int = 280, legend: int = 330) -> str:
    """One polyline per series over x = 1, 2, ...; y from 0 to `top_value`; `legend`: its width."""
    left, right, top, bottom = 44, legend, 30, 40
    longest = max((len(v) for _, v in series), default=1)
    span = (width - left - right) / max(longest - 1, 1)

    def y_of(value: float) -> float:
        return top + (1 - max(0.0, min(value, top_value)) / top_value) * (height - top - bottom)
    parts = [_svg_open(title, width, height, chart_id), f'<text x="4" y="18" class="title">{escape(title)}</text>']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts += [f'<line x1="{left}" y1="{y_of(tick * top_value):.1f}" x2="{width - right}" '
                  f'y2="{y_of(tick * top_value):.1f}" class="grid"/>',
                  f'<text x="{left - 5}" y="{y_of(tick * top_value) + 4:.1f}" text-anchor="end" '
                  f'class="tick">{tick * top_value:g}</text>']
    for t in range(1, longest + 1):
        parts.append(f'<text x="{left + (t - 1) * span:.1f}" y="{height - bottom + 15}" text-anchor="middle" '
                     f'class="tick">{t}</text>')
    parts.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 6}" text-anchor="middle" '
                 f'class="label">{escape(x_label)}</text>')
    for i, (label, values) in enumerate(series):
        points = [(left + j * span, y_of(v)) for j, v in enumerate(values)]
        dash = ' stroke-dasharray="6 3"' if i >= PALETTE_SIZE else ""  # the palette's second round: dashed
        parts += [f'<polyline points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in points)}" fill="none" '
                  f'stroke="{colour(i)}" stroke-width="2"{dash} data-series="{escape(label)}"><title>{escape(label)}'
                  "</title></polyline>",
                  *(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour(i)}"><title>{escape(label)}, turn {j + 1}: '
                    f'{values[j]:.3g}</title></circle>' for j, (x, y) in enumerate(points)),
                  f'<line x1="{width - right + 10}" y1="{top + 18 * i - 3}" x2="{width - right + 28}" '
                  f'y2="{top + 18 * i - 3}" stroke="{colour(i)}" stroke-width="3"{dash}/>',
                  f'<text x="{width - right + 32}" y="{top + 18 * i + 1}" class="legend">{escape(label)}</text>']
    return "\n".join([*parts, "</svg>"])


def _svg_open(title: str, width: int, height: int, chart_id: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img" aria-label="{escape(title)}" class="chart" id="{chart_id}">')
