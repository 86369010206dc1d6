"""Episodes share one MariaDB server: one agent's writes must not reach another's data."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiodocker
import pytest

from environments import make_environment
from environments.runtime import Runtime
from environments.sql_server import sql_server
from tasks import Task, load_tasks
from tests.docker.test_sql_env import STARTER, sql_runtime

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
async def runtime(docker: aiodocker.Docker) -> AsyncIterator[Runtime]:
    async with sql_runtime(docker) as runtime:
        yield runtime


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks("starter-sql")


async def test_writes_fail_and_never_reach_a_concurrent_episode(runtime: Runtime, tasks: list[Task]) -> None:
    vandal_done = asyncio.Event()
    task = tasks[0]  # a join of books and authors

    async def vandal() -> list[str]:
        async with make_environment("sql", runtime) as env:
            await env.reset(task)
            observations = []
            for action in ("DROP TABLE books", "UPDATE authors SET country = 'Canada'", "DELETE FROM sales",
                           "TRUNCATE TABLE authors", "INSERT INTO authors VALUES (99, 'X', 'Canada', 2000)",
                           "ALTER TABLE books ADD COLUMN x INT", "CREATE TABLE extra (id INT)"):
                observations.append((await env.step(action)).observation)
            # Scratch work in temporary tables still works, and stays in this session, even one
            # that shadows a real table.
            assert (await env.step("CREATE TEMPORARY TABLE books AS SELECT * FROM authors")).observation == "None"
            assert (await env.step("DELETE FROM books")).observation == "None"
            assert (await env.step("SELECT COUNT(*) FROM books")).observation == "[(0,)]"
            vandal_done.set()
            await asyncio.sleep(0.2)  # keep the session (and its temporary table) open meanwhile
            return observations

    async def bystander() -> float:
        async with make_environment("sql", runtime) as env:
            await env.reset(task)
            await vandal_done.wait()
            assert (await env.step("SELECT COUNT(*) FROM books")).observation == "[(16,)]"
            assert (await env.step("SELECT COUNT(*) FROM sales")).observation == "[(30,)]"
            await env.step(task.gold_text)
            return (await env.score())[0]

    async with asyncio.TaskGroup() as group:
        vandalism = group.create_task(vandal())
        reward = group.create_task(bystander())
    assert reward.result() == 1.0
    for observation in vandalism.result():
        assert observation.startswith("Error executing query: ")
        assert "command denied to user 'icreader'" in observation


async def test_twenty_episodes_at_once(runtime: Runtime, tasks: list[Task]) -> None:
    async def episode(n: int) -> float:
        task = tasks[n % len(tasks)]
        async with make_environment("sql", runtime) as env:
            await env.reset(task)
            await env.step("SELECT COUNT(*) FROM books")
            await env.step(task.gold_text)
            _, reward, done, _ = await env.step("submit")
            assert done
            return reward

    async with asyncio.TaskGroup() as group:
        episodes = [group.create_task(episode(n)) for n in range(20)]
    assert [e.result() for e in episodes] == [1.0] * 20
    server = await sql_server(runtime, STARTER)
    assert server.sessions._value == server.settings.connections  # noqa: SLF001 — every slot came back
    counts = runtime.pool.stats()[STARTER]
    assert (counts["leased"], sum(counts.values())) == (1, 1)  # one server container, shared by all
