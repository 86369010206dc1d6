"""The sweep's writer of OUTDIR/results.db.

All SQLite work happens on one dedicated thread (the connection lives there), so the event loop
only awaits futures. Each episode is one transaction: committed when it ends, or not at all, so
a SIGKILL at any point leaves whole episodes only. WAL mode keeps readers (report, a second
terminal) out of the writer's way. A lock file keeps two sweeps out of one directory.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from foundation.errors import ConfigError, UserError
from orchestrator.store.identity import PARTS, encode_parts, refusal
from orchestrator.store.records import EpisodeKey, EpisodeRecord
from orchestrator.store.transcript import FORMAT as TRANSCRIPT_FORMAT

DB_NAME = "results.db"
SCHEMA = Path(__file__).with_name("schema.sql")
SCHEMA_VERSION = "1"
# Columns added since stores were first made: added to older stores when opened (the same schema
# version: readers of the older columns ignore them).
NEW_COLUMNS = {"episodes": [("host", "TEXT")],
               "turns": [("breakdown", "TEXT"), ("started_s", "REAL"), ("duration_s", "REAL"), ("call_idx", "INTEGER"),
                         ("spans", "TEXT"), ("rewritten", "TEXT")],
               "llm_calls": [("started_s", "REAL")],
               "runs": [("spent_usd", "REAL NOT NULL DEFAULT 0"), ("spent_tokens", "INTEGER NOT NULL DEFAULT 0")]}
T = TypeVar("T")


@dataclass(frozen=True)
class Stored:
    """How a stored episode ended, as a resume counts it: solved, or failed (it has a failure class)."""

    success: bool
    failed: bool


class StoreFull(UserError):
    """The disk filled up; what was committed before stays."""


class Store:
    def __init__(self, outdir: Path, executor: ThreadPoolExecutor) -> None:
        self.outdir = outdir
        self.path = outdir / DB_NAME
        self._executor = executor
        self._db: sqlite3.Connection | None = None

    @classmethod
    @asynccontextmanager
    async def open(cls, outdir: Path, *, sweep: str, identity: str,
                   parts: Mapping[str, str] | None = None) -> AsyncIterator[Store]:
        """Open (or create) the store of `outdir` for the sweep `sweep` with `identity` (made of
        `parts`, by name: a refusal names the one that changed); ConfigError if another sweep wrote
        it, or another process is writing it now."""
        with _directory_lock(outdir), ThreadPoolExecutor(1, thread_name_prefix="store") as executor:
            store = cls(outdir, executor)
            try:
                await store._call(store._connect, sweep, identity, parts)
                yield store
            finally:
                await asyncio.shield(store._call(store._close))

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        future = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        try:
            return await future
        except sqlite3.OperationalError as exc:
            if "full" in str(exc):
                raise StoreFull(f"the disk is full writing {self.path}: free some space and run the same "
                                "command again; finished episodes are kept") from None
            raise

    # ------------------------------------------------------------------ public, awaited from the loop

    async def start_run(self, *, sweep: str, identity: str, sweep_hash: str, git_sha: str | None,
                        config_json: str) -> int:
        return await self._call(self._start_run, sweep, identity, sweep_hash, git_sha, config_json)

    async def finish_run(self, run_id: int, status: str) -> None:
        await self._call(self._finish_run, run_id, status)

    async def finished_keys(self) -> dict[EpisodeKey, Stored]:
        """Stored episodes a resume must not run again, with how each ended. Infra failures
        and episodes cut short by the budget are left out: a resume runs them again, and each stays
        stored until its new record replaces it (`add_episode`), so a resume whose budget runs out
        first loses nothing."""
        return await self._call(self._finished_keys)

    async def add_episode(self, run_id: int, sweep: str, record: EpisodeRecord,
                          spent: tuple[float, int] | None = None) -> None:
        """Commit the episode; with `spent`, the run's model spend so far (dollars, tokens) with it."""
        await self._call(self._add_episode, run_id, sweep, record, spent)

    async def spent_before(self, run_id: int) -> tuple[float, int]:
        """What the runs before `run_id` spent on model calls: a budget holds for the whole sweep,
        across its resumes."""
        return await self._call(self._spent_before, run_id)

    # ------------------------------------------------------------------ on the store's thread

    def _connect(self, sweep: str, identity: str, parts: Mapping[str, str] | None) -> None:
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.OperationalError as exc:
            raise ConfigError(f"cannot open {self.path}: {exc}") from None
        self._db = db
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a crash of the process loses nothing committed
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables and "meta" not in tables:
                raise ConfigError(f"{self.path} is not a results database of this tool: choose another output directory")
            db.executescript(SCHEMA.read_text())
            _add_new_columns(db)
            db.execute("PRAGMA foreign_keys=ON")
            self._check_identity(sweep, identity, parts)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{self.path} is not a results database ({exc}): choose another output directory") from None

    def _check_identity(self, sweep: str, identity: str, parts: Mapping[str, str] | None) -> None:
        assert self._db is not None
        meta = dict(self._db.execute("SELECT key, value FROM meta"))
        if meta and meta.get("identity") != identity:
            raise ConfigError(refusal(self.outdir, meta, identity, parts))
        new = [] if meta else [("schema_version", SCHEMA_VERSION), ("sweep", sweep), ("identity", identity)]
        if parts and PARTS not in meta:  # a store from before the parts were kept gets them now
            new.append((PARTS, encode_parts(parts)))
        if new:
            with self._transaction():
                self._db.executemany("INSERT INTO meta VALUES (?, ?)", new)
        # Runs left 'running' by a killed process are over.
        with self._transaction():
            self._db.execute("UPDATE runs SET status='killed' WHERE status='running'")

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _transaction(self) -> Any:
        assert self._db is not None
        return _Transaction(self._db)

    def _start_run(self, sweep: str, identity: str, sweep_hash: str, git_sha: str | None, config_json: str) -> int:
        assert self._db is not None
        with self._transaction():
            cursor = self._db.execute(
                "INSERT INTO runs (sweep, identity, sweep_hash, git_sha, config_json, host, started_at, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
                (sweep, identity, sweep_hash, git_sha, config_json, socket.gethostname(), time.time()))
        return int(cursor.lastrowid or 0)

    def _finish_run(self, run_id: int, status: str) -> None:
        assert self._db is not None
        with self._transaction():
            self._db.execute("UPDATE runs SET status=?, finished_at=? WHERE id=?", (status, time.time(), run_id))

    def _finished_keys(self) -> dict[EpisodeKey, Stored]:
        assert self._db is not None
        rows = self._db.execute("SELECT model, strategy, task_set, task_id, epoch, success, failure_class IS NOT NULL "
                                "FROM episodes WHERE status NOT IN ('infra_error', 'budget_exhausted')")
        return {EpisodeKey(*row[:5]): Stored(bool(row[5]), bool(row[6])) for row in rows}

    def _spent_before(self, run_id: int) -> tuple[float, int]:
        assert self._db is not None
        usd, tokens = self._db.execute("SELECT COALESCE(SUM(spent_usd), 0), COALESCE(SUM(spent_tokens), 0) FROM runs "
                                       "WHERE id != ?", (run_id,)).fetchone()
        return float(usd), int(tokens)

    def _add_episode(self, run_id: int, sweep: str, r: EpisodeRecord, spent: tuple[float, int] | None) -> None:
        assert self._db is not None
        db = self._db
        with self._transaction():
            if spent is not None:
                db.execute("UPDATE runs SET spent_usd=?, spent_tokens=? WHERE id=?", (*spent, run_id))
            db.execute("DELETE FROM episodes WHERE sweep=? AND model=? AND strategy=? AND task_set=? AND task_id=? "
                       "AND epoch=?", (sweep, *r.key))  # a stored infra failure or cut episode, run again
            cursor = db.execute(
                "INSERT INTO episodes (run_id, sweep, model, strategy, task_set, task_id, epoch, env, dataset, "
                "task_index, query, gold, status, failure_class, error, reward, success, n_turns, max_turns, "
                "prompt_tokens, completion_tokens, cost_usd, unpriced_calls, attempts, image, image_digest, host, "
                "served_model, started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, sweep, *r.key, r.env, r.dataset, r.task_index, r.query, r.gold, r.status, r.failure_class,
                 r.error, r.reward, int(r.success), len(r.turns), r.max_turns,
                 sum(c.prompt_tokens for c in r.calls), sum(c.completion_tokens for c in r.calls), r.cost_usd,
                 sum(1 for c in r.calls if c.cost_usd is None), r.attempts, r.image, r.image_digest,
                 r.host, r.served_model, r.started_at, r.finished_at))
            episode_id = cursor.lastrowid
            db.executemany("INSERT INTO turns (episode_id, idx, output, action, observation, reward, executed, "
                           "breakdown, started_s, duration_s, call_idx, spans, rewritten) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", [
                (episode_id, i, t.output, t.action, t.observation, t.reward, int(t.executed),
                 json.dumps(t.breakdown) if t.breakdown else None, t.started_s, t.duration_s, t.call,
                 json.dumps(t.spans) if t.spans is not None else None, t.rewritten)
                for i, t in enumerate(r.turns)])
            db.executemany("INSERT INTO llm_calls (episode_id, idx, model, served_model, prompt_tokens, "
                           "completion_tokens, latency_s, attempts, cost_usd, started_s) VALUES (?,?,?,?,?,?,?,?,?,?)", [
                (episode_id, i, c.model, c.served_model, c.prompt_tokens, c.completion_tokens, c.latency_s,
                 c.attempts, c.cost_usd, c.started_s) for i, c in enumerate(r.calls)])
            if r.transcript is not None and r.transcript.calls:
                db.execute("INSERT INTO transcripts VALUES (?, ?, ?, ?)",
                           (episode_id, TRANSCRIPT_FORMAT, len(r.transcript.calls), r.transcript.encode()))


def _add_new_columns(db: sqlite3.Connection) -> None:
    """Columns added since a store was made: a store written before them gets them (empty)."""
    for table, columns in NEW_COLUMNS.items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for column, kind in columns:
            if column not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error (autocommit connection)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")


class _directory_lock:
    """An exclusive lock on OUTDIR/.lock for the life of the sweep; ConfigError when taken."""

    def __init__(self, outdir: Path) -> None:
        self.outdir = outdir
        self._fd: int | None = None

    def __enter__(self) -> None:
        try:
            self.outdir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.outdir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"cannot use output directory {self.outdir}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise ConfigError(f"{self.outdir} is in use by another sweep (pid {holder}): wait for it, or "
                              "choose another output directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None


def config_json(config: Any) -> str:
    return json.dumps(config.model_dump(mode="json"), sort_keys=True)
