"""Everything stored about one episode, as its page shows it: the row, its run, turns with their
reward's breakdown, LLM calls and the transcript (None in a store that has none for it)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from orchestrator.store.reader import has
from agents.recording import LLMCall
from orchestrator.store.records import TurnRecord
from orchestrator.store.transcript import StoredTranscript, decode


@dataclass(frozen=True)
class EpisodeDetail:
    fields: dict[str, Any]  # the episodes row, by column name
    run: dict[str, Any]  # the runs row it was stored by
    turns: list[TurnRecord]
    calls: list[LLMCall]
    transcript: StoredTranscript | None
    transcript_note: str = ""  # why there is none, when there is none


NO_TRANSCRIPT = ("no transcript stored: the store was written before transcripts were kept, or by a sweep with "
                 "transcripts = false; the turns below are what it kept")


def episode_detail(db: sqlite3.Connection, episode_id: int) -> EpisodeDetail | None:
    db.row_factory = sqlite3.Row
    try:
        row = db.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if row is None:
            return None
        run = db.execute("SELECT id, host, git_sha, sweep_hash, started_at, status FROM runs WHERE id = ?",
                         (row["run_id"],)).fetchone()
    finally:
        db.row_factory = None
    transcript, note = _transcript(db, episode_id)
    return EpisodeDetail(dict(row), dict(run) if run else {}, _turns(db, episode_id), _calls(db, episode_id),
                         transcript, note)


def _turns(db: sqlite3.Connection, episode_id: int) -> list[TurnRecord]:
    later = ", ".join(_or_null(db, "turns", ("breakdown", "started_s", "duration_s", "call_idx", "spans", "rewritten")))
    return [TurnRecord(o, a, obs, r, bool(x), _json(b), start, took, call, _spans(spans), kept)
            for o, a, obs, r, x, b, start, took, call, spans, kept in db.execute(
                f"SELECT output, action, observation, reward, executed, {later} FROM turns WHERE episode_id = ? "
                "ORDER BY idx", (episode_id,))]


def _calls(db: sqlite3.Connection, episode_id: int) -> list[LLMCall]:
    started = _or_null(db, "llm_calls", ("started_s",))[0]
    return [LLMCall(*c) for c in db.execute(
        f"SELECT model, served_model, prompt_tokens, completion_tokens, latency_s, attempts, cost_usd, {started} "
        "FROM llm_calls WHERE episode_id = ? ORDER BY idx", (episode_id,))]


def _or_null(db: sqlite3.Connection, table: str, columns: tuple[str, ...]) -> list[str]:
    """The columns, each as NULL where a store written before it lacks it (read-only: never added)."""
    return [column if has(db, table, column) else "NULL" for column in columns]


def _spans(text: str | None) -> list[list[Any]] | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _transcript(db: sqlite3.Connection, episode_id: int) -> tuple[StoredTranscript | None, str]:
    if not has(db, "transcripts"):
        return None, NO_TRANSCRIPT
    row = db.execute("SELECT format, body FROM transcripts WHERE episode_id = ?", (episode_id,)).fetchone()
    if row is None:
        return None, NO_TRANSCRIPT
    try:
        return decode(row[1], row[0]), ""
    except ValueError as exc:
        return None, f"the transcript cannot be read here: {exc}"


def _json(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"breakdown": text}
    return value if isinstance(value, dict) else {"breakdown": value}
