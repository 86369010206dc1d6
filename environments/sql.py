"""The SQL environment: an agent queries a task's database on the shared MariaDB server.

    async with make_environment("sql", runtime) as env:
        await env.reset(task)                          # a session in the task's db, as `use {db}`
        obs, _, _, info = await env.step("SELECT name FROM singer")   # "[('Joe Sharp',), ...]"
        reward, _ = await env.score()                  # IoU x Kendall tau against the gold result

Observations are what the original's agents saw: `str()` of the list of row tuples,
`"Error executing query: <message>"`, or `"None"` for a statement without a result set. The
reward compares the last action's result with the gold query's result, which is computed once per
task and image on a connection no agent used (see environments/rewards/sql.py for the modes).
"""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiomysql
import pymysql

from environments.base import Environment, EpisodeError
from environments.gold import GoldKey
from environments.kind import KindSpec, TaskFile, register
from environments.mysql8 import VERSION as MYSQL8
from environments.mysql8 import as_mysql8 as mysql8_text
from environments.mysql8 import refused_as_mysql8
from environments.rewards.sql import (
    is_ordered,
    original_rows,
    original_score,
    strict_rows,
    strict_score,
)
from environments.sql_server import (
    GRACE,
    QueryOutcome,
    SqlServer,
    SqlServerError,
    SqlSettings,
    forget_if_dead,
    run_query,
    sql_server,
)

if TYPE_CHECKING:
    from environments.runtime import Runtime
    from tasks import Task

TIMED_OUT = "Query execution was interrupted (max_statement_time exceeded)"  # MariaDB's own wording


# MariaDB 10.11 names the clause of an unknown column by its keyword where MySQL 8, which the
# original ran, said "field list", "where clause", ...; and it names itself in a few messages.
# Agents saw MySQL's wording, so observations use it (the reward never reads error text).
_CLAUSES = {"SELECT": "field list", "WHERE": "where clause", "ON": "on clause", "ORDER BY": "order clause",
            "GROUP BY": "group statement", "HAVING": "having clause", "IN/ALL/ANY": "IN/ALL/ANY subquery"}
_UNKNOWN = re.compile(r"^(Unknown column '.*' in )'(SELECT|WHERE|ON|ORDER BY|GROUP BY|HAVING|IN/ALL/ANY)'$", re.S)
_AMBIGUOUS = re.compile(r"^(Column '.*' in )(SELECT|WHERE|ON|ORDER BY|GROUP BY|HAVING)( is ambiguous)$", re.S)
_SERVER_NAME = re.compile(r"(your|of) MariaDB( server version| doesn't)")


def mysql_wording(message: str) -> str:
    """A MariaDB error message in the words MySQL 8 used for the same error."""
    message = _UNKNOWN.sub(lambda m: f"{m.group(1)}'{_CLAUSES[m.group(2)]}'", message)
    message = _AMBIGUOUS.sub(lambda m: f"{m.group(1)}{_CLAUSES[m.group(2)]}{m.group(3)}", message)
    return _SERVER_NAME.sub(r"\1 MySQL\2", message)


def observation(outcome: QueryOutcome, shown_rows: int) -> str:
    """The text the agent sees, as the original rendered it (`str(observation)`)."""
    if outcome.error is not None:
        return f"Error executing query: {mysql_wording(outcome.error)}"
    if outcome.rows is None:
        return "None"
    text = str(outcome.rows[:shown_rows])
    if outcome.cut:
        shown = min(shown_rows, len(outcome.rows))
        return f"{text}\n(output cut: more than {len(outcome.rows)} rows; the first {shown} shown)"
    if len(outcome.rows) > shown_rows:
        return f"{text}\n(output cut: {len(outcome.rows)} rows; the first {shown_rows} shown)"
    return text


async def as_mysql8(run: Callable[[str], Awaitable[QueryOutcome]], query: str, on: bool = True) -> QueryOutcome:
    """`run` the query as MySQL 8 would have answered it (environments/mysql8.py); one that
    MariaDB refuses once rewritten runs as written, for its own error. `on` False: as written."""
    rewritten = mysql8_text(query) if on else query
    outcome = await run(rewritten)
    error = outcome.error
    if rewritten != query and error is not None and error != TIMED_OUT and not refused_as_mysql8(error):
        return await run(query)
    return outcome


class SqlSession:
    """One episode's connection, holding one of the server's connection slots while open."""

    def __init__(self, server: SqlServer, db: str) -> None:
        self.server, self.db = server, db
        self._connection: aiomysql.Connection | None = None

    async def open(self) -> None:
        await self.server.sessions.acquire()
        try:
            self._connection = await self.server.connect(self.db)
        except BaseException:
            self.server.sessions.release()
            raise

    async def run(self, action: str) -> QueryOutcome:
        assert self._connection is not None
        limits = self.server.settings
        try:
            # The server's max_statement_time normally ends a long query; this deadline is for an
            # agent that raised it (SET max_statement_time is a session variable anyone may set).
            async with asyncio.timeout(limits.statement_timeout + GRACE):
                return await run_query(self._connection, action, limits.max_rows)
        except TimeoutError:
            await self._replace()
            return QueryOutcome(error=TIMED_OUT)
        except pymysql.err.MySQLError as exc:  # the connection was lost: say so, and open another
            await self._replace()
            return QueryOutcome(error=str(exc.args[1]) if len(exc.args) > 1 else str(exc))

    async def _replace(self) -> None:
        """Drop the session (and its query, on the server) and open a fresh one in the same db.
        Temporary tables and session variables are lost, as they would be on a reconnect."""
        assert self._connection is not None
        thread_id = self._connection.thread_id()
        self._connection.close()
        self._connection = None
        await self.server.kill(thread_id)
        self._connection = await self.server.connect(self.db)

    def close(self) -> None:
        """Synchronous, so a cancellation can't stop it half-way."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
            self.server.sessions.release()


@dataclass(frozen=True)
class SqlGold:
    """The gold query's result as the reward mode compares it: its rows (None when it failed), its
    error, whether the output was cut at the row cap, and whether it is ordered (ORDER BY)."""

    rows: list[Any] | None
    error: str | None
    cut: bool
    ordered: bool

    @classmethod
    def of(cls, value: dict[str, Any]) -> SqlGold:
        """From the gold cache's JSON form."""
        return cls(value["rows"], value["error"], bool(value["cut"]), bool(value["ordered"]))


class SqlEnv(Environment):
    kind = "sql"

    def __init__(self, runtime: Runtime, settings: SqlSettings | None = None) -> None:
        super().__init__(runtime)
        self.settings = settings or SqlSettings()
        self._session: SqlSession | None = None
        self._server: SqlServer | None = None
        self._last: QueryOutcome = QueryOutcome()  # the last action's result; the reset's `USE` gave none

    async def _start(self, task: Task) -> None:
        db = task.meta.get("db")
        if not db:
            raise EpisodeError(f"SQL task {task.id} names no database")
        # The reward's Kendall tau needs scipy.stats, whose import takes about a second: off the loop
        if "scipy.stats" not in sys.modules:
            await asyncio.to_thread(importlib.import_module, "scipy.stats")
        self._server = await sql_server(self.runtime, task.image, self.settings)
        session = SqlSession(self._server, str(db))
        async with self._dead_server_forgotten():
            await session.open()
        self._session, self._last = session, QueryOutcome()

    @asynccontextmanager
    async def _dead_server_forgotten(self) -> AsyncIterator[None]:
        """A SqlServerError raised through: the server's container is checked, and if it died,
        the runtime forgets the server, so that the episode's re-run starts a new one."""
        try:
            yield
        except SqlServerError:
            if self._server is not None:
                await forget_if_dead(self.runtime, self._server)
            raise

    def observation_rows(self) -> list[Any] | None:
        return self._last.rows if self._last.ok else None

    async def _execute(self, action: str) -> tuple[str, bool]:
        assert self._session is not None and self._server is not None
        async with self._dead_server_forgotten():
            self._last = await as_mysql8(self._session.run, action, self.settings.mysql8)
        return observation(self._last, self._server.settings.shown_rows), self._last.ok

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        async with self._dead_server_forgotten():
            return await self._score()

    async def _score(self) -> tuple[float, dict[str, Any]]:
        assert self.task is not None
        gold = await self._gold(self.task)
        if gold.ordered:
            # MariaDB breaks ties in ORDER BY differently from one session to the next (even the
            # LIMIT 1 row of `ORDER BY count(*)`) unless its temporary tables are on disk, as they
            # are answering as MySQL 8 (environments/mysql8.py), so a cached result would often
            # disagree with the agent's run of the very same query. The original ran the gold in the agent's
            # session, right after the action: do that for ordered golds.
            assert self._session is not None
            gold = SqlGold.of(self._as_gold(await as_mysql8(self._session.run, self.task.gold_text,
                                                            self.settings.mysql8), True))
        agent = self._last.rows if self._last.ok else None
        info: dict[str, Any] = {"corrupt_gold": gold.error is not None}
        if self.runtime.reward_mode == "strict":
            if gold.error is not None:
                return 0.0, info  # a gold that fails proves nothing
            agent_rows = strict_rows(agent) if agent is not None else None
            score = strict_score(agent_rows, gold.rows, ordered=gold.ordered)
        else:
            # The original compared with an empty gold when the gold query failed.
            gold_rows = gold.rows if gold.error is None else []
            score = original_score(original_rows(agent) if agent is not None else None, gold_rows)
        return score.reward, info | {"parts": score.parts() | {"ordered": gold.ordered}}

    def breakdown(self) -> dict[str, Any] | None:
        """IoU of the rows, Kendall's tau of their order where it applied, the row counts; whether the
        gold failed (the original then compared with no rows)."""
        parts = self.score_info.get("parts")
        if not isinstance(parts, dict):
            return None
        return parts | ({"gold_failed": True} if self.score_info.get("corrupt_gold") else {})

    async def _gold(self, task: Task) -> SqlGold:
        """The gold result as the reward mode compares it, computed once per image and task."""
        server, mode = self._server, self.runtime.reward_mode
        assert server is not None

        async def read(query: str) -> QueryOutcome:
            return await server.read(str(task.meta["db"]), query)

        async def compute() -> dict[str, Any]:
            outcome = await as_mysql8(read, task.gold_text, self.settings.mysql8)
            return self._as_gold(outcome, is_ordered(task.gold_text))

        engine = MYSQL8 if self.settings.mysql8 else "mariadb"
        digest = await self.runtime.image_digest(task.image)
        return SqlGold.of(await self.runtime.gold.get(GoldKey(digest, task.fingerprint, f"{mode}-{engine}"), compute))

    def _as_gold(self, outcome: QueryOutcome, ordered: bool) -> dict[str, Any]:
        """A gold outcome as JSON (the gold cache may store it): rows as the reward mode compares them."""
        if outcome.rows is None:
            return {"rows": [] if outcome.ok else None, "error": outcome.error, "cut": False, "ordered": ordered}
        rows = strict_rows(outcome.rows) if self.runtime.reward_mode == "strict" else original_rows(outcome.rows)
        return {"rows": rows, "error": None, "cut": outcome.cut, "ordered": ordered}

    async def _stop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()


SPEC = register(KindSpec(
    name="sql", environment=SqlEnv, language="SQL", setting="MySQL Database", fence="sql",
    fence_tags=frozenset({"sql", "mysql"}), export_name="ic_sql", datasets=("spider",), starter="starter-sql",
    paper_parser="sql", react_code="up_to_semicolon", paper_fenced=True, tool="sql", tool_argument="query",
    tool_description="Run a SQL query on the MySQL database and return its result.",
    task_file=TaskFile("dump", required=True, purpose="the .sql file its databases are loaded from")))
