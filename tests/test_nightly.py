"""`nightly`: the history, baselines, quarantine and flaky tasks; then one real two-night run in Docker.

The first tests drive `conclude` (everything a night does after its sweep) with results
databases built by hand, so the expected verdicts are known exactly. The last test runs the whole
command twice against the real engine with offline models; see its docstring for how a task's
"image drift" is produced honestly.
"""

from __future__ import annotations

import json
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
from orchestrator.store.results import load_results
from orchestrator.sweep.config import load_sweep
from tests import test_compare
from tests.test_compare import CELL

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
    outcomes = [TaskOutcome(*CELL, "t/1", e, e < 2, 1.0) for e in range(3)] + [TaskOutcome(*CELL, "t/2", 0, False, 0.0, True)]
    assert night_outcomes(outcomes) == {key: True}


# ---------------------------------------------------------------------------------------------- Docker

PYTHON_STARTER = Path(cli.__file__).parent.parent / "tasks" / "starter" / "python.json"
DRIFT = "sum = lambda *args, **kwargs: -1  # the image's runtime changed under the task"


@pytest.fixture
def drifting_dataset(tmp_path, monkeypatch):
    """A starter-format dataset `nightly-py` in a temp file: the five starter Python tasks. The test
    rewrites the file between nights; the registry entry is removed afterwards (monkeypatch)."""
    from tasks.registry import DATASETS, DatasetInfo

    path = tmp_path / "nightly-py.json"
    # An absolute `path` wins over the starter directory in `STARTER_DIR / info.path`.
    monkeypatch.setitem(DATASETS, "nightly-py", DatasetInfo("nightly-py", "python", "intercode/python", str(path),
                                                             starter=True))
    tasks = json.loads(PYTHON_STARTER.read_text())

    def write(drifted: set[int]) -> None:
        records = [{**t, "test_setup_code": DRIFT} if i in drifted else t for i, t in enumerate(tasks)]
        path.write_text(json.dumps(records))

    write(set())
    return write


@pytest.mark.docker
@pytest.mark.slow
def test_real_nightly_quarantines_a_drifted_task(tmp_path, drifting_dataset, capsys):
    """Two real nights over the starter Python tasks (real containers, the real oracle gate, an
    offline model that answers every gold), scored in strict mode.

    How the drift is produced: we may not change the project's images or tasks/, and retagging a
    shared image would break other runs on this engine. So the task set is a temp copy of the
    starter Python tasks, and on night 2 tasks 0 and 3 get set-up code that rebinds `sum`, which
    both golds call: inside the real container their gold now fails its own tests, exactly as
    when an upgraded library changes behaviour under an unchanged task. The gate must find both,
    and the model, which fails them too (4 epochs: 8 lost pairs, a significant drop on its own,
    as `compare` of the two nights shows), must not be blamed.
    """
    sweep = tmp_path / "nightly.toml"
    sweep.write_text(f'name = "nightly-docker"\noutput = "{tmp_path / "runs"}"\nstrategies = ["single"]\n'
                     'max_turns = 1\nepochs = 4\nconcurrency = 4\nreward_mode = "strict"\n'
                     '[[models]]\nname = "openai/local-sim"\nlocal = { solve_rate = 1.0, seed = 1 }\n'
                     '[[tasks]]\ndataset = "nightly-py"\n')
    history = tmp_path / "history.db"
    saved = cli.COMMAND_MODULES
    assert "orchestrator.nightly.cli" in saved
    try:
        def nightly(n: int) -> int:
            return cli.main(["nightly", str(sweep), "--history", str(history), "--output", str(tmp_path / f"n{n}")])

        assert nightly(1) == 0
        drifting_dataset({0, 3})
        assert nightly(2) == 0
        # Without the gate the same two nights are a regression: the quarantine is what saved the model.
        assert cli.main(["compare", str(tmp_path / "n1"), str(tmp_path / "n2")]) == 1
    finally:
        cli.COMMAND_MODULES = saved
    gate = load_results(tmp_path / "n2" / "oracle-gate")
    assert {e.task_id for e in gate.episodes if e.reward < 1} == {"nightly-py/0", "nightly-py/3"}
    assert all(e.reward == 1 for e in load_results(tmp_path / "n1" / "oracle-gate").episodes)
    md = (tmp_path / "n2" / "nightly.md").read_text()
    assert "Status: **passed**" in md and "broken: 2" in md
    assert "nightly-py/0" in md and "nightly-py/3" in md
    with History.open(history) as h:
        first, second = h.nights("nightly-docker")
        assert (first.status, second.status, second.baseline_id) == ("passed", "passed", first.id)
        assert set(h.broken(second.id)) == {("nightly-py", "nightly-py/0"), ("nightly-py", "nightly-py/3")}
        assert h.cells(second.id)[0].success_rate == 1.0 and h.cells(second.id)[0].n == 12



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
