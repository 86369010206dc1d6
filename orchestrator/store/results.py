"""A sweep's results database (OUTDIR/results.db) read whole into plain records: what the report,
compare, nightly runs and the viewer's overview compute from.

Read-only and synchronous on purpose: report and compare are one-shot commands that call
`load_results` through `asyncio.to_thread`. A sweep may still be writing: whatever is committed
is read, and a half-finished sweep reports what it has. Bad input (no directory, no database,
not a results database) becomes one ConfigError line.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.outcome import UNSCORED, Status
from orchestrator.store.records import EpisodeKey, Keyed
from orchestrator.store.reader import database_path, has, read_only
from tasks.harbor import KIND as HARBOR


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
class StoredEpisode(Keyed):
    """One finished episode as the store gives it back, with what report and compare need (no
    transcripts). Written as an `EpisodeRecord`; an episode of a recording (the original's) is a
    `RecordedEpisode` (orchestrator/fidelity/trajectories.py); what an agent of yours is given, an
    `Episode` (agents/own.py)."""

    key: EpisodeKey
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
    # A Harbor episode's reward keys (reward.json's numbers, from its scoring turn's breakdown); {} for
    # other kinds and for an episode never scored. Left out of the hash: a dict has none.
    reward_keys: dict[str, float] = field(default_factory=dict, hash=False)

    @property
    def cell(self) -> tuple[str, str, str]:
        return self.model, self.strategy, self.task_set

    @property
    def cut_by_budget(self) -> bool:
        """Stopped by the sweep's spent budget: incomplete, not a failure; a resume runs it again."""
        return self.status == Status.BUDGET_EXHAUSTED

    @property
    def unscored(self) -> bool:
        """Its reward is unknown, never the model's 0: cut by the budget, or its task's verifier gave
        no reward (a Harbor task's tests timed out, could not start, wrote no reward, or needed the
        internet)."""
        return self.cut_by_budget or self.failure_class in UNSCORED


@dataclass(frozen=True)
class Results:
    """Everything a report shows: lineage plus the episodes."""

    path: Path
    meta: dict[str, str]
    runs: list[Run]
    episodes: list[StoredEpisode]
    image_digests: list[tuple[str, str | None]]  # (image, digest) pairs seen
    served_models: list[tuple[str, str | None]]  # (model in the sweep file, name the provider served)

    @property
    def sweep(self) -> str:
        return self.meta.get("sweep") or (self.runs[0].sweep if self.runs else "(unnamed)")


_EPISODES_SQL = """
SELECT e.id, e.model, e.strategy, e.task_set, e.task_id, e.epoch, e.env, e.status, e.failure_class,
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
    keys = reward_keys(db)
    episodes = [_episode(row[1:], keys.get(row[0], {})) for row in db.execute(_EPISODES_SQL)]
    digests = db.execute("SELECT DISTINCT image, image_digest FROM episodes ORDER BY image, image_digest").fetchall()
    served = db.execute("SELECT DISTINCT model, served_model FROM episodes ORDER BY model, served_model").fetchall()
    return Results(path, meta, runs, episodes, digests, served)


def _cost(stored: float | None, unpriced: int, tokens: int) -> float | None:
    """An episode without a call (no token, no unpriced call: the oracle, a replay) cost nothing;
    stores written before such episodes were stored at 0 hold None for them."""
    return 0.0 if stored is None and not unpriced and not tokens else stored


# The scoring turns of Harbor episodes: the verifier's reward keys are in the breakdown of the turn
# that submitted (an installed agent's earlier turns keep other numbers there: the files it wrote).
_SCORING_SQL = """
SELECT t.episode_id, t.breakdown FROM episodes e JOIN turns t ON t.episode_id = e.id
WHERE e.env = ? AND substr(t.action, 1, 6) = 'submit' AND t.breakdown IS NOT NULL
ORDER BY t.episode_id, t.idx
"""


def reward_keys(db: sqlite3.Connection) -> dict[int, dict[str, float]]:
    """Episode id -> the numbers of its scoring turn's breakdown (the last, should it have
    submitted twice), for every Harbor episode that has one: `steps`, `artifacts` and other
    values that are not numbers left out."""
    if not has(db, "turns", "breakdown"):
        return {}
    return {episode: _numbers(text) for episode, text in db.execute(_SCORING_SQL, (HARBOR,))}


def _numbers(text: str) -> dict[str, float]:
    """A breakdown's numbers (not its flags); none from one that is no JSON object."""
    try:
        parts = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(parts, dict):
        return {}
    return {k: float(v) for k, v in parts.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _episode(row: tuple[Any, ...], keys: dict[str, float]) -> StoredEpisode:
    (model, strategy, task_set, task_id, epoch, env, status, failure_class, reward,
     success, n_turns, max_turns, prompt, completion, cost, unpriced, first_full) = row
    return StoredEpisode(EpisodeKey(model, strategy, task_set, task_id, epoch), env, status, failure_class, reward,
                   success=bool(success), n_turns=n_turns, max_turns=max_turns, prompt_tokens=prompt,
                   completion_tokens=completion, cost_usd=_cost(cost, unpriced, prompt + completion), unpriced_calls=unpriced,
                   first_full_turn=None if first_full is None else first_full + 1,
                   reward_keys=keys)
