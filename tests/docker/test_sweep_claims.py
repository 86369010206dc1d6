"""What a sweep may claim: nothing before the whole file is checked, nothing of another sweep's.

A refused model, a missing key, or task indices the dataset does not have are refused before the
output directory holds a store, so the fixed file runs there. Two sweeps on one engine, each a
fresh directory's first run, keep apart: the one that ends first removes only its own containers.
Starter sets run beside benchmark sets, with a data dir set.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT
from tests.docker.test_sweep import one_error_line, our_containers, rows, sweep, sweep_file
from tests.docker.test_sweep_kill import results, stored
from tests.processes import ended

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ORACLE = '[[models]]\nname = "oracle"\n'


@pytest.mark.parametrize(("body", "top", "expected"), [
    ('[[models]]\nname = "no-such-model-xyz"\n', {}, "unknown model 'no-such-model-xyz'"),
    ('[[models]]\nname = "openai/gpt-4o"\napi_key_env = "NOPE_KEY"\n', {}, "NOPE_KEY (api_key_env) is not set"),
    (ORACLE, {"tasks": "starter-bash", "indices": [1, 99]}, "starter-bash has no task 99 (its indices are 0 to 4)"),
    (ORACLE, {"tasks": "starter-bash", "filter": "no such words"}, "matches no task of starter-bash"),
])
def test_a_refused_file_claims_no_output_directory(tmp_path, capsys, monkeypatch, body, top, expected):
    monkeypatch.delenv("NOPE_KEY", raising=False)
    tasks = top.pop("tasks", "starter-bash")
    path = sweep_file(tmp_path, body, tasks=tasks)
    if top:  # task-set keys go into the (only) [[tasks]] table
        path.write_text(path.read_text() + "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in top.items()))
    assert sweep(path) == 2
    assert expected in one_error_line(capsys)
    assert not (tmp_path / "out" / "results.db").exists()
    fixed = sweep_file(tmp_path, ORACLE, tasks="starter-bash")  # the same name and output, fixed
    assert sweep(fixed) == 0
    assert rows(tmp_path / "out", "SELECT count(*), sum(success) FROM episodes") == [(5, 5)]


def test_starter_sets_run_beside_benchmark_sets_with_a_data_dir(tmp_path, data_dir):
    path = sweep_file(tmp_path, ORACLE, tasks="starter-ctf,starter-bash,nl2bash-fs1")
    path.write_text(re.sub(r'(dataset = "[^"]+"\n)', r"\1limit = 2\n", path.read_text()))
    assert sweep(path, "--data-dir", data_dir) == 0
    got = rows(tmp_path / "out", "SELECT task_set, count(*), sum(success), sum(status = 'task_error') FROM episodes "
                                 "GROUP BY task_set ORDER BY task_set")
    assert got == [("nl2bash-fs1", 2, 2, 0), ("starter-bash", 2, 2, 0), ("starter-ctf", 2, 2, 0)]
    assert our_containers() == []


TWO = """
name = "{name}"
output = "{out}"
strategies = ["try_again"]
max_turns = 3
epochs = {epochs}
concurrency = 4
[[models]]
name = "oracle"
[[models]]
name = "openai/sim"
local = {{ latency = {latency}, solve_rate = 0.6, seed = 7 }}
[[tasks]]
dataset = "starter-bash"
[[tasks]]
dataset = "starter-python"
"""


def start(directory: Path, name: str, *, epochs: int, latency: float) -> tuple[subprocess.Popen[str], Path]:
    directory.mkdir(exist_ok=True)
    out = directory / name
    path = directory / f"{name}.toml"
    path.write_text(TWO.format(name=name, out=out, epochs=epochs, latency=latency))
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "sweep", str(path), "--quiet", "--no-report"],
                               cwd=PROJECT_ROOT, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, out


def finish(process: subprocess.Popen[str]) -> None:
    _, err = ended(process, 600)
    assert process.returncode == 0, err


def attempts(out: Path) -> list[int]:
    db = sqlite3.connect(out / "results.db")
    try:
        return [a for (a,) in db.execute("SELECT attempts FROM episodes")]
    finally:
        db.close()


@pytest.mark.alone  # another process's pool start would reap what this test counts
@pytest.mark.long  # two whole sweeps (45 s): ./dev test-long, which runs one test at a time
def test_two_sweeps_on_one_engine_keep_their_containers_apart(tmp_path):
    reference, reference_out = start(tmp_path / "ref", "long", epochs=5, latency=0.0)  # latency changes no result
    finish(reference)
    expected = results(reference_out)

    long_run, long_out = start(tmp_path, "long", epochs=5, latency=1.0)
    end = time.monotonic() + 120
    while stored(long_out) < 10 and long_run.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    short_run, short_out = start(tmp_path, "short", epochs=1, latency=0.0)  # its first run too: run 1
    finish(short_run)  # its pool closes while the long sweep's containers are in use
    reap = subprocess.run([sys.executable, "-m", "orchestrator", "pool", "reap"], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert reap.returncode == 0 and "removed 0 orphaned" in reap.stdout, reap
    assert long_run.poll() is None, "the long sweep ended before the short one: make it longer"
    finish(long_run)
    assert results(long_out) == expected
    assert set(attempts(long_out)) == {1}  # none of its containers was taken from under it
    assert len(results(short_out)) == 2 * 10
    assert our_containers() == []
