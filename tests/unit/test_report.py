"""`report OUTDIR`: numbers, curves, lineage and bad-input errors, on results DBs built by hand."""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from foundation.errors import ConfigError
from orchestrator import cli
from orchestrator.report.cli import run, write_report
from orchestrator.store.results import load_results
from orchestrator.report.summary import summarize_all, turn_budget_curve
from orchestrator.report.svg import BOTTOM, HEIGHT, TOP
from orchestrator.report.content import build_content, cost_text

SCHEMA = Path(cli.__file__).parent / "store" / "schema.sql"
REPORT_MODULE = "orchestrator.report.cli"


class ResultsDB:
    """A results.db built from the real schema, with rows inserted by hand."""

    def __init__(self, outdir: Path, sweep: str = "demo-sweep"):
        outdir.mkdir(parents=True, exist_ok=True)
        self.outdir, self.sweep = outdir, sweep
        self.db = sqlite3.connect(outdir / "results.db")
        self.db.executescript(SCHEMA.read_text())
        self.db.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", "1"), ("sweep", sweep)])
        self.db.commit()
        self.count = 0

    def close(self) -> None:
        self.db.close()

    def run(self, status: str = "finished", git_sha: str | None = "abc1234", finished: float | None = 1700000600.0,
            sweep_hash: str = "f" * 64) -> int:
        cursor = self.db.execute(
            "INSERT INTO runs (sweep, identity, sweep_hash, git_sha, config_json, host, started_at, finished_at, status)"
            " VALUES (?, 'ident', ?, ?, '{}', 'testhost', 1700000000.0, ?, ?)",
            (self.sweep, sweep_hash, git_sha, finished, status))
        self.db.commit()
        return cursor.lastrowid

    def episode(self, run_id: int, model: str, strategy: str, task_set: str, rewards: list[float], *,
                max_turns: int = 3, status: str | None = None, failure_class: str | None = None,
                cost: float | None = None, unpriced: int = 0, tokens: tuple[int, int] = (100, 20),
                digest: str | None = "sha256:1111", served: str | None = None) -> int:
        """One episode whose turn i got rewards[i]; reward/success/n_turns follow from them."""
        self.count += 1
        reward = max(rewards, default=0.0)
        status = status or ("solved" if reward == 1.0 else "max_turns")
        cursor = self.db.execute(
            "INSERT INTO episodes (run_id, sweep, model, strategy, task_set, task_id, epoch, env, dataset, task_index,"
            " query, gold, status, failure_class, error, reward, success, n_turns, max_turns, prompt_tokens,"
            " completion_tokens, cost_usd, unpriced_calls, attempts, image, image_digest, served_model, started_at,"
            " finished_at) VALUES (?, ?, ?, ?, ?, ?, 0, 'bash', 'nl2bash', ?, 'q', 'g', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " ?, 1, ?, ?, ?, 1700000001.0, 1700000002.0)",
            (run_id, self.sweep, model, strategy, task_set, f"nl2bash/{self.count}", self.count, status, failure_class,
             "boom" if failure_class else None, reward, int(reward == 1.0 and status != "budget_exhausted"),
             len(rewards), max_turns, *tokens, cost, unpriced, f"intercode/{task_set}", digest, served))
        self.db.executemany("INSERT INTO turns (episode_id, idx, output, action, observation, reward, executed) "
                            "VALUES (?, ?, 'out', 'ls', 'obs', ?, 1)",
                            [(cursor.lastrowid, i, r) for i, r in enumerate(rewards)])
        self.db.commit()
        return cursor.lastrowid


@pytest.fixture
def make_db(tmp_path):
    made: list[ResultsDB] = []

    def factory(name: str = "out", **kwargs) -> ResultsDB:
        db = ResultsDB(tmp_path / name, **kwargs)
        made.append(db)
        return db

    yield factory
    for db in made:
        db.close()


def fill(db: ResultsDB) -> None:
    """A small sweep: three cells, an infra failure, priced, unpriced and partly priced episodes."""
    run_id = db.run()
    # gpt / single / fs1: 2 of 4 solved, at turns 1 and 2; mean reward (1 + 1 + 0 + 0.4) / 4 = 0.6.
    db.episode(run_id, "gpt", "single", "fs1", [1.0], cost=0.01, served="gpt-2024")
    db.episode(run_id, "gpt", "single", "fs1", [0.0, 1.0], cost=0.02, served="gpt-2024")
    db.episode(run_id, "gpt", "single", "fs1", [0.0, 0.0, 0.0], cost=0.03, served="gpt-2024")
    db.episode(run_id, "gpt", "single", "fs1", [0.4], cost=0.04, served="gpt-2024")
    # gpt / react / fs1: one solved at turn 3, one infra failure with no turns; nothing priced.
    db.episode(run_id, "gpt", "react", "fs1", [0.0, 0.5, 1.0])
    db.episode(run_id, "gpt", "react", "fs1", [], status="infra_error", failure_class="infra")
    # llama / single / fs2: one model failure; one of two episodes priced.
    db.episode(run_id, "llama", "single", "fs2", [0.0], max_turns=2, status="model_error", failure_class="model",
               cost=0.5, tokens=(1000, 500), digest="sha256:2222")
    db.episode(run_id, "llama", "single", "fs2", [1.0], max_turns=2, tokens=(3000, 500), digest="sha256:2222")


@pytest.fixture
def filled(make_db) -> ResultsDB:
    db = make_db()
    fill(db)
    return db


def test_cell_numbers(filled):
    by_cell = {(s.model, s.strategy, s.task_set): s for s in summarize_all(load_results(filled.outdir).episodes)}
    single = by_cell["gpt", "single", "fs1"]
    assert (single.episodes, single.successes, single.success_rate) == (4, 2, 0.5)
    assert (single.ci_low, single.ci_high) == pytest.approx((0.15004, 0.84996), abs=1e-5)
    assert single.mean_reward == pytest.approx(0.6)
    assert single.mean_turns == pytest.approx(7 / 4)
    assert (single.total_tokens, single.mean_tokens) == (480, 120)
    assert single.cost_usd == pytest.approx(0.10) and single.unpriced_episodes == 0
    react = by_cell["gpt", "react", "fs1"]
    assert (react.episodes, react.successes, react.cost_usd, react.unpriced_episodes) == (2, 1, None, 2)
    assert react.failures == {"model": 0, "task": 0, "infra": 1, "verifier": 0, "agent": 0, "network": 0}
    llama = by_cell["llama", "single", "fs2"]
    assert (llama.total_tokens, llama.cost_usd, llama.unpriced_episodes) == (5000, 0.5, 1)
    assert llama.failures["model"] == 1


def test_an_episode_without_calls_cost_nothing_not_unknown(make_db):
    db = make_db()
    run_id = db.run()
    db.episode(run_id, "oracle", "single", "fs1", [1.0], tokens=(0, 0))  # stored before: cost NULL
    db.episode(run_id, "gpt", "single", "fs1", [1.0], tokens=(100, 20))  # calls made, none priced
    by_cell = {(c.model, c.strategy, c.task_set): c for c in summarize_all(load_results(db.outdir).episodes)}
    oracle, gpt = by_cell["oracle", "single", "fs1"], by_cell["gpt", "single", "fs1"]
    assert (oracle.cost_usd, oracle.unpriced_episodes) == (0.0, 0) and cost_text(oracle) == "$0.0000"
    assert cost_text(gpt) == "unknown"


def test_turn_budget_curve(filled):
    view = build_content(load_results(filled.outdir))
    assert dict(view.curves["fs1"]) == {"gpt / react": [0.0, 0.0, 0.5], "gpt / single": [0.25, 0.5, 0.5]}
    assert dict(view.curves["fs2"]) == {"llama / single": [0.5, 0.5]}
    episodes = [e for e in load_results(filled.outdir).episodes if e.strategy == "single" and e.model == "gpt"]
    assert turn_budget_curve(episodes, 5) == [0.25, 0.5, 0.5, 0.5, 0.5]


def test_markdown_tables(filled):
    write_report(filled.outdir)
    md = (filled.outdir / "report.md").read_text()
    assert "# Sweep report: demo-sweep" in md
    # The paper table: rows model × strategy, columns task sets, cells rate (mean reward).
    assert "| model | strategy | fs1 | fs2 |" in md
    assert "| gpt | single | 50.0% (0.60) | — |" in md
    assert "| gpt | react | 50.0% (0.50) | — |" in md
    assert "| llama | single | — | 50.0% (0.50) |" in md
    assert "| gpt | single | fs1 | 4 | 50.0% (2) | 15.0–85.0% | 0.60 | 1.8 | 480 | 120 | $0.1000 | 0 | 0 | 0 |" in md
    assert "| gpt | react | fs1 | 2 | 50.0% (1) | 9.5–90.5% | 0.50 | 1.5 | 240 | 120 | unknown | 0 | 0 | 1 |" in md
    assert "| llama | single | fs2 | 2 | 50.0% (1) | 9.5–90.5% | 0.50 | 1.0 | 5,000 | 2500 | $0.5000 + 1 unpriced |" in md
    assert "**1 episode failed for infrastructure reasons**" in md
    assert "| gpt / single | 25.0% | 50.0% | 50.0% |" in md
    assert "| gpt / react | 0.0% | 0.0% | 50.0% |" in md


def test_lineage(filled):
    write_report(filled.outdir)
    md = (filled.outdir / "report.md").read_text()
    html = (filled.outdir / "report.html").read_text()
    for text in (md, html):
        assert "abc1234" in text and "f" * 64 in text and "testhost" in text
        assert "sha256:1111" in text and "sha256:2222" in text and "gpt-2024" in text
        assert "2023-11-14 22:13:20 UTC" in text and "finished" in text
    assert "| llama → (not reported)" not in md and "- llama → (not reported)" in md


def _polylines(html: str) -> dict[str, list[float]]:
    """Series name -> y values (as shares) read back from the SVG coordinates."""
    out = {}
    for points, name in re.findall(r'<polyline points="([^"]+)"[^>]*data-series="([^"]+)"', html):
        ys = [float(p.split(",")[1]) for p in points.split()]
        out[name] = [round(1 - (y - TOP) / (HEIGHT - TOP - BOTTOM), 3) for y in ys]
    return out


def test_html_is_self_contained_with_plots(filled):
    write_report(filled.outdir)
    html = (filled.outdir / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert '<table id="paper-table">' in html and '<table id="cells">' in html
    assert html.count("<svg") == 4  # a curve chart per task set (2) and a bar chart per model (2)
    assert _polylines(html) == {"gpt / single": [0.25, 0.5, 0.5], "gpt / react": [0.0, 0.0, 0.5],
                                "llama / single": [0.5, 0.5]}
    assert html.count('class="bar"') == 3
    assert "gpt / single" in html and "95% CI 15.0%–85.0%" in html
    assert 'id="infra-warning"' in html


def test_names_are_escaped(make_db):
    db = make_db()
    db.episode(db.run(), "<b>evil|model</b>", "single", "fs1", [1.0])
    write_report(db.outdir)
    html = (db.outdir / "report.html").read_text()
    md = (db.outdir / "report.md").read_text()
    assert "<b>evil" not in html and "&lt;b&gt;evil|model&lt;/b&gt;" in html
    assert "| <b>evil\\|model</b> | single | 100.0% (1.00) |" in md


def test_empty_database(make_db):
    db = make_db()
    write_report(db.outdir)
    assert "No episodes yet." in (db.outdir / "report.md").read_text()
    html = (db.outdir / "report.html").read_text()
    assert 'id="empty"' in html and "<svg" not in html and "No runs recorded." in html


def test_sweep_still_running(make_db):
    """Like the sweep's store: WAL journal, and a writer in the middle of its next episode."""
    db = make_db()
    db.db.execute("PRAGMA journal_mode=WAL")
    run_id = db.run(status="running", finished=None, git_sha=None)
    db.episode(run_id, "gpt", "single", "fs1", [0.0, 1.0])
    db.db.execute("BEGIN")
    db.db.execute("INSERT INTO meta VALUES ('uncommitted', 'x')")
    write_report(db.outdir)
    db.db.rollback()
    md = (db.outdir / "report.md").read_text()
    assert "| 1 | 2023-11-14 22:13:20 UTC | — | running | — |" in md
    assert "| gpt | single | fs1 | 1 | 100.0% (1) | 20.7–100.0% |" in md


def with_report_command(monkeypatch) -> None:
    assert REPORT_MODULE in cli.COMMAND_MODULES


def one_error_line(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_command_writes_both_files(monkeypatch, capsys, filled):
    with_report_command(monkeypatch)
    assert cli.main(["report", str(filled.outdir)]) == 0
    assert "report.md" in capsys.readouterr().out
    assert (filled.outdir / "report.html").stat().st_size > 1000


def test_missing_outdir(monkeypatch, capsys, tmp_path):
    with_report_command(monkeypatch)
    line = one_error_line(capsys, ["report", str(tmp_path / "nope")])
    assert "nope is not a directory" in line


def test_no_results_db(monkeypatch, capsys, tmp_path):
    with_report_command(monkeypatch)
    line = one_error_line(capsys, ["report", str(tmp_path)])
    assert line == f"error: {tmp_path} has no results.db: run `python -m orchestrator sweep FILE` first"


def test_not_a_results_database(monkeypatch, capsys, tmp_path):
    with_report_command(monkeypatch)
    with closing(sqlite3.connect(tmp_path / "results.db")) as db:
        db.execute("CREATE TABLE runs (id INTEGER)")
    line = one_error_line(capsys, ["report", str(tmp_path)])
    assert "is not a results database (missing tables: meta, episodes, turns)" in line
    assert not (tmp_path / "report.md").exists()


def test_not_sqlite_at_all(monkeypatch, capsys, tmp_path):
    with_report_command(monkeypatch)
    (tmp_path / "results.db").write_text("this is not a database, just text " * 100)
    assert "is not a readable results database" in one_error_line(capsys, ["report", str(tmp_path)])


async def test_handler_raises_config_error(tmp_path):
    with pytest.raises(ConfigError, match="has no results.db"):
        await run(argparse.Namespace(outdir=tmp_path))


def test_the_reports_replace_the_last_ones_whole_with_the_usual_permissions(filled):
    out = filled.outdir
    (out / "report.md").write_text("the last report\n")
    paths = write_report(out)
    assert [p.name for p in paths] == ["report.md", "report.html"]
    assert "the last report" not in (out / "report.md").read_text()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []  # no temporary file left
    umask = os.umask(0)
    os.umask(umask)
    assert {oct(p.stat().st_mode & 0o777) for p in paths} == {oct(0o666 & ~umask)}  # as write_text made them
