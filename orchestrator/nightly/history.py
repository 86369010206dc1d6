"""The nightly history: one SQLite file that outlives every night's output directory.

It is nightly's own database (by default OUTPUT/nightly-history.db), not a sweep's results.db:
a night's results are read through orchestrator/store like every other part's, and this module is
the one the store's import contract lets import sqlite3 outside the store (pyproject.toml).

Per night it keeps what the next nights need: the outcome of every episode the budget did not
cut short (the baseline of a later comparison, and the record flaky tasks are found in), the
per-cell metrics (the trend plots) and the tasks the oracle gate quarantined. Synchronous:
callers use `asyncio.to_thread`. A night's status is `passed`, `regression` or `error`; the
baseline of a night is the last `passed` night of the same sweep, so a regression stays flagged
until it is fixed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from foundation.errors import ConfigError
from orchestrator.nightly.outcomes import Cell, TaskOutcome
from orchestrator.store.records import EpisodeKey

SCHEMA = """
CREATE TABLE IF NOT EXISTS nights (
    id          INTEGER PRIMARY KEY,
    sweep       TEXT NOT NULL,
    started_at  REAL NOT NULL,          -- Unix seconds
    outdir      TEXT NOT NULL,
    status      TEXT NOT NULL,          -- passed | regression | error
    baseline_id INTEGER REFERENCES nights(id),
    note        TEXT                    -- one line: the error of a failed night
);
CREATE TABLE IF NOT EXISTS cells (
    night_id    INTEGER NOT NULL REFERENCES nights(id),
    model TEXT NOT NULL, strategy TEXT NOT NULL, task_set TEXT NOT NULL,
    n           INTEGER NOT NULL,       -- episodes counted (quarantined tasks and infra failures left out)
    success_rate REAL, mean_reward REAL,
    PRIMARY KEY (night_id, model, strategy, task_set)
);
CREATE TABLE IF NOT EXISTS outcomes (
    night_id INTEGER NOT NULL REFERENCES nights(id),
    model TEXT NOT NULL, strategy TEXT NOT NULL, task_set TEXT NOT NULL, task_id TEXT NOT NULL,
    epoch INTEGER NOT NULL, success INTEGER NOT NULL, reward REAL NOT NULL, infra INTEGER NOT NULL,
    PRIMARY KEY (night_id, model, strategy, task_set, task_id, epoch)
);
CREATE TABLE IF NOT EXISTS broken_tasks (
    night_id INTEGER NOT NULL REFERENCES nights(id),
    task_set TEXT NOT NULL, task_id TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (night_id, task_set, task_id)
);
"""


@dataclass(frozen=True)
class Night:
    id: int
    sweep: str
    started_at: float
    outdir: str
    status: str
    baseline_id: int | None
    note: str | None


@dataclass(frozen=True)
class CellMetrics:
    cell: Cell
    n: int
    success_rate: float | None
    mean_reward: float | None


class History:
    """The open history database; `History.open(path)` creates it on first use."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    @classmethod
    @contextmanager
    def open(cls, path: Path) -> Iterator[History]:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the history database {path}: {exc}") from None
        with closing(db):
            try:
                db.executescript(SCHEMA)
            except sqlite3.DatabaseError as exc:
                raise ConfigError(f"{path} is not a nightly history database ({exc})") from None
            yield cls(db)

    @classmethod
    @contextmanager
    def read(cls, path: Path) -> Iterator[History]:
        """An existing history, read only (the viewer's: it never writes)."""
        if not path.is_file():
            raise ConfigError(f"{path}: no nightly history database there (the nightly's --history)")
        try:
            db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
            db.execute("SELECT 1 FROM nights LIMIT 1")
        except sqlite3.Error as exc:
            raise ConfigError(f"{path} is not a nightly history database ({exc})") from None
        with closing(db):
            yield cls(db)

    def night_of(self, outdir: Path) -> Night | None:
        """The night whose sweep wrote `outdir`."""
        wanted = outdir.resolve()
        rows = self.db.execute("SELECT id, sweep, started_at, outdir, status, baseline_id, note FROM nights "
                               "ORDER BY started_at DESC, id DESC")
        return next((Night(*row) for row in rows if Path(row[3]).resolve() == wanted), None)

    def add_night(self, *, sweep: str, started_at: float, outdir: str, status: str, baseline_id: int | None,
                  note: str | None = None, cells: Iterable[CellMetrics] = (), outcomes: Iterable[TaskOutcome] = (),
                  broken: dict[tuple[str, str], str] | None = None) -> int:
        """Record one night in one transaction; returns its id."""
        with self.db:
            night = self.db.execute(
                "INSERT INTO nights (sweep, started_at, outdir, status, baseline_id, note) VALUES (?, ?, ?, ?, ?, ?)",
                (sweep, started_at, outdir, status, baseline_id, note)).lastrowid
            assert night is not None
            self.db.executemany("INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?, ?)",
                                [(night, *c.cell, c.n, c.success_rate, c.mean_reward) for c in cells])
            self.db.executemany("INSERT INTO outcomes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [(night, o.model, o.strategy, o.task_set, o.task_id, o.epoch, int(o.success),
                                  o.reward, int(o.infra)) for o in outcomes])
            self.db.executemany("INSERT INTO broken_tasks VALUES (?, ?, ?, ?)",
                                [(night, ts, tid, why) for (ts, tid), why in sorted((broken or {}).items())])
        return night

    def nights(self, sweep: str) -> list[Night]:
        """The sweep's nights, oldest first."""
        rows = self.db.execute("SELECT id, sweep, started_at, outdir, status, baseline_id, note FROM nights "
                               "WHERE sweep = ? ORDER BY started_at, id", (sweep,))
        return [Night(*row) for row in rows]

    def nights_by_id(self, ids: Iterable[int]) -> list[Night]:
        wanted = list(ids)
        rows = self.db.execute(f"SELECT id, sweep, started_at, outdir, status, baseline_id, note FROM nights "
                               f"WHERE id IN ({', '.join('?' * len(wanted))}) ORDER BY started_at, id", wanted)
        return [Night(*row) for row in rows]

    def last_good(self, sweep: str) -> Night | None:
        """The baseline for the next night: the last night that passed."""
        return next((n for n in reversed(self.nights(sweep)) if n.status == "passed"), None)

    def outcomes(self, night_id: int) -> list[TaskOutcome]:
        rows = self.db.execute("SELECT model, strategy, task_set, task_id, epoch, success, reward, infra "
                               "FROM outcomes WHERE night_id = ?", (night_id,))
        return [TaskOutcome(EpisodeKey(m, s, ts, tid, e), bool(ok), r, bool(infra)) for m, s, ts, tid, e, ok, r, infra in rows]

    def cells(self, night_id: int) -> list[CellMetrics]:
        rows = self.db.execute("SELECT model, strategy, task_set, n, success_rate, mean_reward FROM cells "
                               "WHERE night_id = ? ORDER BY model, strategy, task_set", (night_id,))
        return [CellMetrics((m, s, ts), n, rate, reward) for m, s, ts, n, rate, reward in rows]

    def broken(self, night_id: int) -> dict[tuple[str, str], str]:
        rows = self.db.execute("SELECT task_set, task_id, reason FROM broken_tasks WHERE night_id = ?", (night_id,))
        return {(ts, tid): why for ts, tid, why in rows}
