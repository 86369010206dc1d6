"""The viewer's SQL of lists: filters, orders, pages, an episode's neighbours in a list, one task's
episodes, the texts a search's words are marked in, per-cell progress.

Every list is a page (LIMIT/OFFSET) over an indexed filter, so no page reads a whole store into
memory. Filter values arrive from a URL: they are checked here, and a bad one is a ConfigError
line the page shows (a 400). Text (its AND and OR read by search_query.py) is searched in the
full-text index (search_index.py) when the store has one attached as `idx`, else in the task's id
and query only.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from foundation.errors import ConfigError
from foundation.outcome import FailureClass, Status
from orchestrator.store.records import EpisodeKey, Keyed
from orchestrator.store.search_query import fts_query, parse, words
from orchestrator.store import reader
from orchestrator.store.transcript import UNREADABLE, prompts_beside

PAGE_SIZE = 50
MAX_ID = 2**63 - 1  # SQLite's largest integer: a larger number is no episode, not an overflow
MAX_PAGE = 10**9
MAX_SEARCH = 1000  # characters of a search: a few lines
STATUSES = tuple(Status)
FAILURE_CLASSES = ("none", "any", *FailureClass)
FAILURE_LABELS = {"": "all", "none": "no error", "any": "any error"}
Key = tuple[tuple[str, bool], ...]  # (expression over `episodes e`, descending?)
# name -> order; every order ends in the id, so it is total and pages never overlap. Expressions
# never NULL (coalesce), so an episode's place in an order can be compared (neighbours).
SORTS: dict[str, Key] = {
    "newest": (("e.id", True),),
    "oldest": (("e.id", False),),
    "reward": (("e.reward", True), ("e.id", False)),
    "reward-asc": (("e.reward", False), ("e.id", True)),
    "turns": (("e.n_turns", True), ("e.id", False)),
    "turns-asc": (("e.n_turns", False), ("e.id", True)),
    "task": (("e.task_id", False), ("e.epoch", False), ("e.id", False)),
    "task-desc": (("e.task_id", True), ("e.epoch", True), ("e.id", True)),
    "cell": (("e.model", False), ("e.strategy", False), ("e.task_set", False), ("e.id", False)),
    "cell-desc": (("e.model", True), ("e.strategy", True), ("e.task_set", True), ("e.id", True)),
    "status": (("e.status", False), ("e.id", False)),
    "status-desc": (("e.status", True), ("e.id", True)),
    "tokens": (("e.prompt_tokens + e.completion_tokens", True), ("e.id", False)),
    "tokens-asc": (("e.prompt_tokens + e.completion_tokens", False), ("e.id", True)),
    "cost": (("coalesce(e.cost_usd, -1)", True), ("e.id", False)),
    "cost-asc": (("coalesce(e.cost_usd, -1)", False), ("e.id", True)),
}
# Each order and its reverse is one index of schema.sql read forwards or backwards (so a deep page
# of the whole store steps through an index instead of sorting 100,000 rows): the tie-break by id
# turns with the column.


def whole_number(text: str, name: str, low: int = 0, high: int = MAX_ID) -> int:
    """`text` as a whole number in [low, high]; a ConfigError line otherwise."""
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise ConfigError(f"{name} must be a whole number from {low} to {high}, not {text[:40]!r}")
    return int(text)


@dataclass(frozen=True)
class EpisodeFilter:
    """What an episode list shows: a cell (any part may be empty: all), status, success, error
    class ("none", "any" or one), a reward range, words anywhere in the episode, the order and the page (from 1)."""

    model: str = ""
    strategy: str = ""
    task_set: str = ""
    task_id: str = ""
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
        _one_of("status", values.get("status", ""), ("", *STATUSES))
        _one_of("success", values.get("success", ""), ("", "yes", "no"))
        _one_of("failure (error class)", values.get("failure", ""), ("", *FAILURE_CLASSES))
        _one_of("sort", values.get("sort", "newest"), tuple(SORTS))
        _reward_range(values.get("min_reward", ""), values.get("max_reward", ""))
        values["page"] = whole_number(str(values.get("page", "1")), "page", 1, MAX_PAGE)
        if values.get("text"):
            _searchable(values["text"])
        return cls(**values)

    def where(self, full_text: bool) -> tuple[str, list[Any]]:
        """The WHERE clause (over `episodes e`) and its arguments; `full_text`: the store's text index
        is attached as `idx` (else text is looked for in the task's id and query)."""
        clauses, args = [], []
        for column in ("model", "strategy", "task_set", "task_id", "status"):
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
        for bound, op in (("min_reward", ">="), ("max_reward", "<=")):
            if getattr(self, bound):
                clauses.append(f"e.reward {op} ?")
                args.append(float(getattr(self, bound)))
        if self.text and full_text:
            clauses.append("f.episode_text MATCH ?")  # the index drives the join: see `source`
            args.append(fts_query(self.text))
        elif self.text:
            clause, terms = _in_tasks(self.text)
            clauses.append(clause)
            args += terms
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def source(self, full_text: bool) -> str:
        """The FROM clause of `where`: the episodes, or with words to find, the index's matches joined
        to them (the matches first: they are fewer than the episodes, and come in id order, so the
        newest page of a search stops after 50)."""
        if self.text and full_text:
            return "idx.episode_text f CROSS JOIN episodes e ON e.id = f.rowid"
        return "episodes e"

    def order(self, full_text: bool, reverse: bool = False) -> str:
        """The ORDER BY of the filter's sort (by the index's rowid, the same number, when it drives)."""
        text = order_by(self.sort, reverse)
        return text.replace("e.id", "f.rowid") if self.text and full_text else text

    def params(self, **changes: Any) -> dict[str, str]:
        """The non-default fields as URL parameters, with `changes` applied."""
        merged = {f.name: getattr(self, f.name) for f in fields(self)} | changes
        defaults = EpisodeFilter()
        return {k: str(v) for k, v in merged.items() if v != getattr(defaults, k, None)}


def _in_tasks(text: str) -> tuple[str, list[str]]:
    """The search over the tasks' ids and queries (where there is no index): each term a piece of either."""
    piece = "instr(lower(e.task_id || ' ' || e.query), lower(?)) > 0"
    groups = parse(text)
    either = " OR ".join("(" + " AND ".join([piece] * len(group)) + ")" for group in groups)
    return f"({either})", [term.text for group in groups for term in group]


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        shown = ", ".join(a for a in allowed if a)
        raise ConfigError(f"{name} {value[:40]!r} is not one of {shown}")


def _number(name: str, text: str) -> None:
    try:
        if text and not math.isfinite(float(text)):
            raise ValueError
    except ValueError:
        raise ConfigError(f"{name} must be a finite number, not {text[:40]!r}") from None


def _reward_range(low: str, high: str) -> None:
    """The bounds of a reward range: each a number from 0 to 1, or none; the lower not above the upper
    (a range that nothing can be in is a mistake, not an empty list)."""
    bottom, top = _reward("min_reward", low), _reward("max_reward", high)
    if bottom is not None and top is not None and bottom > top:
        raise ConfigError(f"min_reward {low} is above max_reward {high}: no reward is in that range")


def _reward(name: str, text: str) -> float | None:
    if not text:
        return None
    _number(name, text)
    if not 0 <= float(text) <= 1:
        raise ConfigError(f"{name} must be from 0 to 1, not {text[:40]!r}: every reward is in that range")
    return float(text)


def _searchable(text: str) -> None:
    """A search short enough to read (a pasted traceback is not) and with a word in it."""
    if len(text) > MAX_SEARCH:
        raise ConfigError(f"the search is too long ({len(text):,} characters, at most {MAX_SEARCH:,}): shorten it "
                          "to a few distinctive words, such as the last line of a traceback")
    fts_query(text)  # a search without a word is a bad filter, not an empty one


def order_by(sort: str, reverse: bool = False) -> str:
    return ", ".join(f"{expr} {'ASC' if desc == reverse else 'DESC'}" for expr, desc in SORTS[sort])


@dataclass(frozen=True)
class EpisodeRow(Keyed):
    id: int
    key: EpisodeKey
    status: str
    failure_class: str | None
    reward: float
    n_turns: int
    tokens: int
    cost_usd: float | None
    query: str
    finished_at: float


LIST_COLUMNS = ", ".join(f"e.{name}" for name in EpisodeRow.flat_names()).replace(
    "e.tokens", "e.prompt_tokens + e.completion_tokens")


def _row(row: tuple[Any, ...]) -> EpisodeRow:
    """A row of LIST_COLUMNS."""
    return EpisodeRow(row[0], EpisodeKey(*row[1:6]), *row[6:])


@dataclass(frozen=True)
class EpisodePage:
    rows: list[EpisodeRow]
    total: int  # episodes matching the filter

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


def episode_page(db: sqlite3.Connection, flt: EpisodeFilter, full_text: bool) -> EpisodePage:
    """One page of the filter's episodes. The ids are sorted first and the page's rows read after:
    SQLite's sorter then moves a key and an id per episode, not the whole row (4x faster at 100,000).
    A page past the last is a ConfigError line."""
    where, args = flt.where(full_text)
    source, order = flt.source(full_text), flt.order(full_text)
    (total,) = db.execute(f"SELECT count(*) FROM {source}{where}", args).fetchone()
    found = EpisodePage([], total)
    if flt.page > found.pages:
        raise ConfigError(f"page {flt.page} is past the last page, {found.pages} ({total} episodes match)")
    ids = [row[0] for row in db.execute(f"SELECT e.id FROM {source}{where} ORDER BY {order} LIMIT ? OFFSET ?",
                                        [*args, PAGE_SIZE, (flt.page - 1) * PAGE_SIZE])]
    rows = {row[0]: _row(row) for row in db.execute(
        f"SELECT {LIST_COLUMNS} FROM episodes e WHERE e.id IN ({', '.join('?' * len(ids))})", ids)}
    return EpisodePage([rows[i] for i in ids if i in rows], total)


def all_rows(db: sqlite3.Connection, flt: EpisodeFilter, full_text: bool) -> list[EpisodeRow]:
    """Every episode of the filter, in its order (a download of the list)."""
    where, args = flt.where(full_text)
    return [_row(row) for row in db.execute(
        f"SELECT {LIST_COLUMNS} FROM {flt.source(full_text)}{where} ORDER BY {flt.order(full_text)}", args)]


@dataclass(frozen=True)
class TaskEpisodes:
    query: str
    gold: str
    rows: list[EpisodeRow]


def task_episodes(db: sqlite3.Connection, task_id: str) -> TaskEpisodes | None:
    """Every episode of one task (every model, strategy and epoch, by cell) with the task's query and
    gold; None when the store has none."""
    flt = EpisodeFilter(task_id=task_id, sort="cell")
    rows = all_rows(db, flt, False)
    if not rows:
        return None
    query, gold = db.execute("SELECT query, gold FROM episodes WHERE id = ?", (rows[0].id,)).fetchone()
    return TaskEpisodes(query, gold, rows)


@dataclass(frozen=True)
class EpisodeTexts:
    """Where a search's words may occur in an episode: its task's query, then each turn's
    (idx, output, action, observation) in order; its error, its gold, and the lines of its
    transcript's prompts that no observation holds (as the search index has them)."""

    query: str
    turns: list[tuple[int, str, str | None, str]]
    error: str = ""
    gold: str = ""
    prompts: str = ""

    def without_prompts(self) -> str:
        """Every text but the prompts, lower-cased, in one: where a search's words are looked for first."""
        return "\n".join([self.query, *(v or "" for turn in self.turns for v in turn[1:]), self.error,
                           self.gold]).lower()


def episode_texts(db: sqlite3.Connection, ids: Sequence[int], text: str = "") -> dict[int, EpisodeTexts]:
    """The texts of the episodes `ids`, in that order (the snippets of a page of search results).
    The prompts, which take their transcript's decoding, only of episodes none of whose other texts
    holds a word of the search `text` (with no text: of every one)."""
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    rows = {eid: (query, error, gold) for eid, query, error, gold in db.execute(
        f"SELECT id, coalesce(query, ''), coalesce(error, ''), coalesce(gold, '') FROM episodes WHERE id IN ({marks})",
        list(ids))}
    turns: dict[int, list[tuple[int, str, str | None, str]]] = {i: [] for i in ids}
    for eid, idx, output, action, observation in db.execute(
            f"SELECT episode_id, idx, output, action, observation FROM turns WHERE episode_id IN ({marks}) "
            "ORDER BY episode_id, idx", list(ids)):
        turns[eid].append((idx, output, action, observation))
    texts = {}
    for i in ids:
        query, error, gold = rows.get(i, ("", "", ""))
        texts[i] = EpisodeTexts(query, turns[i], error, gold)
    wanted = words(text)  # lower-cased
    needed = [i for i in ids if not any(w in texts[i].without_prompts() for w in wanted)] if wanted else list(ids)
    prompts = _prompts(db, needed, {i: "\n".join(t[3] or "" for t in turns[i]) for i in needed}) if needed else {}
    return {i: replace(texts[i], prompts=prompts.get(i, "")) for i in ids}


def _prompts(db: sqlite3.Connection, ids: Sequence[int], observations: dict[int, str]) -> dict[int, str]:
    """Each episode's prompt lines as the index has them (`prompts_beside`); a store from before
    transcripts has none, and a transcript this viewer cannot read gives none."""
    if not reader.has(db, "transcripts"):
        return {}
    marks = ", ".join("?" * len(ids))
    found: dict[int, str] = {}
    for eid, format_, body in db.execute(
            f"SELECT episode_id, format, body FROM transcripts WHERE episode_id IN ({marks})", list(ids)):
        try:
            found[eid] = prompts_beside(body, format_, observations.get(eid))
        except UNREADABLE:
            continue
    return found


def neighbours(db: sqlite3.Connection, flt: EpisodeFilter, episode_id: int, full_text: bool) -> tuple[int | None, int | None]:
    """The episodes before and after `episode_id` in the filter's list (None at either end, or when
    it is not in the list): the next row past its key in the list's order, each way."""
    key = SORTS[flt.sort]
    row = db.execute(f"SELECT {', '.join(expr for expr, _ in key)} FROM episodes e WHERE e.id = ?",
                     (episode_id,)).fetchone()
    if row is None:
        return None, None
    where, args = flt.where(full_text)
    found = []
    for reverse in (True, False):
        beyond, more = _past(key, list(row), reverse)
        clause = (where + " AND " if where else " WHERE ") + beyond
        hit = db.execute(f"SELECT e.id FROM {flt.source(full_text)}{clause} ORDER BY {flt.order(full_text, reverse)} "
                         "LIMIT 1", [*args, *more]).fetchone()
        found.append(hit[0] if hit else None)
    return found[0], found[1]


def _past(key: Key, values: list[Any], reverse: bool) -> tuple[str, list[Any]]:
    """The rows after `values` in the order `key` (before it when `reverse`): k1 past v1, or k1 = v1
    and k2 past v2, and so on (a row value comparison cannot mix directions)."""
    options, args = [], []
    for i, (expr, desc) in enumerate(key):
        equal = [f"{e} = ?" for e, _ in key[:i]]
        options.append("(" + " AND ".join([*equal, f"{expr} {'<' if desc != reverse else '>'} ?"]) + ")")
        args += [*values[:i], values[i]]
    return "(" + " OR ".join(options) + ")", args


@dataclass(frozen=True)
class CellProgress:
    """What is stored of one cell so far (the live part of the overview)."""

    model: str
    strategy: str
    task_set: str
    episodes: int
    successes: int
    failures: int  # any error class
    cut: int
    last_finished: float


PROGRESS_SQL = """
SELECT model, strategy, task_set, count(*), sum(success), sum(failure_class IS NOT NULL),
       sum(status = 'budget_exhausted'), max(finished_at)
FROM episodes GROUP BY model, strategy, task_set ORDER BY model, strategy, task_set
"""


def progress(db: sqlite3.Connection) -> list[CellProgress]:
    return [CellProgress(*row) for row in db.execute(PROGRESS_SQL)]
