"""One sweep's results.db read from an event loop (the viewer's): read-only, off the loop, checked
once at start.

Every query opens its own read-only connection in a worker thread (`mode=ro`; `immutable` on
read-only media, reader.py). SQLite in WAL mode lets such readers see each committed episode while
the sweep writes, and they never block its writer; a read-only connection cannot write even by
mistake. Each method answers what one page shows (a page of a list with its texts, an episode and
its neighbours in a list) on one connection, in one thread; one with words to look for first
brings the store's full-text index up to date (search_index.py).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from foundation.errors import ConfigError, UserError
from orchestrator.store import reader
from orchestrator.store.chart_data import CellCharts, cell_charts
from orchestrator.store.episode_detail import EpisodeDetail, episode_detail
from orchestrator.store.episode_pairs import Pair, all_pairs
from orchestrator.store.episode_query import (
    CellProgress,
    EpisodeFilter,
    EpisodePage,
    EpisodeRow,
    EpisodeTexts,
    TaskEpisodes,
    all_rows,
    episode_page,
    episode_texts,
    neighbours,
    progress,
    task_episodes,
)
from orchestrator.store.reader import REQUIRED_TABLES, database_path
from orchestrator.store.search_index import IndexKeeper
from orchestrator.store.store import SCHEMA_VERSION

T = TypeVar("T")
BUSY_TIMEOUT_S = 1.0  # how long a reader waits on a lock before saying the store is locked
Neighbours = tuple[int | None, int | None]  # the episodes before and after one in a list


class StoreLocked(UserError):
    """Another process holds the store exclusively (not a sweep: WAL lets readers in beside one)."""


def checked_meta(outdir: Path) -> tuple[Path, dict[str, str]]:
    """OUTDIR's results.db and its meta, checked once (blocking: call it before serving): a results
    database of a schema we read, not locked. Every problem is one ConfigError or StoreLocked line."""
    path = database_path(outdir)
    meta = _with_connection(path, _checked_meta)
    version = meta.get("schema_version", SCHEMA_VERSION)
    if not version.isdigit() or int(version) > int(SCHEMA_VERSION):
        raise ConfigError(f"{path} has schema version {version}, newer than this viewer reads ({SCHEMA_VERSION}): "
                          "view it with the orchestrator version that wrote it")
    return path, meta


@dataclass
class AsyncReader:
    """The store at `path`, read in worker threads; `keeper` keeps its full-text index."""

    path: Path
    keeper: IndexKeeper

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """fn(connection) in a worker thread, on a read-only connection of its own."""
        return await asyncio.to_thread(_with_connection, self.path, fn)

    async def token(self) -> tuple[Any, ...]:
        """Changes whenever an episode is stored (or replaced) or a run starts or ends; its last
        part is the latest run's status."""
        (row,) = await self._rows("SELECT (SELECT max(id) FROM episodes), (SELECT count(*) FROM episodes), "
                                  "(SELECT group_concat(status) FROM runs), "
                                  "(SELECT status FROM runs ORDER BY id DESC LIMIT 1)")
        return tuple(row)

    async def progress(self) -> list[CellProgress]:
        return await self.call(progress)

    async def charts(self) -> CellCharts:
        return await self.call(cell_charts)

    async def all_rows(self, flt: EpisodeFilter) -> tuple[list[EpisodeRow], str]:
        """Every episode of the filter, in its order, and the text index's note (see `_searching`)."""
        return await self._searching(lambda db, full: all_rows(db, flt, full), bool(flt.text))

    async def episode_page(self, flt: EpisodeFilter, texts_of: int) -> tuple[EpisodePage, dict[int, EpisodeTexts], str]:
        """The filter's page; with words to look for, the texts of its first `texts_of` episodes (to
        show where the words occur); and the text index's note."""
        def read(db: sqlite3.Connection, full: bool) -> tuple[EpisodePage, dict[int, EpisodeTexts]]:
            found = episode_page(db, flt, full)
            return found, episode_texts(db, [r.id for r in found.rows[:texts_of]], flt.text) if flt.text else {}
        (found, texts), note = await self._searching(read, bool(flt.text))
        return found, texts, note

    async def episode_in_list(self, episode_id: int, flt: EpisodeFilter) -> tuple[EpisodeDetail | None, Neighbours]:
        """Everything stored about the episode (None: no such episode), and the episodes before and
        after it in the filter's list."""
        def read(db: sqlite3.Connection, full: bool) -> tuple[EpisodeDetail | None, Neighbours]:
            return episode_detail(db, episode_id), neighbours(db, flt, episode_id, full)
        found, _ = await self._searching(read, bool(flt.text))
        return found

    async def episode_detail(self, episode_id: int) -> EpisodeDetail | None:
        return await self.call(lambda db: episode_detail(db, episode_id))

    async def task_episodes(self, task_id: str) -> TaskEpisodes | None:
        return await self.call(lambda db: task_episodes(db, task_id))

    async def pairs_with(self, other: Path) -> list[Pair]:
        """Every pair of this store's episodes (A) and the store at `other`'s (B), flipped first."""
        return await self.call(lambda db: all_pairs(db, other))

    async def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query, read in a worker thread."""
        return await asyncio.to_thread(_read, self.path, sql, args)

    async def _searching(self, fn: Callable[[sqlite3.Connection, bool], T], text: bool = True) -> tuple[T, str]:
        """fn(connection, full_text): for a query with words to look for (`text`), with the store's
        text index brought up to date and attached as `idx` where there is one (full_text says so);
        and the index's note for the page ("" when it covers the whole store)."""
        if not text:
            return await self.call(lambda db: fn(db, False)), ""
        usable, note = await self.keeper.current()
        index = self.keeper.index

        def with_index(db: sqlite3.Connection) -> T:
            if usable:
                index.attach(db)
            return fn(db, usable)
        return await self.call(with_index), note


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection (the store reader's; query_only too, in case a URI flag is ever lost)."""
    db = reader.connect(path, timeout=BUSY_TIMEOUT_S)
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
