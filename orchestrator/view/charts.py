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
    charts = CellCharts()
    latencies = _latencies(db)
    for *cell, n, tokens, cost, priced in db.execute(
            f"SELECT model, strategy, task_set, count(*), avg(prompt_tokens + completion_tokens), sum(cost_usd), "
            f"count(cost_usd) FROM episodes e WHERE {COMPLETE} GROUP BY 1, 2, 3"):
        p50, p95 = latencies.get(tuple(cell), (None, None))
        charts.cells[tuple(cell)] = CellNumbers(n, tokens or 0.0, cost if priced else None, p50, p95)
    charts.reward_by_turn = _reward_by_turn(db, {c: v.episodes for c, v in charts.cells.items()})
    for *cell, turn, count in db.execute(
            "SELECT model, strategy, task_set, first, count(*) FROM (SELECT e.model, e.strategy, e.task_set, "
            f"min(t.idx) + 1 AS first FROM turns t JOIN episodes e ON e.id = t.episode_id WHERE e.success = 1 "
            "AND t.reward = 1 GROUP BY t.episode_id) GROUP BY 1, 2, 3, 4"):
        charts.solved_at.setdefault(tuple(cell), {})[turn] = count
    return charts


def _latencies(db: sqlite3.Connection) -> dict[Cell, tuple[float, float]]:
    by_cell: dict[Cell, list[float]] = defaultdict(list)
    for model, strategy, task_set, latency in db.execute(
            "SELECT e.model, e.strategy, e.task_set, c.latency_s FROM llm_calls c JOIN episodes e "
            f"ON e.id = c.episode_id WHERE {COMPLETE}"):
        by_cell[(model, strategy, task_set)].append(latency)
    found = {}
    for cell, values in by_cell.items():
        values.sort()
        found[cell] = (values[len(values) // 2], values[min(len(values) - 1, int(0.95 * len(values)))])
    return found


def _reward_by_turn(db: sqlite3.Connection, episodes: dict[Cell, int]) -> dict[Cell, list[float]]:
    """Mean over a cell's episodes of the best reward within the first t turns (an episode that
    ended earlier keeps its best): the turns reached, then the episodes that stopped before."""
    reached: dict[Cell, dict[int, float]] = defaultdict(dict)
    for *cell, turn, total in db.execute(
            "SELECT e.model, e.strategy, e.task_set, b.idx + 1, sum(b.best) FROM (SELECT episode_id, idx, "
            "max(reward) OVER (PARTITION BY episode_id ORDER BY idx) AS best FROM turns) b "
            f"JOIN episodes e ON e.id = b.episode_id WHERE {COMPLETE} GROUP BY 1, 2, 3, 4"):
        reached[tuple(cell)][turn] = total
    ended: dict[Cell, dict[int, float]] = defaultdict(dict)
    for *cell, turns, total in db.execute(
            f"SELECT model, strategy, task_set, n_turns, sum(reward) FROM episodes e WHERE {COMPLETE} GROUP BY 1, 2, 3, 4"):
        ended[tuple(cell)][turns] = total
    curves = {}
    for cell, count in episodes.items():
        last = max(reached[cell], default=0)
        curves[cell] = [(reached[cell].get(t, 0.0) + sum(v for n, v in ended[cell].items() if n < t)) / count
                        for t in range(1, last + 1)]
    return curves


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


def lines(title: str, x_label: str, series: list[tuple[str, list[float]]], chart_id: str, *, top_value: float = 1.0) -> str:
    """One polyline per series over x = 1, 2, ...; y from 0 to `top_value`."""
    left, right, top, bottom, height = 44, 330, 30, 40, 280
    longest = max((len(v) for _, v in series), default=1)
    span = (WIDTH - left - right) / max(longest - 1, 1)

    def y_of(value: float) -> float:
        return top + (1 - max(0.0, min(value, top_value)) / top_value) * (height - top - bottom)
    parts = [_svg_open(title, WIDTH, height, chart_id), f'<text x="4" y="18" class="title">{escape(title)}</text>']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts += [f'<line x1="{left}" y1="{y_of(tick * top_value):.1f}" x2="{WIDTH - right}" '
                  f'y2="{y_of(tick * top_value):.1f}" class="grid"/>',
                  f'<text x="{left - 5}" y="{y_of(tick * top_value) + 4:.1f}" text-anchor="end" '
                  f'class="tick">{tick * top_value:g}</text>']
    for t in range(1, longest + 1):
        parts.append(f'<text x="{left + (t - 1) * span:.1f}" y="{height - bottom + 15}" text-anchor="middle" '
                     f'class="tick">{t}</text>')
    parts.append(f'<text x="{(left + WIDTH - right) / 2:.0f}" y="{height - 6}" text-anchor="middle" '
                 f'class="label">{escape(x_label)}</text>')
    for i, (label, values) in enumerate(series):
        points = [(left + j * span, y_of(v)) for j, v in enumerate(values)]
        dash = ' stroke-dasharray="6 3"' if i >= PALETTE_SIZE else ""  # the palette's second round: dashed
        parts += [f'<polyline points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in points)}" fill="none" '
                  f'stroke="{colour(i)}" stroke-width="2"{dash} data-series="{escape(label)}"><title>{escape(label)}'
                  "</title></polyline>",
                  *(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour(i)}"><title>{escape(label)}, turn {j + 1}: '
                    f'{values[j]:.3g}</title></circle>' for j, (x, y) in enumerate(points)),
                  f'<line x1="{WIDTH - right + 10}" y1="{top + 18 * i - 3}" x2="{WIDTH - right + 28}" '
                  f'y2="{top + 18 * i - 3}" stroke="{colour(i)}" stroke-width="3"{dash}/>',
                  f'<text x="{WIDTH - right + 32}" y="{top + 18 * i + 1}" class="legend">{escape(label)}</text>']
    return "\n".join([*parts, "</svg>"])


def _svg_open(title: str, width: int, height: int, chart_id: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img" aria-label="{escape(title)}" class="chart" id="{chart_id}">')
