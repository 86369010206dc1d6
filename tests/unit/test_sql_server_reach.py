"""The SQL server counts as started only once this process reaches it over the network: MariaDB
answering inside its container is not enough (a fresh container's address may not resolve at once
on a busy engine). A server that never answers is one error line at the deadline, naming it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest

from environments.sql_server import SqlServerError, _wait_reachable

if TYPE_CHECKING:
    from foundation.pool import Sandbox

SANDBOX = cast("Sandbox", SimpleNamespace(container_id="c0ffee", image="intercode/sql-starter"))


async def test_connections_that_are_lost_at_once_are_tried_again_until_the_deadline() -> None:
    accepted = 0

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        writer.close()  # before the server's greeting: the client sees the connection lost

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        with pytest.raises(SqlServerError) as raised:
            await _wait_reachable(SANDBOX, "127.0.0.1", "pw", 1.0, port=port)
    assert accepted >= 2, "a lost connection must be tried again"
    message = str(raised.value)
    assert "could not be reached from here within 1 s" in message
    assert "container=c0ffee" in message


async def test_nothing_listening_is_tried_again_then_one_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()  # the port is free now: connections are refused
    with pytest.raises(SqlServerError, match="could not be reached from here within 0 s"):
        await _wait_reachable(SANDBOX, "127.0.0.1", "pw", 0.3, port=port)
