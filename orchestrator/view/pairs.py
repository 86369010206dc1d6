"""Two runs side by side: episodes paired on (model, strategy, task set, task, epoch), flipped first.

The pairing key is compare's (orchestrator/nightly/compare.py). Every pair of the two stores is
read with one join (the second store ATTACHed read-only) and kept while neither store changes
(the app caches it under both change tokens), so a page of pairs, a cell's pairs and the next
flipped task from a pair's page are lookups in memory.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from orchestrator.view.queries import PAGE_SIZE

# A CROSS JOIN keeps A outside, and B's sweep names let each lookup use B's unique key in full
# (sweep, model, strategy, task set, task, epoch): SQLite's own choice scanned a whole cell of B per
# episode of A, about a minute at 100,000 episodes.
PAIRS_SQL = """
SELECT a.id, b.id, a.model, a.strategy, a.task_set, a.task_id, a.epoch,
       a.status, b.status, a.reward, b.reward, a.success, b.success
FROM main.episodes a CROSS JOIN other.episodes b
  ON b.sweep IN ({sweeps}) AND b.model = a.model AND b.strategy = a.strategy AND b.task_set = a.task_set
 AND b.task_id = a.task_id AND b.epoch = a.epoch
ORDER BY a.success = b.success, b.success, a.model, a.strategy, a.task_set, a.task_id, a.epoch
"""


@dataclass(frozen=True, slots=True)
class Pair:
    """One task in both runs (A the baseline, B the current run)."""

    a_id: int
    b_id: int
    model: str
    strategy: str
    task_set: str
    task_id: str
    epoch: int
    a_status: str
    b_status: str
    a_reward: float
    b_reward: float
    a_success: bool
    b_success: bool

    @property
    def change(self) -> str:
        if self.a_success == self.b_success:
            return "same"
        return "fixed" if self.b_success else "broken"

    @property
    def flipped(self) -> bool:
        return self.a_success != self.b_success

    def in_cell(self, cell: tuple[str, str, str]) -> bool:
        return all(not want or want == have for want, have in zip(cell, (self.model, self.strategy, self.task_set),
                                                                   strict=True))


@dataclass(frozen=True)
class PairPage:
    pairs: list[Pair]
    total: int
    flipped: int  # pairs (in the filter) whose success differs

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


def all_pairs(db: sqlite3.Connection, other: Path) -> list[Pair]:
    """Every pair of A (`db`) and B (`other`), flipped first, then by cell, task and epoch."""
    db.execute("ATTACH DATABASE ? AS other", (f"{other.resolve().as_uri()}?mode=ro",))
    sweeps = [row[0] for row in db.execute("SELECT DISTINCT sweep FROM other.episodes")]
    if not sweeps:
        return []
    rows = db.execute(PAIRS_SQL.format(sweeps=", ".join("?" * len(sweeps))), sweeps)
    return [_pair(*r) for r in rows]


def _pair(a_id: int, b_id: int, model: str, strategy: str, task_set: str, task_id: str, epoch: int, a_status: str,
          b_status: str, a_reward: float, b_reward: float, a_success: int, b_success: int) -> Pair:
    """A row of PAIRS_SQL; SQLite's booleans are integers."""
    return Pair(a_id, b_id, model, strategy, task_set, task_id, epoch, a_status, b_status, a_reward, b_reward,
                bool(a_success), bool(b_success))


class Pairs:
    """Every pair of two stores in the list's order, with each cell's pairs apart (a page of one
    cell, or a pair's neighbours in it, is then no pass over every pair)."""

    def __init__(self, pairs: list[Pair]) -> None:
        self.all = pairs
        self.by_cell: dict[tuple[str, str, str], list[Pair]] = {("", "", ""): pairs}
        for pair in pairs:
            self.by_cell.setdefault((pair.model, pair.strategy, pair.task_set), []).append(pair)

    def of(self, cell: tuple[str, str, str]) -> list[Pair]:
        """The pairs of `cell` (an empty part: any), in the list's order; a filter of part of a
        cell (a model's) is kept once made."""
        if cell not in self.by_cell:
            self.by_cell[cell] = [p for p in self.all if p.in_cell(cell)] if not all(cell) else []
        return self.by_cell[cell]


def pair_page(pairs: Pairs, cell: tuple[str, str, str], page: int, flipped_only: bool) -> PairPage:
    """Page `page` (from 1) of the pairs of `cell` (empty parts: any), flipped first."""
    mine = pairs.of(cell)
    flipped = sum(p.flipped for p in mine)
    shown = [p for p in mine if p.flipped] if flipped_only else mine
    start = (page - 1) * PAGE_SIZE
    return PairPage(shown[start:start + PAGE_SIZE], len(shown), flipped)


def flipped_around(pairs: Pairs, cell: tuple[str, str, str], a_id: int, b_id: int) -> tuple[Pair | None, Pair | None]:
    """The flipped pairs of `cell` before and after the pair (a_id, b_id) in the list's order (the
    first flipped one after nothing, when the pair is not in the list)."""
    order = pairs.of(cell)
    here = next((i for i, p in enumerate(order) if p.a_id == a_id and p.b_id == b_id), -1)
    before = next((p for p in reversed(order[:here]) if p.flipped), None) if here > 0 else None
    after = next((p for p in order[here + 1:] if p.flipped), None)
    return before, after
