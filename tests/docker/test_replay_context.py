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


@pytest.mark.docker
async def test_the_bases_logs_are_as_old_as_the_context_says(docker, data_dir: Path) -> None:
    """A context whose file ages are unknown still dates the base's logs (the system's, older than
    any set-up): `find /var/log -mtime +1` lists them, as every fs1 recording that asks saw it."""
    import time
    from dataclasses import replace

    from environments import make_environment
    from environments.file_ages import META, FileAges
    from orchestrator.fidelity.replay_context import BASE, BASE_AGE
    from tasks import load_tasks
    from tests.conftest import clean_runtime

    task = load_tasks("nl2bash-fs1", data_dir=data_dir)[46]
    ages = FileAges((), time.time_ns(), 0, 0, BASE, int(BASE_AGE.total_seconds()) * 10**9)
    aged = replace(task, meta={**task.meta, META: ages.as_meta()})
    async with clean_runtime(docker, task.image) as runtime, make_environment("bash", runtime) as env:
        await env.reset(aged)
        listed = (await env.step("find /var/log -type f -mtime +28 -mtime -32 | sort")).observation.split()
        assert "/var/log/dpkg.log" in listed and "/var/log/apt/history.log" in listed, listed
        assert (await env.step("find /var/log -newer /testbed | wc -l")).observation.strip() == "0"
