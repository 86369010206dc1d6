"""One sweep's results.db as the viewer reads it: read-only, off the event loop, checked once at start.

Every query opens its own `mode=ro` connection in a worker thread. SQLite in WAL mode lets such
readers see each committed episode while the sweep writes, and they never block its writer; a
read-only connection cannot write even by mistake. What is costly to compute over a whole store
(the report's view) is cached under a change token, so a page over a store that did not change
does not read it again.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from foundation.errors import ConfigError, UserError
from orchestrator.report.data import Results, load_results
from orchestrator.report.view import ReportView, build_view
from orchestrator.store.reader import REQUIRED_TABLES, database_path
from orchestrator.store.store import SCHEMA_VERSION
from orchestrator.view.queries import CellProgress, progress

T = TypeVar("T")
BUSY_TIMEOUT_S = 1.0  # how long a reader waits on a lock before saying the store is locked


class StoreLocked(UserError):
    """Another process holds the store exclusively (not a sweep: WAL lets readers in beside one)."""


@dataclass(frozen=True)
class Snapshot:
    """The report's view of a store as of one change token."""

    token: tuple[Any, ...]
    results: Results
    view: ReportView
    progress: list[CellProgress]

    @property
    def token_text(self) -> str:
        return token_text(self.token)


@dataclass
class Source:
    """A sweep's output directory, opened for reading; `index` is its place in the command line."""

    index: int
    outdir: Path
    path: Path
    sweep: str
    _snapshot: Snapshot | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    def open(cls, index: int, outdir: Path) -> Source:
        """Check OUTDIR once (blocking: call it before serving): a results database of a schema we
        read, not locked. Every problem is one ConfigError or StoreLocked line."""
        path = database_path(outdir)
        meta = _with_connection(path, _checked_meta)
        version = meta.get("schema_version", SCHEMA_VERSION)
        if not version.isdigit() or int(version) > int(SCHEMA_VERSION):
            raise ConfigError(f"{path} has schema version {version}, newer than this viewer reads ({SCHEMA_VERSION}): "
                              "view it with the orchestrator version that wrote it")
        return cls(index, outdir, path, meta.get("sweep") or outdir.name)

    async def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query, read in a worker thread."""
        return await asyncio.to_thread(_read, self.path, sql, args)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """fn(connection) in a worker thread, on a read-only connection of its own."""
        return await asyncio.to_thread(_with_connection, self.path, fn)

    async def token(self) -> tuple[Any, ...]:
        """Changes whenever an episode is stored (or replaced) or a run starts or ends."""
        (row,) = await self.rows("SELECT (SELECT max(id) FROM episodes), (SELECT count(*) FROM episodes), "
                                 "(SELECT group_concat(status) FROM runs)")
        return tuple(row)

    async def snapshot(self) -> Snapshot:
        """The report's view and the progress per cell as of now, recomputed only when the token moved."""
        async with self._lock:
            token = await self.token()
            if self._snapshot is None or self._snapshot.token != token:
                self._snapshot = await asyncio.to_thread(self._compute, token)
            return self._snapshot

    def _compute(self, token: tuple[Any, ...]) -> Snapshot:
        results = load_results(self.outdir)
        return Snapshot(token, results, build_view(results), _with_connection(self.path, progress))


def token_text(token: tuple[Any, ...]) -> str:
    return ":".join(map(str, token))


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection (`mode=ro`; query_only too, in case a URI flag is ever lost)."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                         check_same_thread=False)
    db.execute("PRAGMA query_only = ON")
    return db


def _with_connection(path: Path, fn: Callable[[sqlite3.Connection], T]) -> T:
    try:
        db = connect(path)
        try:
            return fn(db)
        finally:
            db.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreLocked(f"{path} is locked by another process (not a sweep, whose readers are let in): "
                              "wait for it to finish, then try again") from None
        raise ConfigError(f"{path} cannot be read ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{path} is not a readable results database ({exc})") from None


def _read(path: Path, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    return _with_connection(path, lambda db: db.execute(sql, args).fetchall())


def _checked_meta(db: sqlite3.Connection) -> dict[str, str]:
    present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [name for name in REQUIRED_TABLES if name not in present]
    if missing:
        raise ConfigError(f"{db_name(db)} is not a results database (missing tables: {', '.join(missing)})")
    return dict(db.execute("SELECT key, value FROM meta").fetchall())


def db_name(db: sqlite3.Connection) -> str:
    return str(db.execute("PRAGMA database_list").fetchone()[2])
