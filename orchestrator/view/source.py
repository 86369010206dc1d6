"""One sweep's results.db as the viewer reads it: read-only, off the event loop, checked once at start.

Every query opens its own read-only connection in a worker thread (`mode=ro`; `immutable` on
read-only media, orchestrator/store/reader.py). SQLite in WAL mode lets such
readers see each committed episode while the sweep writes, and they never block its writer; a
read-only connection cannot write even by mistake. What is costly to compute over a whole store
(the report's view) is cached under a change token, so a page over a store that did not change
does not read it again.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from foundation.concurrency import TaskOwner
from foundation.errors import ConfigError, UserError
from orchestrator.store.results import Results, load_results
from orchestrator.report.content import ReportContent, build_content
from orchestrator.store import reader
from orchestrator.store.reader import REQUIRED_TABLES, database_path
from orchestrator.store.store import SCHEMA_VERSION
from orchestrator.view.charts import CellCharts, cell_charts
from orchestrator.view.queries import CellProgress, progress
from orchestrator.view.search import IndexKeeper
from orchestrator.view.sweeplog import PlannedEpisodes

T = TypeVar("T")
BUSY_TIMEOUT_S = 1.0  # how long a reader waits on a lock before saying the store is locked


class StoreLocked(UserError):
    """Another process holds the store exclusively (not a sweep: WAL lets readers in beside one)."""


@dataclass(frozen=True)
class Snapshot:
    """The report's view of a store as of one change token."""

    token: tuple[Any, ...]
    results: Results
    view: ReportContent
    charts: CellCharts | None = None  # drawn after the view, from every turn and call (None: not yet)
    charts_token: tuple[Any, ...] | None = None  # the store's state they are of


@dataclass(frozen=True)
class Overview:
    """The progress per cell as of `token`, and the report's view as of `snapshot.token`: the two
    differ for the second or so a large store's view takes to compute again after a change."""

    token: tuple[Any, ...]
    progress: list[CellProgress]
    snapshot: Snapshot
    planned: int | None  # episodes the sweep's latest run planned (sweep.log); None when unknown

    @property
    def current(self) -> bool:
        return self.snapshot.token == self.token == self.snapshot.charts_token


@dataclass
class Source:
    """A sweep's output directory, opened for reading; `index` is its place in the command line.

    The report's view is computed from the whole store (about a second at 100,000 episodes), so it
    is cached under the store's change token and computed again by one background task the Source
    owns (`aclose` ends it); the overview shows the last view meanwhile, with fresh progress.
    """

    index: int
    outdir: Path
    path: Path
    sweep: str
    label: str = ""  # the sweep's name, with its directory where another open store has the same name
    _snapshot: Snapshot | None = None
    _refresh: asyncio.Task[Snapshot] | None = None
    _drawing: asyncio.Task[None] | None = None  # the charts of the latest view
    _progress: tuple[tuple[Any, ...], list[CellProgress]] | None = field(default=None, repr=False)
    _planned: PlannedEpisodes | None = field(default=None, repr=False)
    _tasks: TaskOwner = field(default_factory=lambda: TaskOwner("view"), repr=False)  # the refresh, the index
    _keeper: IndexKeeper | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.label = self.label or self.sweep
        self._keeper = IndexKeeper(self.path, self._tasks)

    @property
    def keeper(self) -> IndexKeeper:
        assert self._keeper is not None
        return self._keeper

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
        return cls(index, outdir, path, meta.get("sweep") or outdir.name, _planned=PlannedEpisodes.of(outdir))

    async def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query, read in a worker thread."""
        return await asyncio.to_thread(_read, self.path, sql, args)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """fn(connection) in a worker thread, on a read-only connection of its own."""
        return await asyncio.to_thread(_with_connection, self.path, fn)

    async def call_searching(self, fn: Callable[[sqlite3.Connection, bool], T], text: bool = True) -> tuple[T, str]:
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

    async def token(self) -> tuple[Any, ...]:
        """Changes whenever an episode is stored (or replaced) or a run starts or ends; its last
        part is the latest run's status."""
        (row,) = await self.rows("SELECT (SELECT max(id) FROM episodes), (SELECT count(*) FROM episodes), "
                                 "(SELECT group_concat(status) FROM runs), "
                                 "(SELECT status FROM runs ORDER BY id DESC LIMIT 1)")
        return tuple(row)

    async def overview(self) -> Overview:
        """Progress as of now; the report's view as of now, or while it is computed again, the last one."""
        token = await self.token()
        task = self._refresh_for(token)
        if self._snapshot is None and task is not None:
            await asyncio.shield(task)  # the first view: wait (shielded: a client leaving must not cancel it)
        assert self._snapshot is not None and self._planned is not None
        planned = await asyncio.to_thread(self._planned.read)
        return Overview(token, await self._progress_at(token), self._snapshot, planned)

    async def snapshot(self) -> Snapshot:
        """The report's view as of now, waiting for it when the store moved."""
        task = self._refresh_for(await self.token())
        if task is not None:
            await asyncio.shield(task)
        assert self._snapshot is not None
        return self._snapshot

    async def aclose(self) -> None:
        # The refresh, if one runs: its error, if it failed, was for a page nobody waits for any more.
        self.keeper.close()
        await self._tasks.aclose()

    def _refresh_for(self, token: tuple[Any, ...]) -> asyncio.Task[Snapshot] | None:
        """The task computing the view, started when the store moved and none runs; a failed one's
        error is raised here, once, for the page that asked (the next request tries again)."""
        task = self._refresh
        if task is not None and task.done():
            self._refresh = None
            task.result()
        elif task is not None:
            return task
        if self._snapshot is not None and self._snapshot.token == token:
            return None
        self._refresh = self._tasks.start(self._compute(token), name="refresh")
        return self._refresh

    async def _compute(self, token: tuple[Any, ...]) -> Snapshot:
        results = await asyncio.to_thread(load_results, self.outdir)
        view = await asyncio.to_thread(build_content, results)
        last = self._snapshot
        self._snapshot = Snapshot(token, results, view, last.charts if last else None, last.charts_token if last else None)
        self._draw()
        return self._snapshot

    def _draw(self) -> None:
        """The charts read every turn and call (seconds at 100,000 episodes): drawn in a task of their
        own after the view, so no page waits for them; the last ones are shown meanwhile."""
        if self._drawing is not None and not self._drawing.done():
            return
        self._drawing = self._tasks.spawn(self._charts(), name="charts")

    async def _charts(self) -> None:
        while self._snapshot is not None and self._snapshot.charts_token != self._snapshot.token:
            token = self._snapshot.token
            charts = await self.call(cell_charts)
            self._snapshot = replace(self._snapshot, charts=charts, charts_token=token)

    async def _progress_at(self, token: tuple[Any, ...]) -> list[CellProgress]:
        if self._progress is None or self._progress[0] != token:
            self._progress = (token, await self.call(progress))
        return self._progress[1]


def token_text(token: tuple[Any, ...]) -> str:
    return ":".join(map(str, token))


def running(token: tuple[Any, ...]) -> bool:
    """Whether the store's latest run is going (its pages keep polling), by its change token."""
    return token[-1] == "running"


def share_indexes(sources: Sequence[Source]) -> None:
    """A store opened twice (`view OUT OUT`) has one text index, kept by its first Source."""
    first: dict[Path, Source] = {}
    for source in sources:
        keeper = first.setdefault(source.path.resolve(), source)._keeper
        source._keeper = keeper


def label_sources(sources: Sequence[Source]) -> None:
    """Stores of the same sweep name are told apart by their directories: the name, then the shortest
    end of each path that differs between them ("quickstart (night-2/out)")."""
    by_name: dict[str, list[Source]] = {}
    for source in sources:
        by_name.setdefault(source.sweep, []).append(source)
    for same in by_name.values():
        if len(same) < 2:
            continue
        parts = [source.outdir.resolve().parts for source in same]
        for depth in range(1, max(len(p) for p in parts) + 1):
            ends = ["/".join(p[-depth:]) for p in parts]
            if len(set(ends)) == len(ends):
                break
        if len(set(ends)) < len(ends):  # one directory opened twice
            ends = [f"{end} #{source.index}" for source, end in zip(same, ends, strict=True)]
        for source, end in zip(same, ends, strict=True):
            source.label = f"{source.sweep} ({end})"


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
