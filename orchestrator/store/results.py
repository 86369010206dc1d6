"""A sweep's results database (OUTDIR/results.db) read whole into plain records: what the report,
compare, nightly runs and the viewer's overview compute from.

Read-only and synchronous on purpose: report and compare are one-shot commands that call
`load_results` through `asyncio.to_thread`. A sweep may still be writing: whatever is committed
is read, and a half-finished sweep reports what it has. Bad input (no directory, no database,
not a results database) becomes one ConfigError line.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.store.reader import database_path, read_only


@dataclass(frozen=True)
class Run:
    """One invocation of `sweep` on the directory (first run or a resume)."""

    id: int
    sweep: str
    sweep_hash: str
    git_sha: str | None
    host: str
    started_at: float
    finished_at: float | None
    status: str


@dataclass(frozen=True)
class Episode:
    """One finished episode, with what report and compare need (no transcripts)."""

    model: str
    strategy: str
    task_set: str
    task_id: str
    epoch: int
    env: str
    status: str
    failure_class: str | None
    reward: float
    success: bool
    n_turns: int
    max_turns: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    unpriced_calls: int
    first_full_turn: int | None  # 1-based turn at which reward first reached 1.0; None if never

    @property
    def cell(self) -> tuple[str, str, str]:
        return self.model, self.strategy, self.task_set

    @property
    def cut_by_budget(self) -> bool:
        """Stopped by the sweep's spent budget: incomplete, not a failure; a resume runs it again."""
        return self.status == "budget_exhausted"

    @property
    def unscored(self) -> bool:
        """Its reward is unknown, never the model's 0: cut by the budget, or its task's verifier gave
        no reward (a Harbor task's tests timed out, could not start, wrote no reward)."""
        return self.cut_by_budget or self.failure_class == "verifier"


@dataclass(frozen=True)
class Results:
    """Everything a report shows: lineage plus the episodes."""

    path: Path
    meta: dict[str, str]
    runs: list[Run]
    episodes: list[Episode]
    image_digests: list[tuple[str, str | None]]  # (image, digest) pairs seen
    served_models: list[tuple[str, str | None]]  # (model in the sweep file, name the provider served)

    @property
    def sweep(self) -> str:
        return self.meta.get("sweep") or (self.runs[0].sweep if self.runs else "(unnamed)")


_EPISODES_SQL = """
SELECT e.model, e.strategy, e.task_set, e.task_id, e.epoch, e.env, e.status, e.failure_class,
       e.reward, e.success, e.n_turns, e.max_turns, e.prompt_tokens, e.completion_tokens,
       e.cost_usd, e.unpriced_calls,
       (SELECT MIN(t.idx) FROM turns t WHERE t.episode_id = e.id AND t.reward >= 1.0) AS first_full
FROM episodes e
ORDER BY e.model, e.strategy, e.task_set, e.task_id, e.epoch
"""


def load_results(outdir: Path) -> Results:
    """Read OUTDIR/results.db read-only; ConfigError when it is missing or not a results database."""
    with read_only(outdir) as db:
        return _read(db, database_path(outdir))


def _read(db: sqlite3.Connection, path: Path) -> Results:
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    runs = [Run(*row) for row in db.execute(
        "SELECT id, sweep, sweep_hash, git_sha, host, started_at, finished_at, status FROM runs ORDER BY id")]
    episodes = [_episode(row) for row in db.execute(_EPISODES_SQL)]
    digests = db.execute("SELECT DISTINCT image, image_digest FROM episodes ORDER BY image, image_digest").fetchall()
    served = db.execute("SELECT DISTINCT model, served_model FROM episodes ORDER BY model, served_model").fetchall()
    return Results(path, meta, runs, episodes, digests, served)


def _cost(stored: float | None, unpriced: int, tokens: int) -> float | None:
    """An episode without a call (no token, no unpriced call: the oracle, a replay) cost nothing;
    stores written before such episodes were stored at 0 hold None for them."""
    return 0.0 if stored is None and not unpriced and not tokens else stored


def _episode(row: tuple[Any, ...]) -> Episode:
    (model, strategy, task_set, task_id, epoch, env, status, failure_class, reward,
     success, n_turns, max_turns, prompt, completion, cost, unpriced, first_full) = row
    return Episode(model, strategy, task_set, task_id, epoch, env, status, failure_class, reward, success=bool(success), n_turns=n_turns, max_turns=max_turns, prompt_tokens=prompt,
                   completion_tokens=completion, cost_usd=_cost(cost, unpriced, prompt + completion), unpriced_calls=unpriced,
                   first_full_turn=None if first_full is None else first_full + 1)
