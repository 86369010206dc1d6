"""The viewer's SQL: per-cell progress, filtered and paged episode lists, one episode, paired tasks.

Every list is a page (LIMIT/OFFSET) over an indexed filter, so no page reads a whole store into
memory. Filter values arrive from a URL: they are checked here, and a bad one is a ConfigError
line the page shows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from foundation.errors import ConfigError
from orchestrator.store.records import LLMCall, TurnRecord

PAGE_SIZE = 50
STATUSES = ("solved", "submitted", "max_turns", "model_error", "budget_exhausted", "timeout", "task_error",
            "infra_error", "verifier_error")
FAILURE_CLASSES = ("none", "any", "model", "task", "infra", "verifier")
SORTS = {  # name -> ORDER BY; id last so every order is total and pages never overlap
    "newest": "e.id DESC",
    "oldest": "e.id",
    "reward": "e.reward DESC, e.id",
    "reward-asc": "e.reward, e.id",
    "turns": "e.n_turns DESC, e.id",
    "task": "e.task_id, e.epoch, e.id",
    "tokens": "e.prompt_tokens + e.completion_tokens DESC, e.id",
    "cost": "e.cost_usd DESC, e.id",
}
LIST_COLUMNS = ("e.id, e.model, e.strategy, e.task_set, e.task_id, e.epoch, e.status, e.failure_class, e.reward, "
                "e.n_turns, e.prompt_tokens + e.completion_tokens, e.cost_usd, e.query, e.finished_at")


@dataclass(frozen=True)
class EpisodeFilter:
    """What an episode list shows: a cell (any part may be empty: all), status, success, failure
    class ("none", "any" or one), a reward range, text in the task's query or id, the order and the page (from 1)."""

    model: str = ""
    strategy: str = ""
    task_set: str = ""
    status: str = ""
    success: str = ""  # "", "yes" or "no"
    failure: str = ""
    min_reward: str = ""
    max_reward: str = ""
    text: str = ""
    sort: str = "newest"
    page: int = 1

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> EpisodeFilter:
        """From URL parameters; ConfigError naming the first bad one."""
        values: dict[str, Any] = {f.name: query[f.name].strip() for f in fields(cls) if query.get(f.name)}
        if values.get("status", "") not in ("", *STATUSES):
            raise ConfigError(f"unknown status {values['status']!r}: one of {', '.join(STATUSES)}")
        if values.get("success", "") not in ("", "yes", "no"):
            raise ConfigError(f"success must be yes or no, not {values['success']!r}")
        if values.get("failure", "") not in ("", *FAILURE_CLASSES):
            raise ConfigError(f"unknown failure class {values['failure']!r}: one of {', '.join(FAILURE_CLASSES)}")
        if values.get("sort", "newest") not in SORTS:
            raise ConfigError(f"unknown sort {values['sort']!r}: one of {', '.join(SORTS)}")
        for name in ("min_reward", "max_reward"):
            _number(name, values.get(name, ""))
        page = values.get("page", "1")
        if not str(page).isdigit() or int(page) < 1:
            raise ConfigError(f"page must be a whole number from 1, not {page!r}")
        values["page"] = int(page)
        return cls(**values)

    def where(self) -> tuple[str, list[Any]]:
        """The WHERE clause (over `episodes e`) and its arguments."""
        clauses, args = [], []
        for column in ("model", "strategy", "task_set", "status"):
            if getattr(self, column):
                clauses.append(f"e.{column} = ?")
                args.append(getattr(self, column))
        if self.success:
            clauses.append("e.success = ?")
            args.append(int(self.success == "yes"))
        if self.failure in ("none", "any"):
            clauses.append(f"e.failure_class IS {'' if self.failure == 'none' else 'NOT '}NULL")
        elif self.failure:
            clauses.append("e.failure_class = ?")
            args.append(self.failure)
        if self.min_reward:
            clauses.append("e.reward >= ?")
            args.append(float(self.min_reward))
        if self.max_reward:
            clauses.append("e.reward <= ?")
            args.append(float(self.max_reward))
        if self.text:
            clauses.append("(instr(e.query, ?) > 0 OR instr(e.task_id, ?) > 0)")
            args += [self.text, self.text]
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def params(self, **changes: Any) -> dict[str, str]:
        """The non-default fields as URL parameters, with `changes` applied."""
        merged = {f.name: getattr(self, f.name) for f in fields(self)} | changes
        defaults = EpisodeFilter()
        return {k: str(v) for k, v in merged.items() if v != getattr(defaults, k)}


def _number(name: str, text: str) -> None:
    try:
        if text:
            float(text)
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {text!r}") from None


@dataclass(frozen=True)
class EpisodeRow:
    id: int
    model: str
    strategy: str
    task_set: str
    task_id: str
    epoch: int
    status: str
    failure_class: str | None
    reward: float
    n_turns: int
    tokens: int
    cost_usd: float | None
    query: str
    finished_at: float


@dataclass(frozen=True)
class EpisodePage:
    rows: list[EpisodeRow]
    total: int  # episodes matching the filter

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


def episode_page(db: sqlite3.Connection, flt: EpisodeFilter) -> EpisodePage:
    """One page of the filter's episodes. The ids are sorted first and the page's rows read after:
    SQLite's sorter then moves a key and an id per episode, not the whole row (4x faster at 100,000)."""
    where, args = flt.where()
    order = SORTS[flt.sort]
    (total,) = db.execute(f"SELECT count(*) FROM episodes e{where}", args).fetchone()
    page_ids = f"SELECT e.id FROM episodes e{where} ORDER BY {order} LIMIT ? OFFSET ?"
    rows = db.execute(f"SELECT {LIST_COLUMNS} FROM episodes e WHERE e.id IN ({page_ids}) ORDER BY {order}",
                      [*args, PAGE_SIZE, (flt.page - 1) * PAGE_SIZE]).fetchall()
    return EpisodePage([EpisodeRow(*row) for row in rows], total)


@dataclass(frozen=True)
class CellProgress:
    """What is stored of one cell so far (the live part of the overview)."""

    model: str
    strategy: str
    task_set: str
    episodes: int
    successes: int
    failures: int  # any failure class
    cut: int
    last_finished: float


PROGRESS_SQL = """
SELECT model, strategy, task_set, count(*), sum(success), sum(failure_class IS NOT NULL),
       sum(status = 'budget_exhausted'), max(finished_at)
FROM episodes GROUP BY model, strategy, task_set ORDER BY model, strategy, task_set
"""


def progress(db: sqlite3.Connection) -> list[CellProgress]:
    return [CellProgress(*row) for row in db.execute(PROGRESS_SQL)]


@dataclass(frozen=True)
class EpisodeDetail:
    """Everything stored about one episode, with its run's lineage."""

    fields: dict[str, Any]  # the episodes row, by column name
    run: dict[str, Any]  # the runs row it was stored by
    turns: list[TurnRecord]
    calls: list[LLMCall]


def episode_detail(db: sqlite3.Connection, episode_id: int) -> EpisodeDetail | None:
    db.row_factory = sqlite3.Row
    row = db.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
    if row is None:
        return None
    run = db.execute("SELECT id, host, git_sha, sweep_hash, started_at, status FROM runs WHERE id = ?",
                     (row["run_id"],)).fetchone()
    db.row_factory = None
    turns = [TurnRecord(o, a, obs, r, bool(x)) for o, a, obs, r, x in db.execute(
        "SELECT output, action, observation, reward, executed FROM turns WHERE episode_id = ? ORDER BY idx",
        (episode_id,))]
    calls = [LLMCall(*c) for c in db.execute(
        "SELECT model, served_model, prompt_tokens, completion_tokens, latency_s, attempts, cost_usd FROM llm_calls "
        "WHERE episode_id = ? ORDER BY idx", (episode_id,))]
    return EpisodeDetail(dict(row), dict(run) if run else {}, turns, calls)
