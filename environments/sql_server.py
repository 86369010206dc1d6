"""The shared MariaDB server: one container per image for the whole runtime, reached over the bridge.

    server = await sql_server(runtime, "intercode/sql")       # started once, stopped with the runtime
    connection = await server.connect("poker_player")          # an episode's own session
    outcome = await run_query(connection, "SELECT 1", limits)  # rows or an error, within the limits

Episodes share the server, so they connect as a read-only account (`icreader`: SELECT, SHOW VIEW,
CREATE TEMPORARY TABLES and EXECUTE on the benchmark's databases only): an agent's DROP TABLE fails
with MariaDB's own permission error instead of changing what the other episodes see. Temporary
tables belong to one session, so scratch work still works. EXECUTE is there for the error messages
only (there are no routines): without it, a call of an unknown function says "execute command
denied" where the original's administrator account said "FUNCTION x does not exist".
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiodocker
import aiomysql
import pymysql
from pydantic import BaseModel, ConfigDict, Field

from environments.mysql8 import SESSION as MYSQL8_SESSION
from foundation.engine import engine_call
from foundation.errors import SandboxError

if TYPE_CHECKING:
    from environments.runtime import Runtime
    from foundation.pool import Sandbox

PORT = 3306
READER = "icreader"
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")
MULTI_STATEMENTS = "Use multi=True when executing multiple statements"  # mysql.connector's wording
GRACE = 5.0  # seconds past the statement timeout before the client gives up on the server
LOST = (2003, 2006, 2013, 2055)  # can't connect, gone away, lost during a query, lost reading
NO_SUCH_THREAD = 1094  # server gone, lost connection: the session must be opened again


class SqlSettings(BaseModel):
    """Limits of the SQL environment. The original had none: a query could run (and print) forever."""

    model_config = ConfigDict(extra="forbid")

    statement_timeout: float = Field(10.0, gt=0, description="Seconds a statement may run (max_statement_time).")
    max_rows: int = Field(10_000, gt=0, description="Rows read from one result; the reward sees these.")
    shown_rows: int = Field(1000, gt=0, description="Rows put in the observation; a note says how many more.")
    ready_timeout: float = Field(120.0, gt=0, description="Seconds to wait for the server to accept connections.")
    connections: int = Field(1000, gt=0, description="Episode connections at once (the server allows 1100).")
    gold_connections: int = Field(8, gt=0, description="Connections for gold queries, apart from the episodes'.")
    mysql8: bool = Field(True, description="Answer as MySQL 8, the original's server, did where MariaDB allows it "
                                           "(environments/mysql8.py); False: as MariaDB does.")


class SqlServerError(SandboxError):
    """The SQL server did not start, or can't be reached any more."""


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What one statement gave: rows (None for a statement without a result set) or an error."""

    rows: list[tuple[Any, ...]] | None = None
    error: str | None = None
    cut: bool = False  # more rows than max_rows: the rest was not read

    @property
    def ok(self) -> bool:
        return self.error is None


class QuietCursor(aiomysql.SSCursor):  # type: ignore[misc]  # aiomysql has no types
    """Unbuffered (rows are read as far as the cap, not all into memory), and without aiomysql's
    SHOW WARNINGS round trip that turns server notes into Python warnings; mysql.connector, which
    the original used, left warnings alone by default too."""

    async def _show_warnings(self, conn: Any) -> None:
        return None


async def run_query(connection: aiomysql.Connection, query: str, max_rows: int) -> QueryOutcome:
    """Run one action and read at most `max_rows` rows. MySQL errors become the outcome's error,
    with the message only (mysql.connector's `err.msg`); a lost connection raises."""
    cursor = await connection.cursor(QuietCursor)
    try:
        await cursor.execute(query)
        rows: list[tuple[Any, ...]] | None = None
        cut = False
        if cursor.description is not None:
            rows = list(await cursor.fetchmany(max_rows + 1))
            cut = len(rows) > max_rows
            del rows[max_rows:]
            if cut:
                await _drain(cursor)
        if await _more_results(cursor):
            return QueryOutcome(error=MULTI_STATEMENTS)
        return QueryOutcome(rows=rows, cut=cut)
    except pymysql.err.MySQLError as exc:
        if _lost(exc):
            raise
        return QueryOutcome(error=_message(exc))
    finally:
        await _close_quietly(cursor)


async def _drain(cursor: aiomysql.SSCursor) -> None:
    """Read what is left of a cut result. The server is held back by our reading, so it is still
    within max_statement_time, which ends it if it is huge (that error is the expected end)."""
    try:
        while await cursor.fetchmany(5000):
            pass
    except pymysql.err.OperationalError as exc:
        if _lost(exc):
            raise


async def _more_results(cursor: aiomysql.SSCursor) -> bool:
    """Several statements in one action: run through them all, as the server executes them anyway."""
    more = False
    while await cursor.nextset():
        more = True
        while await cursor.fetchmany(5000):
            pass
    return more


async def _close_quietly(cursor: aiomysql.SSCursor) -> None:
    try:
        await cursor.close()
    except pymysql.err.MySQLError:
        pass  # the outcome was already decided; a later statement's error has nowhere to go


def _lost(exc: pymysql.err.MySQLError) -> bool:
    return isinstance(exc, pymysql.err.InterfaceError) or (bool(exc.args) and exc.args[0] in LOST)


def _message(exc: pymysql.err.MySQLError) -> str:
    return str(exc.args[1]) if len(exc.args) > 1 else str(exc)


# ------------------------------------------------------------------ the server

class SqlServer:
    """A started server. `connect` opens an episode session; `read` runs a query on a pristine
    connection (for gold results), apart from the episodes' connection budget."""

    def __init__(self, sandbox: Sandbox, host: str, password: str, settings: SqlSettings) -> None:
        self.sandbox = sandbox  # the lease of its container, held for the runtime's life
        self.image, self.host, self.container_id = sandbox.image, host, sandbox.container_id
        self.settings = settings
        self._password = password
        self.sessions = asyncio.Semaphore(settings.connections)  # the server's connection slots
        self._gold: aiomysql.Pool | None = None
        self._stopped = False  # its runtime stopped it (the engine went away, or the run ends)

    def _session_settings(self) -> str:
        """What every session sets first: the statement timeout, and, answering as MySQL 8, its
        ties (environments/mysql8.py)."""
        settings = [f"max_statement_time = {self.settings.statement_timeout:g}"]
        if self.settings.mysql8:
            settings.append(MYSQL8_SESSION)
        return f"SET SESSION {', '.join(settings)}"

    async def connect(self, db: str | None = None) -> aiomysql.Connection:
        """A reader session in `db` (selected with `USE`, as the original's reset did)."""
        try:
            connection = await aiomysql.connect(host=self.host, port=PORT, user=READER, password=self._password,
                                                charset="utf8mb4", autocommit=True, connect_timeout=10)
        except (pymysql.err.MySQLError, OSError) as exc:
            raise SqlServerError(f"can't connect to the SQL server at {self.host}: {exc}",
                                 container_id=self.container_id, image=self.image) from exc
        try:
            async with connection.cursor() as cursor:
                await cursor.execute(self._session_settings())
                if db:
                    await cursor.execute(f"USE `{db}`")
        except (pymysql.err.MySQLError, OSError) as exc:
            connection.close()
            if isinstance(exc, pymysql.err.MySQLError) and not _lost(exc):
                raise  # a real answer of the server (an unknown database): the caller's to report
            raise SqlServerError(f"the SQL server at {self.host} stopped answering: {exc}",
                                 container_id=self.container_id, image=self.image) from exc
        except BaseException:
            connection.close()
            raise
        return connection

    async def read(self, db: str, query: str) -> QueryOutcome:
        """Run `query` in `db` on a pooled reader connection that no agent ever used. A server
        that stopped answering is a SqlServerError (infrastructure), not the gold's outcome."""
        try:
            async with self._reader() as connection:
                try:
                    async with asyncio.timeout(self.settings.statement_timeout + GRACE):
                        async with connection.cursor() as cursor:
                            await cursor.execute(f"USE `{db}`")
                        return await run_query(connection, query, self.settings.max_rows)
                except BaseException:
                    connection.close()  # mid-result or timed out: the pool must not hand it out again
                    raise
        except (pymysql.err.MySQLError, OSError) as exc:
            if isinstance(exc, pymysql.err.MySQLError) and not _lost(exc):
                raise
            raise SqlServerError(f"the SQL server at {self.host} stopped answering: {exc}",
                                 container_id=self.container_id, image=self.image) from exc

    async def kill(self, thread_id: int) -> None:
        """End a session whose query outran the statement timeout (the agent may have raised it)."""
        try:
            async with self._reader() as connection, connection.cursor() as cursor:
                await cursor.execute(f"KILL {int(thread_id)}")
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] == NO_SUCH_THREAD:
                return  # it ended by itself meanwhile
            raise SqlServerError(f"the SQL server at {self.host} stopped answering: {exc}",
                                 container_id=self.container_id, image=self.image) from exc
        except OSError as exc:
            raise SqlServerError(f"the SQL server at {self.host} stopped answering: {exc}",
                                 container_id=self.container_id, image=self.image) from exc

    @asynccontextmanager
    async def _gold_pool(self) -> AsyncIterator[None]:
        self._gold = await aiomysql.create_pool(
            minsize=0, maxsize=self.settings.gold_connections, host=self.host, port=PORT, user=READER,
            password=self._password, charset="utf8mb4", autocommit=True, connect_timeout=10,
            init_command=self._session_settings())
        try:
            yield
        finally:
            self._stopped = True
            self._gold.close()
            await self._gold.wait_closed()

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[Any]:
        """A pooled reader connection. A server its runtime has stopped meanwhile (the engine went
        away and came back, and episodes still held the old server) is a SqlServerError, the
        infrastructure's, where aiomysql raises a RuntimeError about its closed pool."""
        assert self._gold is not None
        stopped = SqlServerError(f"the SQL server at {self.host} was stopped (its engine went away); run again",
                                 container_id=self.container_id, image=self.image)
        if self._stopped:
            raise stopped
        async with AsyncExitStack() as stack:
            try:
                connection = await stack.enter_async_context(self._gold.acquire())
            except RuntimeError as exc:
                if self._stopped:
                    raise stopped from exc
                raise
            yield connection


async def sql_server(runtime: Runtime, image: str, settings: SqlSettings | None = None) -> SqlServer:
    """The runtime's server for `image`, started on first use."""
    async def start(stack: AsyncExitStack) -> SqlServer:
        return await start_server(runtime, image, stack, settings or SqlSettings())
    return await runtime.service(f"sql:{image}", start)


async def forget_if_dead(runtime: Runtime, server: SqlServer) -> None:
    """After a SqlServerError: if the server's container is no longer running (it was killed, or
    ran out of memory), the runtime forgets the server and the next episode starts another. A
    server that is only slow stays; an engine that went away is the engine watch's to handle."""
    try:
        async with engine_call("inspect the SQL container", container_id=server.container_id, image=server.image):
            info = await runtime.engine_client("the SQL server").containers.container(server.container_id).show()
        running = bool((info.get("State") or {}).get("Running"))
    except aiodocker.DockerError:  # 404: it is gone
        running = False
    except SandboxError:
        return
    if not running:
        server.sandbox.mark_broken("the SQL server's container stopped")
        await runtime.drop_service(f"sql:{server.image}", server)


async def start_server(runtime: Runtime, image: str, stack: AsyncExitStack, settings: SqlSettings) -> SqlServer:
    """Lease the image's container for the runtime's lifetime, wait until MariaDB answers, and
    create the read-only account."""
    runtime.configure_service(image)
    sandbox = await stack.enter_async_context(runtime.pool.lease(image))
    host = await _address(runtime.engine_client("the SQL environment"), sandbox)
    await _wait_ready(sandbox, settings.ready_timeout)
    password = secrets.token_hex(16)
    await _create_reader(sandbox, password)
    await _wait_reachable(sandbox, host, password, settings.ready_timeout)
    server = SqlServer(sandbox, host, password, settings)
    await stack.enter_async_context(server._gold_pool())  # noqa: SLF001 — the server's own lifecycle
    return server


async def _address(docker: aiodocker.Docker, sandbox: Sandbox) -> str:
    async with engine_call("inspect the SQL container", container_id=sandbox.container_id, image=sandbox.image):
        info = await docker.containers.container(sandbox.container_id).show()
    networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
    for network in networks.values():
        if network.get("IPAddress"):
            return str(network["IPAddress"])
    raise SqlServerError("the SQL container has no network address (is its network off?)",
                         container_id=sandbox.container_id, image=sandbox.image)


async def _wait_ready(sandbox: Sandbox, timeout: float) -> None:
    """Poll `mariadb-admin ping` inside the container: the pool hands the container over as soon as
    its driver answers, which is before MariaDB has finished starting."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await sandbox.exec(["mariadb-admin", "--silent", "ping"], timeout=10)
        if result.ok:
            return
        if loop.time() > deadline:
            raise SqlServerError(f"MariaDB did not answer within {timeout:.0f} s: {result.output.strip()}",
                                 container_id=sandbox.container_id, image=sandbox.image)
        await asyncio.sleep(0.2)  # between two readiness checks, not instead of one


async def _wait_reachable(sandbox: Sandbox, host: str, password: str, timeout: float, port: int = PORT) -> None:
    """Connect from here over the bridge until the server answers: MariaDB answering inside its
    container is not yet the host reaching it (a fresh container's address may not resolve at once
    while the engine is busy making others), and the first episode must not pay for that."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            connection = await aiomysql.connect(host=host, port=port, user=READER, password=password,
                                                connect_timeout=10)
        except (pymysql.err.MySQLError, OSError) as exc:
            if isinstance(exc, pymysql.err.MySQLError) and not _lost(exc):
                raise SqlServerError(f"the SQL server at {host} refused the reader: {_message(exc)}",
                                     container_id=sandbox.container_id, image=sandbox.image) from exc
            if loop.time() > deadline:
                raise SqlServerError(f"the SQL server at {host} could not be reached from here within "
                                     f"{timeout:.0f} s: {exc}",
                                     container_id=sandbox.container_id, image=sandbox.image) from exc
            await asyncio.sleep(0.2)  # between two attempts, not instead of one
            continue
        connection.close()
        return


async def _create_reader(sandbox: Sandbox, password: str) -> None:
    """The episodes' account: read-only on the benchmark's databases, with a password made now."""
    listed = await _admin(sandbox, "SELECT schema_name FROM information_schema.schemata", "list the databases")
    databases = [name for name in listed.split() if name not in SYSTEM_SCHEMAS]
    statements = [f"CREATE OR REPLACE USER '{READER}'@'%' IDENTIFIED BY '{password}'"]
    statements += [f"GRANT SELECT, SHOW VIEW, CREATE TEMPORARY TABLES, EXECUTE ON `{db}`.* TO '{READER}'@'%'"
                   for db in databases]
    await _admin(sandbox, ";\n".join(statements), "create the read-only account")


async def _admin(sandbox: Sandbox, sql: str, what: str) -> str:
    """Run SQL as MariaDB's root inside the container (socket authentication: no password)."""
    result = await sandbox.exec(["mariadb", "--batch", "--skip-column-names", "-e", sql], timeout=60)
    if not result.ok:
        raise SqlServerError(f"could not {what}: {result.output.strip()}",
                             container_id=sandbox.container_id, image=sandbox.image)
    return result.output
