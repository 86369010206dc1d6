"""The overview's charts: tokens, cost and LLM latency per cell; mean reward against the turn; the
turn at which solved episodes were solved; success within a turn budget; success rate per model.

Their numbers are the store's (orchestrator/store/chart_data.py) and the report's content; they are
drawn here as inline SVG in the report's palette, in a viewBox that the page's grid scales to its
cell. Each line has a colour, a dash pattern and a marker shape of its own, and the legend shows
all three, so lines that overlap stay apart and no reader depends on colour alone. Data with a
single x (a single-turn task set) is a small table: a chart of one dot per line says nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape

from orchestrator.report.svg import Bar, colour

WIDTH = 460  # the viewBox's; the page scales it to the chart's cell
HEIGHT = 230  # a line chart's title, plot and x axis; a legend below the plot adds its rows
DASHES = ("none", "9 3 2 3", "6 4", "2 3")  # solid, dash-dot, dashed, dotted: drawn in this order
MARKERS = ("circle", "square", "triangle", "diamond", "nabla")  # with DASHES: 20 lines before a pair repeats
SHAPES = {"circle": "m-3.6,0a3.6,3.6 0 1,0 7.2,0a3.6,3.6 0 1,0 -7.2,0z", "square": "m-3.1,-3.1h6.2v6.2h-6.2z",
          "triangle": "m0,-4.1l3.6,6.3h-7.2z", "diamond": "m0,-4.3l3.6,4.3l-3.6,4.3l-3.6,-4.3z",
          "nabla": "m0,4.1l3.6,-6.3h-7.2z"}  # each drawn from its centre
CHAR_W = 5.8  # a character of the 11 px tick and legend text, roughly
ROW = 18  # a legend row
QUARTERS = (0, 0.25, 0.5, 0.75, 1)

Measure = tuple[str, float, str]  # label, value, the value as text
Series = tuple[str, Sequence[float]]


@dataclass(frozen=True)
class Style:
    """How one line is drawn: each of the three differs from the next line's."""

    colour: str
    dash: str  # a stroke-dasharray; "none": solid
    marker: str  # one of MARKERS


def style(i: int) -> Style:
    return Style(colour(i), DASHES[i % len(DASHES)], MARKERS[i % len(MARKERS)])


def hbars(title: str, groups: Sequence[tuple[str, Sequence[Measure]]], chart_id: str) -> str:
    """Horizontal bars, one per (label, value, value text), under a heading per named group, scaled
    to the largest value of all."""
    top, row, label_w, text_w = 30, 18, 190, 96
    bars = [bar for _, members in groups for bar in members]
    biggest = max((v for _, v, _ in bars), default=0) or 1
    parts, y = [_title(title)], top
    for group, members in groups:
        if group:
            parts.append(f'<text x="4" y="{y + 13}" class="group">{escape(_fit(group, label_w * 2))}</text>')
            y += row
        for label, value, text in members:
            width = (WIDTH - label_w - text_w) * value / biggest
            parts += [f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end" class="tick">'
                      f'{escape(_fit(label, label_w - 10))}<title>{escape(label)}</title></text>',
                      f'<rect x="{label_w}" y="{y + 3}" width="{max(width, 1):.1f}" height="{row - 5}" '
                      f'fill="{colour(0)}" class="bar"><title>{escape(label)}: {escape(text)}</title></rect>',
                      f'<text x="{label_w + width + 5:.1f}" y="{y + 13}" class="tick">{escape(text)}</text>']
            y += row
    return _svg(title, y + 6, chart_id, parts)


def lines(title: str, x_label: str, series: Sequence[Series], chart_id: str, *, top_value: float = 1.0,
          percent: bool = False, counts: bool = False, styles: Sequence[int] | None = None, width: int = WIDTH,
          height: int = HEIGHT, legend: int = 0) -> str:
    """One line per series over x = 1, 2, ...; y from 0 to `top_value` (as percentages if `percent`;
    whole ticks only if `counts`). Series k is drawn in style(styles[k]) (style(k) by default), so a
    page can draw a series alike in every chart. `legend`: the width of a legend at the right; 0
    puts it below the plot. Data with a single x is a table (`values_table`)."""
    longest = max((len(v) for _, v in series), default=0)
    if longest <= 1:
        return values_table(title, x_label, series, chart_id, percent=percent)
    looks = [style(i) for i in (styles if styles is not None else range(len(series)))]
    plot = _Plot(44, 30, width - (legend or 14), height - 40, longest, top_value, percent)
    labels = [label for label, _ in series]
    key, key_h = (_legend(labels, plot.right + 4, plot.top, legend - 4, _line_sample(looks, 20), 20) if legend
                  else _legend(labels, 8, height + 4, width - 16, _line_sample(looks, 34), 34))
    ticks = sorted({round(f * top_value) for f in QUARTERS}) if counts else [f * top_value for f in QUARTERS]
    parts = [_title(title), *plot.axes(ticks, x_label, height)]
    point = x_label.removesuffix(" t")
    # solid lines first, the dotted last: where lines coincide, each one's gaps show the lines under it
    for k in sorted(range(len(series)), key=lambda k: DASHES.index(looks[k].dash)):
        (label, values), look = series[k], looks[k]
        xy = [(plot.x_of(j + 1), plot.y_of(v)) for j, v in enumerate(values)]
        parts += [f'<g class="series" data-series="{escape(label)}">'
                  f'<polyline points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in xy)}" fill="none" '
                  f'stroke="{look.colour}" stroke-width="2" stroke-dasharray="{look.dash}" '
                  f'data-series="{escape(label)}"><title>{escape(label)}</title></polyline>',
                  *(marker(look, x, y, f"{label}, {point} {j + 1}: {plot.shown(values[j])}")
                    for j, (x, y) in enumerate(xy)), "</g>"]
    return _svg(title, height + (0 if legend else key_h), chart_id, [*parts, *key], width)


def bars(title: str, groups: Sequence[str], series: Sequence[str], shares: Mapping[tuple[str, str], Bar],
         chart_id: str) -> str:
    """Shares in [0, 1] as bars with their intervals, grouped along x, one colour per series in a
    fixed place in each group; a (group, series) missing from `shares` is a gap, never a zero."""
    plot = _Plot(44, 30, WIDTH - 14, HEIGHT - 40, 2, 1.0, True)
    group_w = (plot.right - plot.left) / max(len(groups), 1)
    bar_w = group_w * 0.8 / max(len(series), 1)
    parts = [_title(title), *plot.axes(QUARTERS, "task set", HEIGHT, x_ticks=False)]
    for g, group in enumerate(groups):
        x0 = plot.left + g * group_w + group_w * 0.1
        parts.append(f'<text x="{x0 + group_w * 0.4:.1f}" y="{plot.bottom + 15}" text-anchor="middle" '
                     f'class="tick">{escape(_fit(group, group_w))}<title>{escape(group)}</title></text>')
        for s, name in enumerate(series):
            if (share := shares.get((group, name))) is not None:
                parts += _bar(plot, x0 + s * bar_w, bar_w, share, colour(s), f"{name} on {group}")
    key, key_h = _legend(series, 8, HEIGHT + 4, WIDTH - 16, lambda i, x, y: (
        f'<rect x="{x:.1f}" y="{y - 6:.1f}" width="14" height="12" fill="{colour(i)}"/>'), 14)
    return _svg(title, HEIGHT + key_h, chart_id, [*parts, *key])


def marker(look: Style, x: float, y: float, tip: str = "") -> str:
    """The line's marker shape at (x, y), in outline: markers on one point show through each other."""
    title = f"<title>{escape(tip)}</title>" if tip else ""
    return (f'<path d="M{x:.1f},{y:.1f}{SHAPES[look.marker]}" fill="none" stroke="{look.colour}" stroke-width="1.6" '
            f'class="marker" data-marker="{look.marker}">{title}</path>')


def values_table(title: str, x_label: str, series: Sequence[Series], table_id: str, *, percent: bool = False) -> str:
    """The value of each series at its one x, as a table in the chart's place."""
    def text(values: Sequence[float]) -> str:
        return "–" if not values else f"{values[0]:.0%}" if percent else f"{values[0]:.3g}"
    rows = "".join(f'<tr><td class="name">{escape(label)}</td><td>{text(values)}</td></tr>' for label, values in series)
    return (f'<figure class="chart-values" id="{table_id}"><figcaption>{escape(title)}</figcaption>'
            f'<p class="muted">One value per series ({escape(x_label)} = 1 only): listed, not drawn.</p>'
            f'<table><thead><tr><th class="name">series</th><th>value</th></tr></thead><tbody>{rows}</tbody></table>'
            "</figure>")


@dataclass(frozen=True)
class _Plot:
    """A chart's plotting area (in viewBox units) and its scales: x from 1 to `longest`."""

    left: float
    top: float
    right: float
    bottom: float
    longest: int
    top_value: float
    percent: bool

    def x_of(self, t: int) -> float:
        return self.left + (t - 1) * (self.right - self.left) / (self.longest - 1)

    def y_of(self, value: float) -> float:
        return self.top + (1 - max(0.0, min(value, self.top_value)) / self.top_value) * (self.bottom - self.top)

    def shown(self, value: float) -> str:
        return f"{value:.0%}" if self.percent else f"{value:.3g}"

    def axes(self, ticks: Sequence[float], x_label: str, height: int, *, x_ticks: bool = True) -> list[str]:
        """Grid lines with their values, x's ticks (one per 28 units at most) and its label."""
        parts = []
        for tick in ticks:
            y = self.y_of(tick)
            parts += [f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.right}" y2="{y:.1f}" class="grid"/>',
                      f'<text x="{self.left - 5}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
                      f'{self.shown(tick)}</text>']
        step = -(-self.longest // max(1, int((self.right - self.left) // 28)))
        parts += [f'<text x="{self.x_of(t):.1f}" y="{self.bottom + 15}" text-anchor="middle" class="tick">{t}</text>'
                  for t in range(1, self.longest + 1, step) if x_ticks]
        return [*parts, f'<text x="{(self.left + self.right) / 2:.0f}" y="{height - 6}" text-anchor="middle" '
                        f'class="label">{escape(x_label)}</text>']


def _bar(plot: _Plot, x: float, width: float, share: Bar, fill: str, name: str) -> list[str]:
    top, base, mid = plot.y_of(share.value), plot.y_of(0), x + width / 2
    tip = f"{name}: {share.value:.1%} (95% CI {share.low:.1%}–{share.high:.1%})"
    return [f'<rect x="{x + 1:.1f}" y="{top:.1f}" width="{max(width - 2, 1):.1f}" height="{base - top:.1f}" '
            f'fill="{fill}" class="bar"><title>{escape(tip)}</title></rect>',
            f'<line x1="{mid:.1f}" y1="{plot.y_of(share.low):.1f}" x2="{mid:.1f}" y2="{plot.y_of(share.high):.1f}" '
            'class="whisker"/>',
            *(f'<line x1="{mid - 4:.1f}" y1="{plot.y_of(end):.1f}" x2="{mid + 4:.1f}" y2="{plot.y_of(end):.1f}" '
              'class="whisker"/>' for end in (share.low, share.high))]


def _line_sample(looks: Sequence[Style], length: float) -> Callable[[int, float, float], str]:
    """A legend's sample of line i, `length` long: its dash, marker and colour."""
    def sample(i: int, x: float, y: float) -> str:
        return (f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x + length:.1f}" y2="{y:.1f}" stroke="{looks[i].colour}" '
                f'stroke-width="2" stroke-dasharray="{looks[i].dash}"/>{marker(looks[i], x + length / 2, y)}')
    return sample


def _legend(labels: Sequence[str], x0: float, y0: float, room: float, sample: Callable[[int, float, float], str],
            sample_w: float) -> tuple[list[str], int]:
    """Each label after its sample (`sample_w` wide), in as many columns of equal width as `room`
    holds; the parts and their height."""
    wanted = sample_w + 14 + CHAR_W * max((len(label) for label in labels), default=0)
    columns = max(1, min(len(labels), int(room // wanted)))
    column_w = room / columns
    parts = []
    for i, label in enumerate(labels):
        x, y = x0 + (i % columns) * column_w, y0 + (i // columns) * ROW + 9
        parts.append(f'<g class="key" data-series="{escape(label)}">{sample(i, x, y)}'
                     f'<text x="{x + sample_w + 5:.1f}" y="{y + 4:.1f}" class="legend">'
                     f'{escape(_fit(label, column_w - sample_w - 8))}'
                     f'<title>{escape(label)}</title></text></g>')
    return parts, -(-len(labels) // columns) * ROW + 6


def _fit(text: str, room: float) -> str:
    """`text`, shortened in the middle to about `room` units of 11 px text."""
    chars = max(5, int(room // CHAR_W))
    return text if len(text) <= chars else f"{text[:chars // 2 - 1]}…{text[len(text) - (chars - chars // 2):]}"


def _title(title: str) -> str:
    return f'<text x="4" y="18" class="title">{escape(title)}</text>'


def _svg(title: str, height: float, chart_id: str, parts: list[str], width: int = WIDTH) -> str:
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}" '
                      f'viewBox="0 0 {width} {height:.0f}" role="img" aria-label="{escape(title)}" class="chart" '
                      f'id="{chart_id}">', *parts, "</svg>"])
