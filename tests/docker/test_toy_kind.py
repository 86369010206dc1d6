"""A new environment kind, defined in this module alone (no edit anywhere else), runs through a
strategy, a sweep, export and replay: the kind spec is the one seam a kind needs.

The toy kind is a calculator: an action is an arithmetic expression, its observation the value;
`submit` scores 1 when the last value is the task's gold. It needs no container (image "").
"""

from __future__ import annotations

import json

import pytest

from orchestrator.cli import main
from orchestrator.fidelity.trajectories import read_episodes
from tests.unit.test_toy_kind import SUMS, toy_tasks  # noqa: F401 — toy_tasks: the fixture


@pytest.mark.docker
def test_a_sweep_exports_and_replays_the_toy_kind(toy_tasks, tmp_path, data_dir, capsys):
    sweep = tmp_path / "toy.toml"
    sweep.write_text(f'name = "toy"\noutput = "{tmp_path / "out"}"\nstrategies = ["try_again", "single"]\n'
                     '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "toy-sums"\n')
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "out"), "--to", str(tmp_path / "export")]) == 0
    files = sorted((tmp_path / "export").rglob("*.json"))
    assert files, "nothing exported"
    episodes = [e for f in files for e in read_episodes(f)]
    assert {e.kind for e in episodes} == {"toy"} and len(episodes) == 2 * len(SUMS)
    assert all(json.loads(f.read_text()) for f in files)
    out = tmp_path / "replay.json"
    assert main(["replay", *map(str, files), "--data-dir", str(data_dir), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "agreement: 1.000" in printed, printed
