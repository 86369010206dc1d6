"""`view OUTDIR...` over HTTP: aiohttp's client against the real app, on stores of real sweeps.

Two small sweeps (the oracle and a simulated LLM that knows half the tasks, over the starter Bash
and Python sets; the second with another seed) give the stores; episodes written through the
store's own writer give the escaping and live cases (those need no engine). Bad inputs go through the command itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import re
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path

import aiohttp

from orchestrator.store import EpisodeKey, EpisodeRecord, LLMCall, Store, TurnRecord
from orchestrator.view.app import serving
from orchestrator.view.source import Source
from orchestrator.view.sweeplog import PlannedEpisodes


@asynccontextmanager
async def viewer(*outdirs: Path) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    """The real app on a free port of 127.0.0.1, and a client session."""
    sources = [Source.open(i, outdir) for i, outdir in enumerate(outdirs)]
    async with serving(sources, "127.0.0.1", 0) as base, aiohttp.ClientSession(base) as client:
        yield base, client


async def get(client: aiohttp.ClientSession, path: str, status: int = 200, **headers: str) -> str:
    async with client.get(path, headers=headers, allow_redirects=False) as response:
        text = await response.text()
        assert response.status == status, text[:500]
        return text


def column(page: str, table_id: str, index: int) -> list[str]:
    """The text of column `index` of every body row of the table `table_id`."""
    body = page.split(f'<table id="{table_id}"', 1)[1].split("</tbody>", 1)[0].split("<tbody>", 1)[1]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body)]
    return [html.unescape(re.sub(r"<[^>]+>", "", c[index])) for c in cells]


def tasks(page: str) -> list[str]:
    """The task ids of an episode list, in its order (the column also says the epoch)."""
    return [text.split(" epoch ")[0] for text in column(page, "episodes", 1)]


def record(task: int, output: str, rewards: list[float], *, status: str = "max_turns",
           failure: str | None = None, error: str | None = None) -> EpisodeRecord:
    """An episode as the sweep stores it, with one turn per reward and one priced call per turn."""
    now = time.time()
    turns = [TurnRecord(f"{output} (turn {i + 1})", f"echo {i}", f"observation {i}\n" * 3, r, True)
             for i, r in enumerate(rewards)]
    calls = [LLMCall("demo-model", "demo-model-0613", 120, 30, 0.25, 1, 0.0004) for _ in rewards]
    return EpisodeRecord(EpisodeKey("demo-model", "try_again", "starter-bash", f"starter-bash/{task}", 0), "bash",
                         "starter-bash", task, f"query of task {task} <i>", "gold <b>answer</b>", "intercode/starter",
                         len(rewards), now - 1, now, status, failure, error, 1, "sha256:" + "ab" * 32, turns, calls)


@asynccontextmanager
async def writer(outdir: Path) -> AsyncIterator[tuple[Store, int]]:
    """The sweep's own store writer, open on `outdir`, with a run started."""
    async with Store.open(outdir, sweep="written", identity="written-id") as store:
        run = await store.start_run(sweep="written", identity="written-id", sweep_hash="0" * 64, git_sha=None,
                                    config_json="{}")
        yield store, run


async def test_stored_text_is_escaped_and_new_episodes_show_while_the_writer_is_open(tmp_path):
    out = tmp_path / "live"
    async with writer(out) as (store, run):
        await store.add_episode(run, "written", record(0, "<script>alert('x')</script>", [0.0, 0.5],
                                                       status="model_error", failure="model", error="<err> gave up"))
        async with viewer(out) as (_, client):
            token = (await (await client.get("/s/0/token")).json())["token"]
            page = await get(client, "/s/0/episodes/1")
            assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
            assert "&lt;err&gt; gave up" in page and "gold &lt;b&gt;answer&lt;/b&gt;" in page
            await store.add_episode(run, "written", record(1, "ok", [1.0], status="solved"))
            assert (await (await client.get("/s/0/token")).json())["token"] != token
            fragment = await get(client, "/s/0", **{"X-Fragment": "1"})
            assert fragment.lstrip().startswith("<h1>") and '<span id="episode-count">2</span>' in fragment
            assert column(await current_overview(client), "cells", 3) == ["2"]  # the statistics catch up
            listed = await get(client, "/s/0/episodes", **{"X-Fragment": "1"})
            assert tasks(listed) == ["starter-bash/1", "starter-bash/0"]  # newest first


async def current_overview(client: aiohttp.ClientSession) -> str:
    """The overview once its statistics are of the whole store (they are computed again in the
    background after a change; the page says `behind` meanwhile and its token ends in "~")."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        async with client.get("/s/0", headers={"X-Fragment": "1"}) as response:
            if not response.headers["X-Token"].endswith("~"):
                page = await response.text()
                assert 'id="behind"' not in page
                return page
        await asyncio.sleep(0.05)
    raise AssertionError("the overview's statistics did not catch up")


async def test_a_store_locked_while_viewed_is_a_one_line_503(tmp_path):
    out = tmp_path / "locked"
    async with writer(out) as (store, run):
        await store.add_episode(run, "written", record(0, "x", [1.0], status="solved"))
    async with viewer(out) as (_, client):
        with closing(sqlite3.connect(out / "results.db", isolation_level=None)) as holder:
            holder.execute("PRAGMA locking_mode = EXCLUSIVE")
            holder.execute("BEGIN EXCLUSIVE")
            holder.execute("UPDATE meta SET value = value")
            page = await get(client, "/s/0/episodes", 503)
            assert page.count('class="bad"') == 1 and "is locked by another process" in page
            holder.execute("ROLLBACK")
        holder_gone = await get(client, "/s/0/episodes")
        assert tasks(holder_gone) == ["starter-bash/0"]


def test_the_planned_count_is_the_latest_runs_and_a_half_written_line_waits(tmp_path):
    planned = PlannedEpisodes.of(tmp_path)
    assert planned.read() is None  # no log yet
    log = tmp_path / "sweep.log"
    log.write_text('{"event": "sweep_start", "planned": 40}\n{"event": "error", "text": "sweep_start planned"}\n')
    assert planned.read() == 40
    with log.open("a") as out:
        out.write('{"event": "sweep_start", "pla')
        out.flush()
        assert planned.read() == 40
        out.write('nned": 60}\n')
    assert planned.read() == 60
    log.write_text('{"event": "sweep_start", "planned": 7}\n')  # replaced by a shorter log
    assert planned.read() == 7


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
