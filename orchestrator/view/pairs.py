"""Two runs side by side: episodes paired on (model, strategy, task set, task, epoch), flipped first.

The pairing key is compare's (orchestrator/nightly/compare.py); the pairs are read with one join
over both stores (the second ATTACHed read-only), a page at a time.
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
{where}
ORDER BY a.success = b.success, b.success, a.model, a.strategy, a.task_set, a.task_id, a.epoch
"""


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class PairPage:
    pairs: list[Pair]
    total: int
    flipped: int  # pairs (in the filter) whose success differs

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


def pair_page(db: sqlite3.Connection, other: Path, cell: tuple[str, str, str], page: int,
              flipped_only: bool) -> PairPage:
    """Page `page` (from 1) of the pairs of `cell` (empty parts: any), flipped first; `db` is A's."""
    db.execute("ATTACH DATABASE ? AS other", (f"{other.resolve().as_uri()}?mode=ro",))
    sweeps = [row[0] for row in db.execute("SELECT DISTINCT sweep FROM other.episodes")]
    if not sweeps:
        return PairPage([], 0, 0)
    clauses, args = [], list(sweeps)
    for column, value in zip(("model", "strategy", "task_set"), cell, strict=True):
        if value:
            clauses.append(f"a.{column} = ?")
            args.append(value)
    base = " WHERE " + " AND ".join(clauses) if clauses else ""
    flipped_where = (base + " AND " if base else " WHERE ") + "a.success != b.success"
    marks = ", ".join("?" * len(sweeps))
    body = PAIRS_SQL.format(sweeps=marks, where=flipped_where if flipped_only else base)
    (total,) = db.execute(f"SELECT count(*) FROM ({body})", args).fetchone()
    (flipped,) = db.execute(f"SELECT count(*) FROM ({PAIRS_SQL.format(sweeps=marks, where=flipped_where)})",
                            args).fetchone()
    rows = db.execute(body + " LIMIT ? OFFSET ?", [*args, PAGE_SIZE, (page - 1) * PAGE_SIZE]).fetchall()
    return PairPage([Pair(*r[:11], bool(r[11]), bool(r[12])) for r in rows], total, flipped)
