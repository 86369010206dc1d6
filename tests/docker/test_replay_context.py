"""Replay contexts in containers: each synthetic recording (tests/unit/test_replay_context.py says
how they are made) replays in its inferred context, and not in its dataset's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchestrator.cli import main
from tests.unit.test_replay_context import AGED, AGED_FS2, IN_FS1


@pytest.mark.docker
@pytest.mark.parametrize("recording", [IN_FS1, AGED, AGED_FS2],
                         ids=["fs2-tasks-in-fs1", "five-days-after-build", "thirteen-days-after-build"])
def test_each_replays_in_its_inferred_context_and_not_in_its_datasets(tmp_path: Path, data_dir: Path, recording: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / recording.name
    shutil.copy(recording, path)
    agreement = {}
    for context in ("inferred", "dataset"):
        assert main(["replay", str(path), "--data-dir", str(data_dir), "--context", context]) == 0
        printed = capsys.readouterr().out
        assert ("context: " in printed) is (context == "inferred")
        agreement[context] = float(printed.splitlines()[-1].split()[1])
    assert agreement["inferred"] >= 0.99, agreement
    assert agreement["dataset"] < 0.95, agreement
