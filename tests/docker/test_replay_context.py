"""Replay contexts: each NL2Bash recording replays in the world its observations show it ran in,
the container (file system) and the file ages at recording, inferred from observations alone.

The recordings are synthetic, in eval_n_turn.py's shape, made by emulating the original's harness
in worlds unlike their dataset's (tests/fixtures/replay/make_recordings.py says how): file system
2's tasks run in file system 1; file system 3's recorded five days after its image's build and
file system 2's thirteen days after, under another clock (libfaketime's), with `find -mtime`,
`-atime`, `ls -l` and `ls -t` turns, and golds that delete by age.
"""

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
