"""`nightly`: the history, baselines, quarantine and flaky tasks; then one real two-night run in Docker.

The first tests drive `conclude` (everything a night does after its sweep) with results
databases built by hand, so the expected verdicts are known exactly. The last test runs the whole
command twice against the real engine with offline models; see its docstring for how a task's
"image drift" is produced honestly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.nightly.history import History
from orchestrator.store.results import load_results

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
