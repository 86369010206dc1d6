"""A sweep SIGKILLed at any point and run again ends with exactly the episodes of an
uninterrupted run: none missing, none twice, the same results, and no container left behind."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.processes import ended

from foundation.settings import PROJECT_ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SWEEP = """
name = "killed"
output = "{out}"
strategies = ["try_again"]
epochs = 3
max_turns = 3
concurrency = 16
[[models]]
name = "oracle"
[[models]]
name = "openai/sim"
local = {{ latency = 0.1, solve_rate = 0.5, seed = 3 }}
[[tasks]]
dataset = "starter-bash"
[[tasks]]
dataset = "starter-sql"
[[tasks]]
dataset = "starter-python"
[[tasks]]
dataset = "starter-ctf"
"""
TOTAL = 2 * 3 * 18


def start(path: Path) -> subprocess.Popen:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "sweep", str(path), "--quiet", "--no-report"],
                            cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stored(out: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{out / 'results.db'}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return 0
    try:
        return db.execute("SELECT count(*) FROM episodes").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def results(out: Path) -> list[tuple]:
    db = sqlite3.connect(out / "results.db")
    try:
        return db.execute("SELECT model, strategy, task_set, task_id, epoch, status, reward, success, n_turns "
                          "FROM episodes ORDER BY 1, 2, 3, 4, 5").fetchall()
    finally:
        db.close()


def containers_of(pid: int) -> list[str]:
    labels = subprocess.run(["docker", "ps", "-a", "--format", '{{.ID}} {{.Label "intercode.owner"}}'],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return [line.split()[0] for line in labels if f":{pid}:" in line]


def sweep_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(SWEEP.format(out=tmp_path / name))
    return path


def kill_when(process: subprocess.Popen, out: Path, at_least: int, deadline: float = 120.0) -> None:
    """SIGKILL the sweep once `at_least` episodes are stored (0: as soon as it has started)."""
    end = time.monotonic() + deadline
    while stored(out) < at_least and process.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    assert process.poll() is None, f"the sweep ended before the kill: {process.stderr.read() if process.stderr else ''}"
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()
    process.stderr.close()


@pytest.mark.alone  # another process's pool start would reap what this test counts
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path):
    reference = start(sweep_file(tmp_path, "reference"))
    _, err = ended(reference, 600, log=tmp_path / "reference" / "sweep.log")
    assert reference.returncode == 0, err
    expected = results(tmp_path / "reference")
    assert len(expected) == TOTAL

    path, out = sweep_file(tmp_path, "resumed"), tmp_path / "resumed"
    first = start(path)
    time.sleep(1.0)
    kill_when(first, out, 0)  # during start-up
    second = start(path)
    kill_when(second, out, 30)  # mid-run, with episodes in flight
    left_by_kill = containers_of(second.pid)
    assert stored(out) < TOTAL

    final = start(path)
    _, err = ended(final, 600, log=out / "sweep.log")
    assert final.returncode == 0, err
    got = results(out)
    assert len(got) == len({row[:5] for row in got}) == TOTAL  # no duplicates, none missing
    assert got == expected  # and the same outcomes
    db = sqlite3.connect(out / "results.db")
    statuses = [s for (s,) in db.execute("SELECT status FROM runs ORDER BY id")]
    db.close()
    assert statuses[-1] == "finished" and statuses[:-1] == ["killed"] * (len(statuses) - 1)
    for pid in (first.pid, second.pid, final.pid, reference.pid):
        assert containers_of(pid) == []  # the killed runs' containers were reaped at the next start
    assert left_by_kill, "the mid-run kill should have stranded containers for the next start to reap"
