"""`view OUTDIR...` over HTTP: aiohttp's client against the real app, on stores of real sweeps.

Two small sweeps (the oracle and a simulated LLM that knows half the tasks, over the starter Bash
and Python sets; the second with another seed) give the stores; episodes written through the
store's own writer give the escaping and live cases (those need no engine). Bad inputs go through the command itself.
"""

from __future__ import annotations

import asyncio
import html
import re
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from contextlib import closing
from pathlib import Path

import aiohttp
import pytest

from foundation.errors import ConfigError
from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.nightly.history import History
from orchestrator.report.content import build_content, ci_text
from orchestrator.store.episode_query import PAGE_SIZE
from orchestrator.store.results import load_results
from orchestrator.view.cli import last_good_night
from orchestrator.view.source import Source
from tests.stores import rows
from tests.unit.test_view import column, get, sha256, tasks, viewer

SWEEP = """name = "view-test"
strategies = ["single", "try_again"]
max_turns = 2
concurrency = 8
[[models]]
name = "oracle"
[[models]]
name = "openai/local-sim"
local = {{ latency = 0.05, solve_rate = 0.5, seed = {seed} }}
[[tasks]]
dataset = "starter-bash"
[[tasks]]
dataset = "starter-python"
"""
EPISODES = 2 * 2 * 10  # models × strategies × (5 Bash + 5 Python tasks)


def run_sweep(root: Path, name: str, seed: int) -> Path:
    path, out = root / f"{name}.toml", root / name
    path.write_text(SWEEP.format(seed=seed))
    assert main(["sweep", str(path), "--output", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> tuple[Path, Path]:
    """Two real sweeps of the same file that differ only in the simulated model's seed."""
    root = tmp_path_factory.mktemp("view")
    return run_sweep(root, "a", 3), run_sweep(root, "b", 4)


async def charts_drawn(client: aiohttp.ClientSession, path: str, within: float = 60.0) -> str:
    """The page once its charts are drawn (a task of the viewer's own draws them, and the page
    says so until they are ready); asked again every 0.2 s, for `within` seconds at most."""
    deadline = time.monotonic() + within
    while 'id="charts-pending"' in (page := await get(client, path)):
        assert time.monotonic() < deadline, f"the charts of {path} were not drawn within {within} s"
        await asyncio.sleep(0.2)
    return page


@pytest.mark.docker
@pytest.mark.slow
async def test_the_overview_shows_the_reports_cells_intervals_and_plots(sweeps):
    a, _ = sweeps
    view = build_content(load_results(a))
    async with viewer(a) as (_, client):
        async with client.get("/", allow_redirects=False) as response:  # one store: straight to its overview
            assert (response.status, response.headers["Location"]) == (302, "/s/0")
        page = await charts_drawn(client, "/s/0")
    assert f'<span id="episode-count">{EPISODES}</span> of <span id="planned">{EPISODES}</span> planned (100.0%)' in page
    assert column(page, "cells", 5) == [ci_text(s) for s in view.summaries]  # the report's own intervals
    assert column(page, "progress", 3) == [str(s.episodes) for s in view.summaries]
    models = len({s.model for s in view.summaries})
    drawn = [f"budget-{i}" for i in range(len(view.curves))] + [f"model-{i}" for i in range(models)]
    for chart in ("tokens", "cost", "latency", "reward-0", "solved-0", *drawn):  # the report's curves and bars too
        assert f'id="chart-{chart}"' in page
    assert 'id="live"' in page and "http" not in page.split("<body>")[1].replace("http://www.w3.org/2000/svg", "")


@pytest.mark.docker
@pytest.mark.slow
async def test_lists_filter_sort_and_page_without_reading_the_whole_store(sweeps):
    a, _ = sweeps
    async with viewer(a) as (_, client):
        unsolved = await get(client, "/s/0/episodes?model=openai/local-sim&success=no&sort=reward")
        expected = rows(a, "SELECT count(*) FROM episodes WHERE model = 'openai/local-sim' AND success = 0")[0][0]
        assert 0 < expected < EPISODES // 2
        assert f'<span id="match-count">{expected}</span>' in unsolved
        rewards = [float(r) for r in column(unsolved, "episodes", 4)]
        assert rewards == sorted(rewards, reverse=True) and max(rewards) < 1
        python = await get(client, "/s/0/episodes?text=starter-python/&status=solved&min_reward=1")
        assert set(column(python, "episodes", 3)) == {"solved"}
        assert all(t.startswith("starter-python/") for t in tasks(python))
        words = await get(client, "/s/0/episodes?text=palindrome")  # text in the task's query
        assert len(column(words, "episodes", 0)) == 4 and set(tasks(words)) == {"starter-python/1"}
        first = await get(client, "/s/0/episodes?sort=oldest")
        assert len(column(first, "episodes", 0)) == min(PAGE_SIZE, EPISODES) and "page 1 of 1" in first
        beyond = await get(client, "/s/0/episodes?page=9", 400)
        assert "page 9 is past the last page, 1" in beyond
        for query, message in [("status=won", "status 'won' is not one of solved"),
                               ("min_reward=high", "min_reward must be a finite number"),
                               ("sort=random", "sort 'random' is not one of newest"), ("page=0", "page must be a whole number")]:
            error = await get(client, f"/s/0/episodes?{query}", 400)
            assert message in html.unescape(error) and error.count('class="bad"') == 1
        await get(client, "/s/0/episodes/999999", 404)
        await get(client, "/s/5", 404)


@pytest.mark.docker
@pytest.mark.slow
async def test_an_episode_shows_task_gold_turns_calls_and_lineage(sweeps):
    a, _ = sweeps
    (episode_id, query, gold, digest), = rows(a, "SELECT id, query, gold, image_digest FROM episodes WHERE model = "
                                                 "'openai/local-sim' AND strategy = 'try_again' AND success = 0 LIMIT 1")
    turns = rows(a, "SELECT output, observation, reward FROM turns WHERE episode_id = ? ORDER BY idx", (episode_id,))
    calls = rows(a, "SELECT prompt_tokens, served_model FROM llm_calls WHERE episode_id = ? ORDER BY idx", (episode_id,))
    async with viewer(a) as (_, client):
        page = await get(client, f"/s/0/episodes/{episode_id}")
    assert html.escape(query) in page and html.escape(gold) in page
    assert page.count('<section class="turn"') == len(turns) > 0
    for output, observation, reward in turns:
        assert html.escape(output) in page and html.escape(observation) in page
        assert f"reward after it: {reward:.3f}" in page
    assert column(page, "calls", 3) == [f"{p:,}" for p, _ in calls] and column(page, "calls", 2)[0] == calls[0][1]
    assert digest.startswith("sha256:") and digest in page and "local-sim" in column(page, "lineage", 1)
    (episode_host,), = rows(a, "SELECT host FROM episodes WHERE id = ?", (episode_id,))
    host = rows(a, "SELECT host FROM runs")[0][0]
    assert episode_host and column(page, "lineage", 1)[column(page, "lineage", 0).index("host")] == episode_host
    assert host in column(page, "lineage", 1)


@pytest.mark.docker
@pytest.mark.slow
async def test_two_runs_side_by_side_list_flipped_tasks_first(sweeps):
    a, b = sweeps
    with closing(sqlite3.connect(a / "results.db")) as db:
        db.execute("ATTACH DATABASE ? AS b", (str(b / "results.db"),))
        flipped = db.execute("SELECT count(*) FROM episodes x JOIN b.episodes y USING (model, strategy, task_set, "
                             "task_id, epoch) WHERE x.success != y.success").fetchone()[0]
    assert flipped > 0
    async with viewer(a, b) as (_, client):
        index = await get(client, "/")
        assert 'href="/compare?a=0&amp;b=1"' in index
        page = await get(client, "/compare?a=0&b=1")
        changes = column(page, "pairs", 1)
        assert changes[:flipped] == sorted(changes[:flipped]) and set(changes[:flipped]) <= {"broken", "fixed"}
        assert set(changes[flipped:]) == {"same"} and f'<span id="flipped-count">{flipped}</span>' in page
        assert len(column(page, "verdicts", 0)) == 8
        only = await get(client, "/compare?a=0&b=1&flipped=1")
        assert set(column(only, "pairs", 1)) <= {"broken", "fixed"} and len(column(only, "pairs", 1)) == flipped
        link = re.search(r'href="(/compare/pair\?[^"]+)"', page).group(1)
        pair = await get(client, html.unescape(link))
        assert 'id="aligned"' in pair and pair.count('class="side-a') == pair.count('class="side-b') >= 1
    async with viewer(a) as (_, client):
        assert "needs two stores" in await get(client, "/compare", 400)


@pytest.mark.docker
@pytest.mark.slow
async def test_the_viewer_never_writes(sweeps):
    a, b = sweeps
    before = {p: sha256(p / "results.db") for p in (a, b)}
    (task,) = rows(a, "SELECT task_id FROM episodes WHERE id = 1")
    eb = rows(b, "SELECT min(id) FROM episodes WHERE task_id = ?", task)[0][0]  # a pair is of one task
    async with viewer(a, b) as (_, client):
        for path in ("/", "/s/0", "/s/1/episodes?sort=reward", "/s/0/episodes/1", "/compare?a=0&b=1",
                     f"/compare/pair?a=0&b=1&ea=1&eb={eb}"):
            await get(client, path)
    with pytest.raises(ConfigError, match="cannot be read"):
        await Source.open(0, a).reader.call(lambda db: db.execute("DELETE FROM episodes"))
    assert {p: sha256(p / "results.db") for p in (a, b)} == before


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.docker
@pytest.mark.slow
def test_bad_inputs_are_one_line_and_exit_2(sweeps, tmp_path, capsys):
    a, _ = sweeps
    (tmp_path / "empty").mkdir()
    assert main(["view", str(tmp_path / "empty")]) == 2
    assert "has no results.db" in one_error_line(capsys)
    newer = tmp_path / "newer"
    newer.mkdir()
    with closing(sqlite3.connect(newer / "results.db")) as db:
        db.executescript((PROJECT_ROOT / "orchestrator" / "store" / "schema.sql").read_text())
        db.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        db.commit()
    assert main(["view", str(newer)]) == 2
    assert "has schema version 2, newer than this viewer reads (1)" in one_error_line(capsys)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", str(a), "--port", str(port)]) == 2
        assert f"port {port} on 127.0.0.1 is in use" in one_error_line(capsys)
    with closing(sqlite3.connect(a / "results.db", isolation_level=None)) as holder:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("UPDATE meta SET value = value")
        assert main(["view", str(a)]) == 2
        assert "is locked by another process" in one_error_line(capsys)
        holder.execute("ROLLBACK")


@pytest.mark.docker
@pytest.mark.slow
def test_the_command_serves_until_stopped(sweeps):
    a, _ = sweeps
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "view", str(a), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)
    try:
        line = process.stdout.readline()
        base = re.search(r"at (http://127\.0\.0\.1:\d+)/", line).group(1)
        with urllib.request.urlopen(base + "/s/0") as response:
            assert response.status == 200 and b'id="episode-count"' in response.read()
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert process.returncode == 0 and "viewer stopped" in out and err == ""


@pytest.mark.docker
@pytest.mark.slow
def test_a_night_is_viewed_beside_its_last_good_night(sweeps, tmp_path, capsys):
    good, tonight = sweeps
    history = tmp_path / "history.db"
    with History.open(history) as nights:
        first = nights.add_night(sweep="nightly", started_at=1.0, outdir=str(good), status="passed", baseline_id=None)
        nights.add_night(sweep="nightly", started_at=2.0, outdir=str(tonight), status="regressed", baseline_id=first)
    assert last_good_night(history, tonight) == good
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "view", str(tonight), "--last-good", str(history),
                                "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=PROJECT_ROOT)
    try:
        line = process.stdout.readline()
        assert "viewing 2 stores" in line
        base = re.search(r"at (http://127\.0\.0\.1:\d+)/", line).group(1)
        with urllib.request.urlopen(base + "/") as response:
            assert b'href="/compare?a=0&amp;b=1"' in response.read()  # the good night is a, tonight b
    finally:
        process.terminate()
        process.communicate(timeout=10)
    assert main(["view", str(good), "--last-good", str(history)]) == 2
    assert "had no good night before it" in one_error_line(capsys)
    assert main(["view", str(tmp_path), "--last-good", str(history)]) == 2
    assert "is not a night in" in one_error_line(capsys)
    assert main(["view", str(tonight), "--last-good", str(tmp_path / "none.db")]) == 2
    assert "no nightly history database there" in one_error_line(capsys)
    assert not (tmp_path / "none.db").exists()  # the viewer creates nothing
