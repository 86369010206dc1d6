"""Two stores' episodes paired on (model, strategy, task set, task, epoch), flipped first: one join
with the second store ATTACHed read-only (the viewer's side by side, orchestrator/view/pairs.py).

The pairing key is compare's (orchestrator/nightly/compare.py).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from orchestrator.store.records import EpisodeKey, Keyed

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
class Pair(Keyed):
    """One task in both runs (A the baseline, B the current run)."""

    a_id: int
    b_id: int
    key: EpisodeKey
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
    return Pair(a_id, b_id, EpisodeKey(model, strategy, task_set, task_id, epoch), a_status, b_status, a_reward,
                b_reward, bool(a_success), bool(b_success))
