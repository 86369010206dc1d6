"""The numbers of the viewer's charts of a store, read in one pass of SQL (`cell_charts`): tokens,
cost and LLM latency per cell; mean reward against the turn; the turn at which solved episodes
were solved.

They read every turn and call (a second or so at 100,000 episodes), so the viewer computes them
in the background beside the report's view, and draws them (orchestrator/view/charts.py). Episodes
the budget cut are left out, as the report leaves them out of its rates.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field

Cell = tuple[str, str, str]
COMPLETE = "e.status != 'budget_exhausted'"


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
