"""`replay --table DIR`: the paper's success table, as recorded and as our replay recomputes it.

Rows are environment × strategy (the strategy follows from the file's format, see `formats.py`),
one per file and, where a cell has several files, one for the cell. Success is the paper's: the
best reward of the episode is exactly 1; for Single, the first turn's reward. Both rates are over
the episodes replayed in full; an episode left out (bad, its task unavailable here, its container
broken under it) is counted apart, and `recorded_all` is the recorded rate over every episode, the
paper's own figure. `agreement` is the per-turn agreement share of the file's compared turns.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from environments.kind import kind_names
from orchestrator.fidelity.formats import (
    PLAN_AND_SOLVE,
    REFINE,
    SINGLE,
    STRATEGY,
    TRY_AGAIN,
)
from orchestrator.fidelity.rules import TurnResult
from orchestrator.fidelity.trajectories import CTF, HUMAN, REACT, Episode

STRATEGIES = (SINGLE, TRY_AGAIN, STRATEGY[REACT], PLAN_AND_SOLVE, REFINE, STRATEGY[CTF], STRATEGY[HUMAN])
ONE = 1 - 1e-9  # "exactly 1", for rewards that went through float arithmetic


@dataclass
class Row:
    """One file of a cell, or the whole cell (`file` then says how many files)."""

    environment: str
    strategy: str
    file: str
    episodes: int = 0
    left_out: int = 0
    recorded_solved: int = 0  # of the episodes replayed in full
    recomputed_solved: int = 0
    recorded_solved_all: int = 0  # of every episode
    turns: int = 0  # compared turns
    agreed: int = 0

    @property
    def replayed(self) -> int:
        return self.episodes - self.left_out

    def add(self, other: Row) -> None:
        for name in ("episodes", "left_out", "recorded_solved", "recomputed_solved", "recorded_solved_all",
                     "turns", "agreed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def rates(self) -> dict[str, float | None]:
        def share(n: int, of: int) -> float | None:
            return round(n / of, 4) if of else None

        return {"recorded": share(self.recorded_solved, self.replayed),
                "recomputed": share(self.recomputed_solved, self.replayed),
                "recorded_all": share(self.recorded_solved_all, self.episodes),
                "agreement": share(self.agreed, self.turns)}


Table = list[tuple[Row, list[Row]]]  # each cell's total, and its files' rows


def success_table(episodes: list[Episode], results: list[TurnResult], bad: Iterable[str]) -> Table:
    """The cells in the paper's order. `bad`: the keys of the bad episodes."""
    by_episode: dict[str, list[TurnResult]] = defaultdict(list)
    for result in results:
        by_episode[result.episode].append(result)
    bad_keys = set(bad)
    files: dict[tuple[str, str, str], Row] = {}
    for episode in episodes:
        key = (episode.kind, episode.strategy, episode.source)
        row = files.setdefault(key, Row(*key))
        row.add(_episode_row(episode, by_episode[episode.key], episode.key in bad_keys))
    cells: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for (env, strategy, _), row in files.items():
        cells[(env, strategy)].append(row)
    table = []
    for env, strategy in sorted(cells, key=_order):
        total = Row(env, strategy, f"({len(cells[(env, strategy)])} files)")
        for row in cells[(env, strategy)]:
            total.add(row)
        table.append((total, cells[(env, strategy)]))
    return table


def _order(cell: tuple[str, str]) -> tuple[int, int, str, str]:
    env, strategy = cell
    order = kind_names()
    return (order.index(env) if env in order else len(order),
            STRATEGIES.index(strategy) if strategy in STRATEGIES else len(STRATEGIES), env, strategy)


def _episode_row(episode: Episode, results: list[TurnResult], bad: bool) -> Row:
    single = episode.strategy == SINGLE
    recorded = _solved([t.reward for t in episode.turns], single)
    left_out = bad or any(r.ours is None for r in results)
    counted = [r for r in results if r.counted]
    return Row(episode.kind, episode.strategy, episode.source, 1, int(left_out),
               int(recorded and not left_out), int(_solved([r.ours for r in results], single) and not left_out),
               int(recorded), len(counted), sum(r.agree for r in counted))


def _solved(rewards: list[float | None], single: bool) -> bool:
    """The paper's success: the best reward is exactly 1 (Single: the first turn's)."""
    return any(r is not None and r >= ONE for r in (rewards[:1] if single else rewards))


def print_table(table: Table, root: Path | None = None) -> None:
    """The table as text; files are named relative to `root` (the directory replayed)."""
    print(f"{'env':<6} {'strategy':<21} {'episodes':>8} {'left out':>8} {'recorded':>9} {'recomputed':>10} "
          f"{'turns':>6} {'agreement':>9}  file")
    for total, rows in table:
        for row in rows + ([total] if len(rows) > 1 else []):
            rates = row.rates()
            print(f"{row.environment:<6} {row.strategy:<21} {row.episodes:>8} {row.left_out:>8} "
                  f"{_percent(rates['recorded']):>9} {_percent(rates['recomputed']):>10} {row.turns:>6} "
                  f"{_fraction(rates['agreement']):>9}  {row.file if row is total else _name(row.file, root)}")
    print("success: best reward exactly 1 (Single: the first turn's), over the episodes replayed in full; "
          "agreement: per-turn, of the turns compared")


def _name(file: str, root: Path | None) -> str:
    path = Path(file)
    return str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else path.name


def table_json(table: Table) -> dict[str, Any]:
    def as_dict(row: Row) -> dict[str, Any]:
        return {**{f.name: getattr(row, f.name) for f in fields(row)}, "replayed": row.replayed, **row.rates()}

    return {"cells": [{**as_dict(total), "files": [as_dict(r) for r in rows]} for total, rows in table]}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"

