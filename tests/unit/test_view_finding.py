"""`view` over HTTP, on stores with transcripts written by the sweep's own writer (no engine needed):
full-text search kept up to date while the writer writes, the task page, downloads, an episode's
neighbours in its list, stores of one name, and the defects of issue 26 (numbers out of range,
labels, the Host header, security headers, polling after the run)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import pytest

from orchestrator.store import Store
from orchestrator.store.search_index import TextIndex
from tests.stores import dialogue_record, rows, transcript_store, write_episodes
from tests.unit.test_view import column, get, tasks, viewer

WORD = "zanzibar"  # in the last observation of a few episodes only


def stores(root: Path) -> tuple[Path, Path]:
    """Two stores of one sweep name in two directories: 12 episodes each, a few with WORD."""
    made = []
    for side, seed in (("night-1", 0), ("night-2", 1)):
        records = [dialogue_record(t, [0.0, 0.5, 1.0 if (t + seed) % 3 else 0.25], status="solved" if (t + seed) % 3
                                   else "max_turns", strategy=("try_again", "react")[t % 2],
                                   words=WORD if t in (2, 5) else "") for t in range(12)]
        made.append(transcript_store(root / side / "out", "nightly", records))
    return made[0], made[1]


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[Path, Path]:
    return stores(tmp_path_factory.mktemp("finding"))


async def test_search_finds_words_in_observations_in_a_store_a_cell_and_every_store(two):
    a, b = two
    before = hashlib.sha256((a / "results.db").read_bytes()).hexdigest()
    async with viewer(a, b) as (_, client):
        listed = await get(client, f"/s/0/episodes?text={WORD}")
        assert sorted(tasks(listed)) == ["starter-bash/2", "starter-bash/5"] and "<mark>" + WORD in listed
        assert 'href="/s/0/episodes/3#turn-3"' in listed  # the snippet links to the turn it is in
        cell = await get(client, f"/s/0/episodes?text={WORD}&strategy=try_again")
        assert tasks(cell) == ["starter-bash/2"]
        everywhere = await get(client, f"/search?text={WORD}")
        assert everywhere.count('class="store-count">2<') == 2
        assert "nightly (night-1/out)" in everywhere and "nightly (night-2/out)" in everywhere
        assert 'id="index-note"' not in listed
    assert hashlib.sha256((a / "results.db").read_bytes()).hexdigest() == before  # the index lives elsewhere
    assert TextIndex(a / "results.db").path.is_file() and not list(a.glob("*fts*"))


async def test_the_index_follows_the_writer(tmp_path):
    out = tmp_path / "live"
    await write_episodes(out, "live", [dialogue_record(0, [0.0])], finished=False)
    async with viewer(out) as (_, client):
        assert tasks(await get(client, "/s/0/episodes?text=quokka")) == []
        async with Store.open(out, sweep="live", identity="live-id") as store:
            run = await store.start_run(sweep="live", identity="live-id", sweep_hash="0" * 64, git_sha=None,
                                        config_json="{}")
            await store.add_episode(run, "live", dialogue_record(1, [0.0, 0.5], words="quokka"))
            assert tasks(await get(client, "/s/0/episodes?text=quokka")) == ["starter-bash/1"]


async def test_a_task_page_downloads_and_neighbours(two):
    a, _ = two
    async with viewer(a) as (_, client):
        page = await get(client, "/s/0/task?task_id=starter-bash/4")
        assert 'id="task-grid"' in page and column(page, "task-grid", 1) == ["try_again"]
        listed = json.loads(await get(client, "/s/0/episodes?sort=reward&format=json"))
        assert [r["reward"] for r in listed] == sorted((r["reward"] for r in listed), reverse=True) and len(listed) == 12
        text = await get(client, "/s/0/episodes?strategy=react&format=csv")
        assert {r["strategy"] for r in csv.DictReader(io.StringIO(text))} == {"react"}
        second = listed[1]["id"]
        episode = await get(client, f"/s/0/episodes/{second}?sort=reward")
        assert f'/s/0/episodes/{listed[0]["id"]}?sort=reward" rel="prev"' in episode
        assert f'/s/0/episodes/{listed[2]["id"]}?sort=reward" rel="next"' in episode
        await get(client, "/s/0/task?task_id=nothing/9", 404)


async def test_numbers_out_of_range_and_bad_values_are_one_line_never_a_500(two):
    a, b = two
    async with viewer(a, b) as (_, client):
        await get(client, "/s/0/episodes/99999999999999999999999", 404)
        await get(client, "/s/99999999999999999999999", 404)
        for query, message in [("page=99999999999999999999999999", "page must be a whole number from 1"),
                               ("page=999999", "page 999999 is past the last page, 1"),
                               ("min_reward=nan", "min_reward must be a finite number"),
                               ("max_reward=inf", "max_reward must be a finite number"),
                               ("failure=whatever", "is not one of none, any"), ("text=%22%22", "no word in it"),
                               ("format=xml", "format must be one of csv, json")]:
            page = await get(client, f"/s/0/episodes?{query}", 400)
            assert message in page and page.count('class="bad"') == 1, query
        await get(client, "/compare/pair?a=0&b=1&ea=99999999999999999999&eb=1", 404)
        await get(client, "/compare?a=0&b=1&page=99999999999999999999", 400)


async def test_labels_say_what_a_filter_and_a_turn_mean(two):
    a, _ = two
    async with viewer(a) as (_, client):
        listed = await get(client, "/s/0/episodes")
        assert "error class" in listed and '<option value="any">any error</option>' in listed
        assert '<option value="" selected>all</option>' in listed and ">solved<select" in listed.replace("</label>", "")
        episode = await get(client, "/s/0/episodes/1")
    assert "not executed" not in episode and "the action failed" in episode  # its third turn's exit status


async def test_the_host_header_is_checked_and_every_answer_carries_security_headers(two):
    a, _ = two
    async with viewer(a) as (base, client):
        for path in ("/s/0", "/s/0/episodes?page=0", "/nowhere", "/s/0/token"):
            async with client.get(path) as response:
                assert "script-src 'self'" in response.headers["Content-Security-Policy"], path
                assert response.headers["X-Content-Type-Options"] == "nosniff"
        port = base.rsplit(":", 1)[1]
        await get(client, "/s/0", 421, Host=f"evil.example:{port}")
        await get(client, "/s/0", 200, Host=f"localhost:{port}")
        page = await get(client, "/s/0")
    assert "<script>" not in page and "<style>" not in page  # nothing inline for the policy to allow


async def test_the_token_says_when_the_run_has_finished(tmp_path, two):
    a, _ = two
    async with viewer(a) as (_, client):
        assert (await (await client.get("/s/0/token")).json())["live"] is False
        assert 'data-live="0"' in await get(client, "/s/0/episodes")
    out = tmp_path / "running"
    await write_episodes(out, "running", [dialogue_record(0, [0.0])], finished=False)
    async with viewer(out) as (_, client):
        assert (await (await client.get("/s/0/token")).json())["live"] is True
    assert rows(out, "SELECT status FROM runs") == [("running",)]


def test_two_indexers_of_one_store_add_each_episode_once(tmp_path):
    """Viewers in two processes share the store's index: each chunk reads how far the index goes in
    its own write transaction, so racing updates add every episode once between them. Raced on 20
    new indexes: the first switch to WAL mode by both at once is answered "locked" without a wait
    (five runs of five failed before the switch was asked again)."""
    import shutil
    import sqlite3
    import threading

    out = stores(tmp_path)[0]
    errors: list[BaseException] = []

    def update(index: TextIndex) -> None:
        try:
            index.update()
        except BaseException as exc:  # noqa: BLE001 — reported by the assertion below
            errors.append(exc)

    for race in range(20):
        store = shutil.copytree(out, tmp_path / f"race-{race}")
        first, second = TextIndex(store / "results.db"), TextIndex(store / "results.db")
        assert first.path == second.path
        racers = [threading.Thread(target=update, args=(index,)) for index in (first, second)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(60)
        assert not errors, errors
        with sqlite3.connect(first.path) as db:
            (rows_indexed,) = db.execute("SELECT count(*) FROM episode_text").fetchone()
        assert rows_indexed == 12  # once each, not twice


async def test_a_store_opened_twice_has_one_index(two):
    from orchestrator.view.source import Source, share_indexes

    a, _ = two
    sources = [Source.open(i, a) for i in range(2)]
    share_indexes(sources)
    assert sources[0].keeper is sources[1].keeper
    async with viewer(a, a) as (_, client):  # and both serve a search
        for i in range(2):
            assert sorted(tasks(await get(client, f"/s/{i}/episodes?text={WORD}"))) == ["starter-bash/2", "starter-bash/5"]
