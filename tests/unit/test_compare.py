"""`compare BASELINE CURRENT` on results databases built by hand from the real schema (no Docker).

The runs are constructed so the right answer is known: a true 10-point drop on 200 tasks, two
identical runs, and noise (a few tasks flipping each way). The tests also check the exit codes,
the flipped-task lists and the one-line errors for bad inputs.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from foundation.errors import ConfigError
from orchestrator import cli
from orchestrator.nightly.cli import run_compare, write_comparison
from orchestrator.nightly.compare import CompareSettings, Exclusions, compare
from orchestrator.nightly.outcomes import TaskOutcome
from orchestrator.store.records import EpisodeKey

SCHEMA = Path(cli.__file__).parent / "store" / "schema.sql"
MODULE = "orchestrator.nightly.cli"
CELL = ("gpt", "single", "fs1")


class RunDB:
    """A sweep output directory whose results.db holds the episodes we say, nothing else."""

    def __init__(self, outdir: Path, sweep: str = "nightly-demo") -> None:
        outdir.mkdir(parents=True)
        self.outdir, self.sweep = outdir, sweep
        self.db = sqlite3.connect(outdir / "results.db")
        self.db.executescript(SCHEMA.read_text())
        self.db.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", "1"), ("sweep", sweep)])
        self.run_id = self.db.execute(
            "INSERT INTO runs (sweep, identity, sweep_hash, git_sha, config_json, host, started_at, finished_at,"
            " status) VALUES (?, 'ident', 'h', NULL, '{}', 'testhost', 1.0, 2.0, 'finished')", (sweep,)).lastrowid
        self.db.commit()

    def add(self, task_id: str, reward: float, *, cell: tuple[str, str, str] = CELL, epoch: int = 0,
            infra: bool = False) -> None:
        model, strategy, task_set = cell
        self.db.execute(
            "INSERT INTO episodes (run_id, sweep, model, strategy, task_set, task_id, epoch, env, dataset, task_index,"
            " query, gold, status, failure_class, reward, success, n_turns, max_turns, attempts, image, started_at,"
            " finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'bash', 'nl2bash', 0, 'q', 'g', ?, ?, ?, ?, 1, 1, 1,"
            " 'intercode/bash', 1.0, 2.0)",
            (self.run_id, self.sweep, model, strategy, task_set, task_id, epoch,
             "infra_error" if infra else "solved" if reward == 1 else "submitted", "infra" if infra else None,
             reward, int(reward == 1)))

    def fill(self, solved: set[int], n: int = 200, **kwargs) -> RunDB:
        for i in range(n):
            self.add(f"nl2bash/{i}", 1.0 if i in solved else 0.0, **kwargs)
        self.db.commit()
        return self

    def close(self) -> None:
        self.db.close()


@pytest.fixture
def make_run(tmp_path) -> Iterator[Callable[..., RunDB]]:
    made: list[RunDB] = []

    def factory(name: str, **kwargs) -> RunDB:
        made.append(RunDB(tmp_path / name, **kwargs))
        return made[-1]

    yield factory
    for run in made:
        run.close()


def args(baseline: Path, current: Path, **extra) -> argparse.Namespace:
    values = {"alpha": 0.05, "min_effect": 0.0, "resamples": 2000, "out": None} | extra
    return argparse.Namespace(baseline=baseline, current=current, **values)


SOLVED = set(random.Random(1).sample(range(200), 120))  # a 60% baseline


async def test_true_drop_of_ten_points_is_a_regression(make_run, capsys):
    lost = set(sorted(SOLVED)[:20])  # 20 of 200 tasks: -10 points
    base = make_run("base").fill(SOLVED)
    cur = make_run("cur").fill(SOLVED - lost)
    assert await run_compare(args(base.outdir, cur.outdir)) == 1
    out = capsys.readouterr().out
    assert "regression" in out and "-10.0 pts" in out
    md = (cur.outdir / "compare-base.md").read_text()
    html = (cur.outdir / "compare-base.html").read_text()
    for task in (f"nl2bash/{i}" for i in lost):
        assert task in md and task in html
    assert "pass→fail" in md and "fail→pass" not in md.split("### Flipped tasks")[1]


async def test_identical_runs_are_no_change(make_run, capsys):
    base = make_run("base").fill(SOLVED)
    cur = make_run("cur").fill(SOLVED)
    assert await run_compare(args(base.outdir, cur.outdir)) == 0
    assert "no change" in capsys.readouterr().out
    assert "None." in (cur.outdir / "compare-base.md").read_text()


async def test_noise_both_ways_is_no_change(make_run):
    """Three tasks lost and two gained out of 200: what a re-run of a sampling model looks like."""
    ordered = sorted(SOLVED)
    unsolved = sorted(set(range(200)) - SOLVED)
    lost, gained = set(ordered[:3]), set(unsolved[:2])
    base = make_run("base").fill(SOLVED)
    cur = make_run("cur").fill((SOLVED - lost) | gained)
    comparison, _ = write_comparison(base.outdir, cur.outdir, None, CompareSettings(resamples=2000))
    (cell,) = comparison.cells
    assert cell.verdict == "no change"
    assert {t for t, _ in cell.pass_to_fail} == {f"nl2bash/{i}" for i in lost}
    assert {t for t, _ in cell.fail_to_pass} == {f"nl2bash/{i}" for i in gained}
    assert cell.success_points == pytest.approx(-0.5)
    assert await run_compare(args(base.outdir, cur.outdir)) == 0


async def test_an_improvement_is_not_a_failure(make_run, capsys):
    unsolved = sorted(set(range(200)) - SOLVED)
    base = make_run("base").fill(SOLVED)
    cur = make_run("cur").fill(SOLVED | set(unsolved[:25]))
    assert await run_compare(args(base.outdir, cur.outdir)) == 0
    assert "improvement" in capsys.readouterr().out


async def test_min_effect_holds_back_a_small_significant_drop(make_run, tmp_path):
    lost = set(sorted(SOLVED)[:12])  # -6 points, significant (12 vs 0 discordant pairs)
    base = make_run("base").fill(SOLVED)
    cur = make_run("cur").fill(SOLVED - lost)
    out = tmp_path / "reports"
    assert await run_compare(args(base.outdir, cur.outdir, out=out)) == 1
    assert await run_compare(args(base.outdir, cur.outdir, out=out, min_effect=8.0)) == 0
    assert (out / "compare-base.md").is_file() and (out / "compare-base.html").is_file()


def test_a_partial_reward_drop_is_caught_by_the_bootstrap():
    """Success never changes (rewards stay below 1), so only the bootstrap on mean reward can see it."""
    base = [TaskOutcome(EpisodeKey(*CELL, f"t/{i}", 0), False, 0.8) for i in range(100)]
    cur = [TaskOutcome(EpisodeKey(*CELL, f"t/{i}", 0), False, 0.5) for i in range(100)]
    (cell,) = compare(base, cur, CompareSettings(resamples=1000)).cells
    assert cell.mcnemar_p == 1.0 and cell.reward is not None
    assert cell.reward.difference == pytest.approx(-0.3)
    assert cell.verdict == "regression"


def test_pairs_on_task_and_epoch_and_skips_infra_and_exclusions():
    base = [TaskOutcome(EpisodeKey(*CELL, "t/1", e), True, 1.0) for e in range(3)] + [TaskOutcome(EpisodeKey(*CELL, "t/2", 0), True, 1.0),
                                                                       TaskOutcome(EpisodeKey(*CELL, "t/3", 0), True, 1.0)]
    cur = [TaskOutcome(EpisodeKey(*CELL, "t/1", e), e != 1, float(e != 1)) for e in range(3)] + [
        TaskOutcome(EpisodeKey(*CELL, "t/2", 0), False, 0.0, infra=True), TaskOutcome(EpisodeKey(*CELL, "t/3", 0), False, 0.0),
        TaskOutcome(EpisodeKey(*CELL, "t/4", 0), True, 1.0)]
    (cell,) = compare(base, cur, CompareSettings(resamples=100), Exclusions(broken=frozenset({("fs1", "t/3")}))).cells
    assert cell.pairs == 3 and cell.pass_to_fail == (("t/1", 1),)
    assert cell.unpaired == 2  # t/2 (infra) and t/4 (current only)
    assert cell.excluded == {"broken": ("t/3",)}


async def test_cells_in_one_run_only_are_listed_not_compared(make_run):
    base = make_run("base").fill(SOLVED, n=20)
    base.fill(SOLVED, n=20, cell=("gpt", "react", "fs1"))
    cur = make_run("cur").fill(SOLVED, n=20)
    comparison, (md, _) = write_comparison(base.outdir, cur.outdir, None, CompareSettings(resamples=200))
    assert [c.cell for c in comparison.cells] == [CELL]
    assert comparison.only_baseline == [("gpt", "react", "fs1")]
    assert "only in the baseline" in md.read_text()


def test_bad_inputs_are_one_line_and_exit_2(make_run, tmp_path, capsys):
    base = make_run("base").fill(SOLVED, n=10)
    other = make_run("other").fill(SOLVED, n=10, cell=("llama", "single", "fs2"))
    (tmp_path / "empty").mkdir()
    cases = {str(tmp_path / "missing"): "is not a directory", str(tmp_path / "empty"): "has no results.db",
             str(other.outdir): "no model × strategy × task set in common"}
    saved = cli.COMMAND_MODULES
    assert MODULE in saved
    try:
        for current, message in cases.items():
            assert cli.main(["compare", str(base.outdir), current]) == 2
            err = capsys.readouterr().err
            assert message in err and err.count("\n") == 1 and "Traceback" not in err
        assert cli.main(["compare", str(base.outdir), str(base.outdir), "--alpha", "2"]) == 2
        assert "--alpha" in capsys.readouterr().err
    finally:
        cli.COMMAND_MODULES = saved
    with pytest.raises(ConfigError):
        write_comparison(base.outdir, other.outdir, None, CompareSettings())
