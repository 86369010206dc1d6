"""The SQL environment on the starter database, against a real MariaDB container."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import aiodocker
import pytest

from environments import make_environment
from environments.base import EpisodeError
from environments.runtime import Runtime
from environments.sql import TIMED_OUT, SqlEnv
from environments.sql_server import MULTI_STATEMENTS, SqlSettings
from tasks import Task, load_tasks
from tests.conftest import clean_runtime

pytestmark = pytest.mark.docker
STARTER = "intercode/sql-starter"


def sql_runtime(docker: aiodocker.Docker, **kwargs: object):
    """A runtime whose containers are all gone afterwards."""
    return clean_runtime(docker, STARTER, **kwargs)


@pytest.fixture(scope="module")
async def runtime(docker: aiodocker.Docker) -> AsyncIterator[Runtime]:
    async with sql_runtime(docker) as runtime:
        yield runtime


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks("starter-sql")


async def test_starter_golds_score_one(runtime: Runtime, tasks: list[Task]) -> None:
    async with make_environment("sql", runtime) as env:
        for task in tasks:
            assert await env.reset(task) == task.query
            observation, reward, done, info = await env.step(task.gold_text)
            assert (reward, done, info["action_executed"]) == (0.0, False, True)
            assert observation.startswith("[(")
            assert (await env.score())[0] == 1.0
            _, reward, done, _ = await env.step("submit")
            assert (reward, done) == (1.0, True)
            with pytest.raises(EpisodeError):
                await env.step("SELECT 1")


async def test_observations_render_like_mysql_connector(runtime: Runtime, tasks: list[Task]) -> None:
    async with make_environment("sql", runtime) as env:
        await env.reset(tasks[0])
        step = await env.step("SELECT title, price, published FROM books WHERE book_id = 7")
        assert step.observation == "[('Maple Code', Decimal('34.95'), 2019)]"
        step = await env.step("SELECT sale_date, quantity * 1.0, 1e0 / 4 FROM sales WHERE sale_id = 1")
        assert step.observation == "[(datetime.date(2024, 3, 1), Decimal('3.0'), 0.25)]"
        step = await env.step("SELECT NULL, SUM(quantity) FROM sales WHERE sale_id < 0")
        assert step.observation == "[(None, None)]"
        assert (await env.step("SELECT name FROM authors WHERE 1 = 0")).observation == "[]"


async def test_errors_and_statements_without_rows(runtime: Runtime, tasks: list[Task]) -> None:
    async with make_environment("sql", runtime) as env:
        await env.reset(tasks[0])
        step = await env.step("SELECT * FROM nowhere")
        assert step.observation == "Error executing query: Table 'bookshop.nowhere' doesn't exist"
        assert step.info["action_executed"] is False
        assert (await env.score())[0] == 0.0
        step = await env.step("SET @x = 1")
        assert (step.observation, step.info["action_executed"]) == ("None", True)
        assert (await env.score())[0] == 0.0  # no result set: not a list, as in the original
        step = await env.step("SELECT 1; SELECT 2")
        assert step.observation == f"Error executing query: {MULTI_STATEMENTS}"


async def test_skip_ends_with_zero(runtime: Runtime, tasks: list[Task]) -> None:
    async with make_environment("sql", runtime) as env:
        await env.reset(tasks[1])
        await env.step(tasks[1].gold_text)
        assert tuple(await env.step("skip"))[1:3] == (0.0, True)


async def test_score_before_any_action_is_zero(runtime: Runtime, tasks: list[Task]) -> None:
    async with make_environment("sql", runtime) as env:
        await env.reset(tasks[2])
        assert (await env.score())[0] == 0.0  # the reset's `USE` left no result


async def test_row_cap_cuts_the_observation_and_says_so(docker: aiodocker.Docker, tasks: list[Task]) -> None:
    settings = SqlSettings(max_rows=10, shown_rows=4)
    async with sql_runtime(docker) as runtime:
        env = SqlEnv(runtime, settings)
        async with env:
            await env.reset(tasks[0])
            step = await env.step("SELECT sale_id FROM sales ORDER BY sale_id")
            assert step.observation.startswith("[(1,), (2,), (3,), (4,)]\n(output cut: more than 10 rows")
            step = await env.step("SELECT sale_id FROM sales WHERE sale_id <= 6")
            assert step.observation == "[(1,), (2,), (3,), (4,)]\n(output cut: 6 rows; the first 4 shown)"
            assert (await env.step("SELECT 1")).observation == "[(1,)]"  # the session is still usable


@pytest.mark.slow
async def test_statement_timeout_even_when_the_agent_lifts_it(docker: aiodocker.Docker, tasks: list[Task]) -> None:
    async with sql_runtime(docker) as runtime:
        # 2 s, not less: the test's last statement must fit in it while the other tests load the machine.
        env = SqlEnv(runtime, SqlSettings(statement_timeout=2.0))
        async with env:
            await env.reset(tasks[0])
            start = time.monotonic()
            step = await env.step("SELECT SLEEP(30)")
            assert step.observation == f"Error executing query: {TIMED_OUT}"
            assert time.monotonic() - start < 10  # the server's limit, far from the statement's 30 s
            # The server's limit is a session variable: an agent can lift it. The client's own
            # deadline then ends the session, and a fresh one continues in the same database.
            await env.step("SET SESSION max_statement_time = 0")
            start = time.monotonic()
            step = await env.step("SELECT SLEEP(30)")
            assert step.observation == f"Error executing query: {TIMED_OUT}"
            assert time.monotonic() - start < 20  # the client's deadline (the limit and a grace of 5 s)
            assert (await env.step("SELECT COUNT(*) FROM books")).observation == "[(16,)]"
