"""Charts of a store where people would rather look than read: tokens, cost and LLM latency per
cell; mean reward against the turn; the turn at which solved episodes were solved.

The numbers are read in one pass of SQL (`cell_charts`) beside the report's view, in the
background refresh of the overview (they read every turn and call: a second or so at 100,000
episodes), and drawn as inline SVG in the report's palette. Episodes the budget cut are left
out, as the report leaves them out of its rates.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from html import escape

from orchestrator.report.svg import PALETTE, colour

Cell = tuple[str, str, str]
WIDTH = 900
COMPLETE = "e.status != 'budget_exhausted'"
PALETTE_SIZE = len(PALETTE)


@dataclass(frozen=True)
class CellNumbers:
    episodes: int
    tokens_per_episode: float
    cost_usd: float | None  # None: no call could be priced
    latency_p50: float | None  # seconds; None: no LLM call
    latency_p95: float | None


@dataclass
class CellCharts:
    cells: dict[Cell, CellNumbers] = field(default_factory=dict)
    reward_by_turn: dict[Cell, list[float]] = field(default_factory=dict)  # mean best reward after turn t
    solved_at: dict[Cell, dict[int, int]] = field(default_factory=dict)  # turn (from 1) -> solved episodes


def cell_charts(db: sqlite3.Connection) -> CellCharts:
    """Every chart's numbers in one pass over the turns' rewards (a covering index: no text is read)
    and one over the calls' latencies, each row placed in its cell by its episode."""
    charts = CellCharts()
    cell_of: dict[int, Cell] = {}
    for eid, *cell in db.execute(f"SELECT id, model, strategy, task_set FROM episodes e WHERE {COMPLETE}"):
        cell_of[eid] = (cell[0], cell[1], cell[2])
    best_by_turn, ended, solved_at = _turn_pass(db, cell_of)
    latencies = _latencies(db, cell_of)
    for *cell, n, tokens, cost, priced in db.execute(
            f"SELECT model, strategy, task_set, count(*), avg(prompt_tokens + completion_tokens), sum(cost_usd), "
            f"count(cost_usd) FROM episodes e WHERE {COMPLETE} GROUP BY 1, 2, 3"):
        key: Cell = (cell[0], cell[1], cell[2])
        p50, p95 = latencies.get(key, (None, None))
        charts.cells[key] = CellNumbers(n, tokens or 0.0, cost if priced else None, p50, p95)
        # an episode that stopped before turn t keeps its best (its last running best) from then on
        reached, stopped = best_by_turn.get(key, {}), ended.get(key, {})
        curve, carried = [], 0.0
        for t in range(1, max(reached, default=0) + 1):
            carried += stopped.get(t - 1, 0.0)
            curve.append((reached.get(t, 0.0) + carried) / n)
        charts.reward_by_turn[key] = curve
        charts.solved_at[key] = solved_at.get(key, {})
    return charts


Sums = dict[Cell, dict[int, float]]


def _turn_pass(db: sqlite3.Connection, cell_of: dict[int, Cell]) -> tuple[Sums, Sums, dict[Cell, dict[int, int]]]:
    """Per cell: the sum over episodes of the best reward within the first t turns, for the turns
    reached; the best of the episodes that stopped after t turns; the turn each solved one was solved at."""
    reached: dict[Cell, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    ended: dict[Cell, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    solved: dict[Cell, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    last, cell, best, turns, done = -1, None, 0.0, 0, False
    for eid, idx, reward in db.execute("SELECT episode_id, idx, reward FROM turns ORDER BY episode_id, idx"):
        if eid != last:
            if cell is not None:
                ended[cell][turns] += best
            last, cell, best, done = eid, cell_of.get(eid), 0.0, False
        if cell is None:
            continue
        best, turns = max(best, reward), idx + 1
        reached[cell][turns] += best
        if reward == 1 and not done:
            solved[cell][turns] += 1
            done = True
    if cell is not None:
        ended[cell][turns] += best
    return reached, ended, solved


def _latencies(db: sqlite3.Connection, cell_of: dict[int, Cell]) -> dict[Cell, tuple[float, float]]:
    by_cell: dict[Cell, list[float]] = defaultdict(list)
    for eid, latency in db.execute("SELECT episode_id, latency_s FROM llm_calls"):
        cell = cell_of.get(eid)
        if cell is not None:
            by_cell[cell].append(latency)
    found = {}
    for cell, values in by_cell.items():
        values.sort()
        found[cell] = (values[len(values) // 2], values[min(len(values) - 1, int(0.95 * len(values)))])
    return found


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
