"""A shared SQL server whose container dies is started again: the episode that meets it fails as
infrastructure (and is re-run by a sweep), the next one gets a new server."""

from __future__ import annotations

import pytest

from environments import make_environment
from environments.sql_server import SqlServerError, sql_server
from foundation.errors import SandboxError
from tasks import load_tasks
from tests.conftest import clean_runtime

pytestmark = [pytest.mark.docker, pytest.mark.slow]


async def solve(runtime, task) -> float:
    async with make_environment("sql", runtime) as env:
        await env.reset(task)
        await env.step(task.gold_text)
        return (await env.score())[0]


async def test_a_sql_server_whose_container_died_is_started_again(docker):
    task = load_tasks("starter-sql")[0]
    async with clean_runtime(docker, task.image) as runtime:
        assert await solve(runtime, task) == 1.0
        server = await sql_server(runtime, task.image)
        await docker.containers.container(server.container_id).kill()
        with pytest.raises(SandboxError):  # infrastructure: a sweep runs the episode again
            await solve(runtime, task)
        assert await solve(runtime, task) == 1.0  # the re-run
        assert (await sql_server(runtime, task.image)).container_id != server.container_id


async def test_a_server_stopped_under_an_episode_is_the_infrastructures(docker):
    """An episode still holding the server that its runtime stopped (the engine went away and came
    back) gets a SqlServerError, which a sweep runs again, not aiomysql's RuntimeError about its
    closed pool, which was stored as the task's error."""
    task = load_tasks("starter-sql")[0]
    async with clean_runtime(docker, task.image) as runtime:
        server = await sql_server(runtime, task.image)
        await runtime.drop_service(f"sql:{task.image}", server)
        with pytest.raises(SqlServerError, match="was stopped"):
            await server.read(task.meta.get("db") or "information_schema", "SELECT 1")
