"""`view` over HTTP: the rough edges of issue 37. A search longer than a request line is one line of
the app's own; the cell filters are the store's values, an unknown parameter and an upside-down
reward range are one line; a pair of two tasks is refused; small words (a plural of one, a heading
of empty filters, the cost of calls without a price) and the icon a browser asks for."""

from __future__ import annotations

import html
import logging
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from orchestrator.view.security import HEADERS
from tests.stores import dialogue_record, transcript_store
from tests.unit.test_view import column, get, tasks, viewer

MODEL = "openai/local-sim"
TRACEBACK = "".join(f'  File "/work/app/module_{i}.py", line {i}, in handler_{i}\n    raise ValueError(x)\n'
                    for i in range(120)) + "ValueError: the last line"  # about 9,000 characters


def stores(root: Path) -> tuple[Path, Path]:
    """Two nights of one sweep: tasks 0-3 of two strategies, of two turns but task 3's one; episode 2
    of the first (task 1) made its one call to a model without a known price."""
    made = []
    for night in ("night-1", "night-2"):
        records = [dialogue_record(t, [0.0, 1.0 if t % 2 else 0.5][t // 3:], model=MODEL,
                                   strategy=("try_again", "react")[t % 2], status="solved" if t % 2 else "max_turns")
                   for t in range(4)]
        if night == "night-1":
            records[1] = replace(records[1], calls=[replace(c, cost_usd=None) for c in records[1].calls[:1]])
        made.append(transcript_store(root / night / "out", "nightly", records))
    return made[0], made[1]


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[Path, Path]:
    return stores(tmp_path_factory.mktemp("edges"))


async def answer(client: aiohttp.ClientSession, path: str) -> tuple[int, str, str, dict[str, str]]:
    async with client.get(path, allow_redirects=False) as response:
        return response.status, response.content_type, await response.text(), dict(response.headers)


def error_line(page: str) -> str:
    assert page.count('class="bad"') == 1, page[:2000]
    return html.unescape(page.split('id="error">', 1)[1].split("</p>", 1)[0])


async def test_a_search_longer_than_a_request_line_is_one_line_of_the_apps_with_its_headers(two, caplog):
    a, _ = two
    assert len(TRACEBACK.encode()) > 8190
    caplog.set_level(logging.DEBUG)
    async with viewer(a) as (_, client):
        for path in ("/s/0/episodes?text=", "/search?text=", "/s/0/episodes?strategy=react&text="):
            status, kind, page, headers = await answer(client, path + TRACEBACK)
            assert status == 400 and kind == "text/html", (path, status, kind, page[:300])
            assert all(headers.get(name) == value for name, value in HEADERS.items()), headers
            line = error_line(page)
            assert "the search is too long" in line and "shorten it" in line, line
        status, _, page, _ = await answer(client, "/s/0/episodes?text=" + "+".join(["word"] * 300))  # under a line, over the limit
        assert status == 400 and "the search is too long (1,499 characters" in error_line(page)
        await get(client, "/s/0/episodes?text=ValueError%3A+the+last+line")  # the advice works
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("aiohttp")], \
        [r.getMessage() for r in caplog.records]


async def test_the_cell_filters_are_the_stores_values_and_a_value_it_lacks_is_one_line(two):
    a, _ = two
    async with viewer(a) as (_, client):
        listed = await get(client, "/s/0/episodes")
        form = listed.split('<form class="filters"', 1)[1].split("</form>", 1)[0]
        assert f'<select name="model"><option value="" selected>all</option><option value="{MODEL}">' in form
        assert '<option value="react">react</option><option value="try_again">try_again</option>' in form
        assert '<select name="task_set">' in form and '<input name="model"' not in form
        chosen = await get(client, f"/s/0/episodes?model={MODEL}&strategy=react")
        assert sorted(tasks(chosen)) == ["starter-bash/1", "starter-bash/3"]
        assert f'<option value="{MODEL}" selected>' in chosen
        for query, words in [("model=local-sim", f"model 'local-sim' is not in this store: did you mean '{MODEL}'?"),
                             ("strategy=REACT", "strategy 'REACT' is not in this store: did you mean 'react'?"),
                             ("task_set=nl2bash", "task_set 'nl2bash' is not in this store: its task sets are "
                                                  "starter-bash")]:
            status, _, page, _ = await answer(client, f"/s/0/episodes?{query}")
            assert status == 400 and words in error_line(page), (query, error_line(page))
            status, _, page, _ = await answer(client, f"/s/0/episodes?{query}&format=csv")
            assert status == 400, query


async def test_a_side_by_side_cell_the_runs_lack_is_one_line(two):
    async with viewer(*two) as (_, client):
        status, _, page, _ = await answer(client, "/compare?a=0&b=1&model=local-sim")
        assert status == 400 and "model 'local-sim' is not in the tasks both runs have: did you mean " \
            f"'{MODEL}'?" in error_line(page), error_line(page)
        status, _, page, _ = await answer(client, f"/compare?a=0&b=1&model={MODEL}")
        assert status == 200


async def test_unknown_parameters_are_one_line_naming_them_and_every_known_one_still_works(two):
    a, b = two
    async with viewer(a, b) as (_, client):
        for path, unknown in [("/s/0/episodes?epoch=5", "epoch"), ("/s/0/episodes?error_class=model", "error_class"),
                              ("/s/0/episodes/1?sort=reward&modle=x", "modle"), ("/search?text=ls&q=ls", "q"),
                              ("/s/0/task?task_id=starter-bash/1&epoch=0", "epoch"), ("/s/0?model=x", "model"),
                              ("/compare?a=0&b=1&flip=1", "flip"), ("/compare/pair?a=0&b=1&ea=1&eb=1&x=1", "x")]:
            status, _, page, _ = await answer(client, path)
            line = error_line(page)
            assert status == 400 and f"unknown parameter '{unknown}'" in line, (path, status, line)
        line = error_line((await answer(client, "/s/0/episodes?epoch=5&error_class=x"))[2])
        assert "unknown parameters 'epoch', 'error_class'" in line
        assert "failure" in line and "min_reward" in line and "format" in line  # the known ones are listed
        every = (f"model={MODEL}&strategy=react&task_set=starter-bash&task_id=starter-bash/1&status=solved&success=yes"
                 "&failure=none&min_reward=0.5&max_reward=1&text=ls&sort=reward&page=1")
        assert tasks(await get(client, f"/s/0/episodes?{every}")) == ["starter-bash/1"]
        assert "starter-bash/1" in await get(client, f"/s/0/episodes?{every}&format=csv")
        assert '"starter-bash/1"' in await get(client, f"/s/0/episodes?{every}&format=json")
        await get(client, f"/s/0/episodes/2?{every}")
        await get(client, "/compare?a=0&b=1&model=&strategy=&task_set=&flipped=1&page=1")
        await get(client, "/s/0/episodes?model=&strategy=&task_set=&status=&success=&failure=&min_reward=&max_reward="
                          "&text=&sort=newest")  # the form sent with nothing chosen


async def test_a_reward_range_upside_down_or_outside_0_to_1_is_one_line(two):
    a, _ = two
    async with viewer(a) as (_, client):
        for query, words in [("min_reward=2&max_reward=1", "min_reward must be from 0 to 1, not '2'"),
                             ("min_reward=0.8&max_reward=0.2", "min_reward 0.8 is above max_reward 0.2"),
                             ("max_reward=1.5", "max_reward must be from 0 to 1, not '1.5'"),
                             ("min_reward=-0.1", "min_reward must be from 0 to 1, not '-0.1'")]:
            status, _, page, _ = await answer(client, f"/s/0/episodes?{query}")
            assert status == 400 and words in error_line(page), (query, error_line(page))
        assert sorted(tasks(await get(client, "/s/0/episodes?min_reward=0.5&max_reward=0.5"))) == [
            "starter-bash/0", "starter-bash/2"]


async def test_a_pair_of_two_tasks_is_refused_and_a_pair_of_one_is_shown(two):
    a, b = two
    async with viewer(a, b) as (_, client):
        status, _, page, _ = await answer(client, "/compare/pair?a=0&b=1&ea=1&eb=2")
        line = error_line(page)
        assert status == 400 and "different tasks" in line and "starter-bash/0" in line and "starter-bash/1" in line
        page = await get(client, "/compare/pair?a=0&b=1&ea=2&eb=2")
        assert "<h1>starter-bash/1 · epoch 0: A against B</h1>" in page


async def test_small_words_a_heading_of_no_filter_the_cost_of_unpriced_calls_and_the_icon(two):
    a, b = two
    async with viewer(a, b) as (_, client):
        every = await get(client, "/compare?a=0&b=1")
        assert "any / any / any" not in every and "<h2>Tasks in both runs, of every cell</h2>" in every
        one = await get(client, "/compare?a=0&b=1&strategy=react")
        assert "<h2>Tasks in both runs, of strategy react</h2>" in one
        pair = await get(client, "/compare/pair?a=0&b=1&ea=2&eb=2")
        assert column(pair, "pair-summary", 1)[5] == "unknown: no price is known for its 1 call"
        episode = await get(client, "/s/0/episodes/2")
        assert "unknown: no price is known for its 1 call" in episode and "unpriced calls" not in episode
        assert "<h2>Transcript (1 turn)</h2>" in await get(client, "/s/0/episodes/4")
        assert '<span id="match-count">1</span> episode matches' in await get(client, "/s/0/episodes?task_id=starter-bash/1")
        assert "1 episode in nightly" in await get(client, "/s/0/task?task_id=starter-bash/1")
        for path in ("/s/0", "/s/0/episodes?epoch=1", "/nowhere"):
            assert '<link rel="icon" href="/favicon.ico"' in (await answer(client, path))[2], path
        status, kind, icon, headers = await answer(client, "/favicon.ico")
        assert status == 200 and kind == "image/svg+xml" and icon.startswith("<svg") and "nosniff" in str(headers)
