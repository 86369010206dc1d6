"""`nightly`: the history, baselines, quarantine and flaky tasks; then one real two-night run in Docker.

The first tests drive `conclude` (everything a night does after its sweep) with results
databases built by hand, so the expected verdicts are known exactly. The last test runs the whole
command twice against the real engine with offline models; see its docstring for how a task's
"image drift" is produced honestly.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.nightly.compare import CompareSettings
from orchestrator.nightly.flaky import FlakySettings, find_flaky, night_outcomes
from orchestrator.nightly.gate import GateResult, broken_tasks, gate_config
from orchestrator.nightly.history import History
from orchestrator.nightly.nightly import NightlyOptions, conclude
from orchestrator.nightly.outcomes import TaskOutcome, from_episodes
from orchestrator.store.records import EpisodeKey
from orchestrator.store.results import load_results
from orchestrator.sweep.config import load_sweep
from tests.unit import test_compare
from tests.unit.test_compare import CELL

make_run = test_compare.make_run  # the results.db factory fixture, shared

DAY = 86_400.0
SOLVED = set(random.Random(2).sample(range(200), 120))


def night(make_run, history: Path, n: int, solved: set[int], *, broken: dict[tuple[str, str], str] | None = None,
          exclude_flaky: bool = False, tasks: int = 200):
    """One constructed night: its results.db, a gate result, then `conclude` as the command would."""
    run = make_run(f"night{n}").fill(solved, n=tasks)
    outcomes = from_episodes(load_results(run.outdir).episodes)
    gate = GateResult(tasks, broken or {}, run.outdir / "oracle-gate")
    options = NightlyOptions(history=history, output=run.outdir, compare=CompareSettings(resamples=2000),
                             flaky=FlakySettings(window=7, min_flips=2), exclude_flaky=exclude_flaky)
    return conclude("nightly-demo", 1_700_000_000 + n * DAY, run.outdir, gate, outcomes, options)


def test_first_night_passes_and_a_later_drop_fails_against_the_last_good_night(make_run, tmp_path):
    history = tmp_path / "history.db"
    first = night(make_run, history, 1, SOLVED)
    assert first.exit_code == 0 and first.report.comparison is None
    lost = set(sorted(SOLVED)[:20])
    second = night(make_run, history, 2, SOLVED - lost)
    assert second.exit_code == 1 and second.report.status == "regression"
    (cell,) = second.report.comparison.cells
    assert {t for t, _ in cell.pass_to_fail} == {f"nl2bash/{i}" for i in lost}
    # Night 3 equals night 2: still a regression, because the baseline stays night 1 (the last good one).
    third = night(make_run, history, 3, SOLVED - lost)
    assert third.exit_code == 1 and third.report.baseline.startswith(f"night {first.night_id} ")
    with History.open(history) as h:
        assert [n.status for n in h.nights("nightly-demo")] == ["passed", "regression", "regression"]
        assert h.cells(first.night_id)[0].success_rate == pytest.approx(0.6)
    md = (tmp_path / "night3" / "nightly.md").read_text()
    assert "Status: **regression**" in md and "nl2bash/" in md


def test_a_broken_task_is_quarantined_not_blamed_on_the_model(make_run, tmp_path):
    """Constructed: 20 tasks lose their gold tonight (the gate says so) and the model fails them.
    Without the gate's word this is the 10-point drop above; with it, the night passes."""
    history = tmp_path / "history.db"
    night(make_run, history, 1, SOLVED)
    lost = sorted(SOLVED)[:20]
    broken = {("fs1", f"nl2bash/{i}"): "gold scored 0.00 (submitted)" for i in lost}
    second = night(make_run, history, 2, SOLVED - set(lost), broken=broken)
    assert second.exit_code == 0 and second.report.status == "passed"
    (cell,) = second.report.comparison.cells
    assert cell.pass_to_fail == () and cell.pairs == 180
    assert set(cell.excluded["broken"]) == {f"nl2bash/{i}" for i in lost}
    md = (tmp_path / "night2" / "nightly.md").read_text()
    assert "broken: 20" in md and "gold scored 0.00" in md
    with History.open(history) as h:
        assert len(h.broken(second.night_id)) == 20
        assert h.cells(second.night_id)[0].n == 180  # the trend ignores the quarantined tasks too


def test_broken_tasks_are_those_whose_gold_missed(make_run):
    run = make_run("gate")
    run.add("nl2bash/0", 1.0)
    run.add("nl2bash/1", 0.5)
    run.add("nl2bash/2", 0.0, infra=True)
    run.db.commit()
    broken = broken_tasks(load_results(run.outdir).episodes)
    assert set(broken) == {("fs1", "nl2bash/1"), ("fs1", "nl2bash/2")}
    assert "0.50" in broken["fs1", "nl2bash/1"] and "infra" in broken["fs1", "nl2bash/2"]


def test_gate_config_is_the_gold_once_in_strict_mode(tmp_path):
    config, _ = load_sweep(Path(cli.__file__).parent.parent / "examples" / "quickstart.toml")
    gate = gate_config(config, tmp_path / "gate")
    assert [m.name for m in gate.models] == ["oracle"] and gate.strategies == ["single"]
    assert (gate.max_turns, gate.epochs, gate.reward_mode) == (1, 1, "strict")
    assert gate.tasks == config.tasks and gate.output == tmp_path / "gate"


def test_flaky_tasks_are_found_and_can_be_left_out(make_run, tmp_path):
    """Task 0 flips every night; tonight it and 9 steady tasks fail. Kept in, McNemar sees 10 losses."""
    history = tmp_path / "history.db"
    steady = set(range(1, 101))
    for n in range(1, 5):
        night(make_run, history, n, steady | ({0} if n % 2 else set()), tasks=150)  # 0 passes on odd nights
    lost = set(range(1, 10))
    kept = night(make_run, history, 5, steady - lost, tasks=150)
    assert ((CELL, "nl2bash/0") in kept.report.flaky) and kept.report.flaky[CELL, "nl2bash/0"] >= 2
    assert kept.exit_code == 1
    excluded = night(make_run, history, 6, steady - lost, exclude_flaky=True, tasks=150)
    (cell,) = excluded.report.comparison.cells
    assert cell.excluded.get("flaky") == ("nl2bash/0",)
    assert "left out of the verdicts" in (tmp_path / "night6" / "nightly.md").read_text()


def test_flips_count_only_nights_that_ran_the_task():
    key = (CELL, "t/1")
    nights = [{key: True}, {}, {key: True}, {key: False}, {key: True}]
    assert find_flaky(nights, FlakySettings(window=7, min_flips=2)) == {key: 2}
    assert find_flaky(nights, FlakySettings(window=2, min_flips=2)) == {}
    outcomes = [TaskOutcome(EpisodeKey(*CELL, "t/1", e), e < 2, 1.0) for e in range(3)] + [TaskOutcome(EpisodeKey(*CELL, "t/2", 0), False, 0.0, True)]
    assert night_outcomes(outcomes) == {key: True}



def test_a_bad_history_file_is_one_line_before_any_sweep(tmp_path, capsys):
    bad = tmp_path / "history.db"
    bad.write_text("not a database, but long enough to have a header. " * 4)
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'name = "x"\noutput = "{tmp_path / "runs"}"\nstrategies = ["single"]\n'
                     '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "starter-bash"\n')
    saved = cli.COMMAND_MODULES
    assert "orchestrator.nightly.cli" in saved
    try:
        assert cli.main(["nightly", str(sweep), "--history", str(bad), "--output", str(tmp_path / "n")]) == 2
    finally:
        cli.COMMAND_MODULES = saved
    err = capsys.readouterr().err
    assert "is not a nightly history database" in err and "Traceback" not in err
    assert not (tmp_path / "n" / "oracle-gate").exists()
