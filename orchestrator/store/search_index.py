"""Full-text search over a store's episodes: SQLite FTS5, in a side file of the viewer's own.

Why a side file and not results.db: the viewer opens the store read-only. Writing an index into
it would take the store's write lock from a sweep that is writing it (its writer must never
wait on us) and is impossible on read-only media. So the index is a database of its own in the
cache directory (`cache_dir()/view-index/<hash of the store's path>.db`), which the viewer writes
and the store never sees; several viewers of one store share it (SQLite's locks keep them apart).

What: one row per episode, its rowid the episode's id; columns `task` (id and query), `outputs`,
`actions`, `observations` (all its turns', joined), `prompts` (the lines of the system and user
messages of its transcript, decoded by a SQL function of the writer's: each distinct line once, and
none that is a line of its observations, so that a dialogue's template and the observations it
feeds back are not indexed once per turn), `error` and `gold`. Contentless
(`content=''`): the index holds the tokens only, the texts stay in results.db, and the few that a
page shows are read from there (`snippets`). A search joins the matching ids with the store's
episodes, so an id that left the store (an infrastructure failure run again is stored under a new
id) drops out of every result.

Kept current: built in the background when the viewer opens the store, a chunk of episodes per
transaction (searches meanwhile look in the tasks only, and say so); then before each search the
episodes stored since (ids above the last one indexed: the store's ids only grow) are added. A
store made anew in the same place (its first run differs), or whose newest indexed episode was
replaced under the same id, is indexed from scratch; so is an index of another VERSION (version 2
added the prompts, the error and the gold). A store made before transcripts were kept has no
prompts to index. What a search's text means is search_query.py's.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog

from foundation.concurrency import TaskOwner
from foundation.settings import cache_dir
from orchestrator.store import reader
from orchestrator.store.transcript import UNREADABLE, prompts_beside

CHUNK = 5000  # episodes per transaction while building: the store's snapshot is never held long
LOCK_WAIT_S = 30.0  # seconds a viewer waits on another's write to the shared index
BUILD_WAIT_S = 1.0  # a search while the index is built waits this long for it before looking in the tasks only
VERSION = "2"
FIELDS = ("task", "outputs", "actions", "observations", "prompts", "error", "gold")
TABLE = (f"CREATE VIRTUAL TABLE IF NOT EXISTS episode_text USING fts5({', '.join(FIELDS)}, content='', "
         "tokenize='unicode61 remove_diacritics 2')")
SCHEMA = f"CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); {TABLE};"
# An episode's texts, each field its turns' joined (correlated: one pass over the chunk's turns), its
# transcript's prompts (`{prompts}`: PROMPTS, or NULL for a store without transcripts), error and gold.
ROWS = """
INSERT INTO episode_text (rowid, task, outputs, actions, observations, prompts, error, gold)
SELECT e.id, e.task_id || ' ' || e.query,
       (SELECT group_concat(output, char(10)) FROM store.turns t WHERE t.episode_id = e.id),
       (SELECT group_concat(action, char(10)) FROM store.turns t WHERE t.episode_id = e.id),
       (SELECT group_concat(observation, char(10)) FROM store.turns t WHERE t.episode_id = e.id),
       {prompts}, e.error, e.gold
FROM store.episodes e WHERE e.id > ? AND e.id <= ?
"""
PROMPTS = """(SELECT prompts(x.episode_id, x.format, x.body,
                (SELECT group_concat(observation, char(10)) FROM store.turns t WHERE t.episode_id = e.id))
        FROM store.transcripts x WHERE x.episode_id = e.id)"""
log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Coverage:
    indexed: int  # the newest episode id the index holds
    newest: int  # the store's newest
    started: bool  # whether the build has begun


class TextIndex:
    """The index of one store (see the module's docstring). `update` and `coverage` block: call them
    in a worker thread. `attach(db)` makes the index readable on a connection to the store as `idx`."""

    def __init__(self, store: Path) -> None:
        digest = hashlib.sha256(str(store.resolve()).encode()).hexdigest()[:24]
        self.store = store
        self.path = cache_dir() / "view-index" / f"{digest}.db"
        self._lock = threading.Lock()  # one writer in this process (others: SQLite's lock)
        self.progress = Coverage(0, 0, False)  # as of the last chunk this process indexed

    def update(self, stop: threading.Event | None = None) -> None:
        """Index every episode stored since the last update (all of them the first time); `stop`
        set ends the work after the chunk in hand (a thread cannot be cancelled). Each chunk reads
        how far the index goes inside its own write transaction, so viewers in two processes that
        share the index add each episode once between them."""
        with self._lock, self._writer() as db:
            stamp = _stamp(db)
            (newest,) = db.execute("SELECT coalesce(max(id), 0) FROM store.episodes").fetchone()
            with _writing(db):
                meta = dict(db.execute("SELECT key, value FROM meta"))
                if meta.get("stamp") != stamp or meta.get("version") != VERSION or _replaced(db, meta):
                    db.execute("DROP TABLE IF EXISTS episode_text")  # from scratch
                    db.execute("DELETE FROM meta")
                    db.execute(TABLE)
                    _set(db, stamp=stamp, version=VERSION, indexed="0")
            rows = _rows(db)
            while not (stop is not None and stop.is_set()) and self._chunk(db, rows, newest):
                pass
            db.execute("PRAGMA main.wal_checkpoint(TRUNCATE)")  # the index's log, given back (never the store's)

    def _chunk(self, db: sqlite3.Connection, rows: str, newest: int) -> bool:
        """Index the next chunk of episodes up to `newest` with `rows` (`_rows`); False when there was none left."""
        with _writing(db):
            (text,) = db.execute("SELECT value FROM meta WHERE key = 'indexed'").fetchone()
            indexed = int(text)
            self.progress = Coverage(indexed, newest, True)
            if indexed >= newest:
                return False
            top = min(indexed + CHUNK, newest)
            db.execute(rows, (indexed, top))
            (finished,) = db.execute("SELECT coalesce(max(finished_at), 0) FROM store.episodes WHERE id = ?",
                                     (top,)).fetchone()
            _set(db, indexed=str(top), last_finished=repr(finished))
        self.progress = Coverage(top, newest, True)
        return True

    def attach(self, db: sqlite3.Connection) -> None:
        db.execute("ATTACH DATABASE ? AS idx", (f"{self.path.resolve().as_uri()}?mode=ro",))

    @contextmanager
    def _writer(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=LOCK_WAIT_S, isolation_level=None,
                                     check_same_thread=False)) as db:
            _write_ahead(db)  # a search reads while the episodes stored since are added
            db.execute("PRAGMA main.journal_size_limit = 67108864")
            db.executescript(SCHEMA)
            db.create_function("prompts", 4, _prompts, deterministic=True)
            db.execute("ATTACH DATABASE ? AS store", (reader.read_uri(self.store),))
            yield db


def _write_ahead(db: sqlite3.Connection) -> None:
    """The index in WAL mode. Two viewers opening a new index at once both ask to switch it, which
    takes its lock whole; SQLite answers the second "locked" at once, without its busy wait, so the
    switch is asked again until LOCK_WAIT_S has passed (once switched, asking is a read)."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            db.execute("PRAGMA main.journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # the other viewer's switch takes milliseconds


def _rows(db: sqlite3.Connection) -> str:
    """The INSERT of a chunk's texts: a store made before transcripts were kept has no prompts."""
    kept = db.execute("SELECT 1 FROM store.sqlite_master WHERE type = 'table' AND name = 'transcripts'").fetchone()
    return ROWS.format(prompts=PROMPTS if kept else "NULL")


def _prompts(episode_id: int, format_: int, body: bytes, observations: str | None) -> str | None:
    """SQL `prompts(episode_id, format, body, observations)`: the lines of a stored transcript's
    prompts that are none of the episode's `observations`' lines (those are indexed as such). A
    transcript this viewer cannot read is logged and left out, so that the episode's other texts
    (and every other episode) are still indexed: an error raised here would fail the whole index."""
    try:
        return prompts_beside(body, format_, observations)
    except UNREADABLE as exc:
        log.warning("view_index_transcript_unreadable", episode_id=episode_id, error=str(exc))
        return None


def _stamp(db: sqlite3.Connection) -> str:
    """What tells this store from another made in the same place: its identity and its first run."""
    identity = db.execute("SELECT value FROM store.meta WHERE key = 'identity'").fetchone()
    first = db.execute("SELECT min(started_at) FROM store.runs").fetchone()
    return f"{identity[0] if identity else ''}@{first[0] if first else ''}"


def _replaced(db: sqlite3.Connection, meta: dict[str, str]) -> bool:
    """Whether the newest indexed episode was replaced under its own id (an infrastructure failure
    run again while it was the store's newest: SQLite gives the next row the freed id)."""
    indexed = int(meta.get("indexed", 0))
    if not indexed:
        return False
    row = db.execute("SELECT finished_at FROM store.episodes WHERE id = ?", (indexed,)).fetchone()
    return row is not None and repr(row[0]) != meta.get("last_finished")


@contextmanager
def _writing(db: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an error), on a connection in autocommit mode: the
    write lock is taken before anything is read."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _set(db: sqlite3.Connection, **values: str) -> None:
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values.items())


class IndexKeeper:
    """A store's index, from the viewer's event loop: built in the background from the start (a
    task `owner` owns), brought up to date before each search once built. A search while it is
    first built, or where it cannot be written (no cache directory, a lock held too long), looks
    for its words in the tasks' ids and queries only, and the page says so."""

    def __init__(self, store: Path, owner: TaskOwner) -> None:
        self.index = TextIndex(store)
        self._owner = owner
        self._stop = threading.Event()
        self._lock = asyncio.Lock()
        self._build: asyncio.Task[None] | None = None
        self.failure = ""

    def start(self) -> None:
        self._build = self._owner.start(self._update(), name="text index")

    async def _update(self) -> None:
        async with self._lock:
            try:
                await asyncio.to_thread(self.index.update, self._stop)
                self.failure = ""
            except (OSError, sqlite3.Error) as exc:
                self.failure = f"the full-text index cannot be kept in {self.index.path.parent} ({exc})"
                log.warning("view_index_failed", store=str(self.index.store), error=str(exc))

    async def current(self) -> tuple[bool, str]:
        """(whether searches use the index, a note for the page: "" when it covers the whole store).
        While the first build runs, nothing reads the index (so its log can be checkpointed as it
        grows): words are looked for in the tasks, and the page says how far the build is."""
        if self._build is None:
            self.start()
        assert self._build is not None
        if not self._build.done():
            await asyncio.wait({self._build}, timeout=BUILD_WAIT_S)  # a small store's is done by then
        if not self._build.done():
            done = self.index.progress
            return False, (f"the full-text index is being built ({done.indexed:,} of {done.newest:,} episodes so far): "
                           "until it is done, words are looked for in the tasks' ids and queries only")
        await self._update()  # the episodes stored since, and another try after a failure
        if self.failure:
            return False, self.failure + ": words are looked for in the tasks' ids and queries only"
        return True, ""

    def close(self) -> None:
        """Ask a build in progress to stop after its current chunk (its task is the owner's to end)."""
        self._stop.set()
