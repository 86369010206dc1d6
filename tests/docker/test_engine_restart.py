"""An engine that restarts mid-sweep costs re-runs, never results: against a Docker engine of the
test's own (tests/second_engine.py), stopped for 3 s and for 30 s while a sweep runs, the sweep
finishes with the episodes and rewards of an uninterrupted run, stores no task error or timeout,
and leaves no container. An engine that stays away stops the sweep with one line, the run marked
`interrupted`; the next run finishes it. So does an engine that hangs: frozen (SIGSTOP), noticed by
the heartbeat within a ping's deadline, or half-hung (its create calls held by tests/engine_proxy.py
while ping answers), noticed by the call past its deadline."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT
from tests.engine_proxy import HangingProxy
from tests.second_engine import SecondEngine
from tests.docker.test_sweep_kill import results, stored
from tests.processes import ended

# An engine stopped, frozen or half-hung takes its own time to come back: ./dev test-long (5 min)
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.long]

# The images the sweep uses, and the base they were built on (an image is current only on its parent).
IMAGES = ["debian:bookworm-slim", "intercode/nl2bash-base", "intercode/starter", "intercode/sql-starter",
          "intercode/python"]
SWEEP = """
name = "restart"
output = "{out}"
strategies = ["single", "try_again"]
max_turns = 3
epochs = 2
concurrency = 16
engine_wait = {wait}
engine_timeout = {timeout}
[[models]]
name = "oracle"
[[models]]
name = "openai/sim"
local = {{ latency = 0.3, solve_rate = 0.6, seed = 7 }}
[[tasks]]
dataset = "starter-bash"
[[tasks]]
dataset = "starter-sql"
[[tasks]]
dataset = "starter-python"
[[tasks]]
dataset = "starter-ctf"
"""
TOTAL = 2 * 2 * 2 * 18
STOP_AFTER = 40  # episodes stored before the engine is stopped


@pytest.fixture(scope="module")
def second_engine() -> Iterator[SecondEngine]:
    engine = SecondEngine(Path("/var/lib/intercode-test-engine"))
    engine.start()
    try:
        engine.load(IMAGES)
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="module")
def reference(second_engine: SecondEngine, tmp_path_factory: pytest.TempPathFactory) -> list[tuple]:
    """The episodes and rewards of an uninterrupted run."""
    out = tmp_path_factory.mktemp("reference")
    process = start(sweep_file(out, wait=300), second_engine)
    _, err = ended(process, 600, log=out / "runs" / "sweep.log")
    assert process.returncode == 0, err
    rows = results(out / "runs")
    assert len(rows) == TOTAL
    return rows


def sweep_file(directory: Path, *, wait: float, timeout: float = 60.0) -> Path:
    path = directory / "sweep.toml"
    path.write_text(SWEEP.format(out=directory / "runs", wait=wait, timeout=timeout))
    return path


def start(path: Path, engine: SecondEngine | HangingProxy, *, quiet: bool = True) -> subprocess.Popen[str]:
    env = {**os.environ, "DOCKER_HOST": engine.host, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    argv = [sys.executable, "-m", "orchestrator", "sweep", str(path), "--no-report", *(["--quiet"] if quiet else [])]
    return subprocess.Popen(argv, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(process: subprocess.Popen[str], out: Path, at_least: int, deadline: float = 300.0) -> None:
    end = time.monotonic() + deadline
    while stored(out) < at_least and process.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    assert process.poll() is None, f"the sweep ended before the engine stopped: {process.communicate()[1]}"
    assert stored(out) >= at_least, f"only {stored(out)} episodes stored in {deadline:g} s"


def statuses(out: Path) -> tuple[list[str], list[str], list[int]]:
    """(episode statuses, run statuses, attempts of each episode)."""
    db = sqlite3.connect(out / "results.db")
    try:
        episodes = [s for (s,) in db.execute("SELECT status FROM episodes")]
        runs = [s for (s,) in db.execute("SELECT status FROM runs ORDER BY id")]
        attempts = [a for (a,) in db.execute("SELECT attempts FROM episodes")]
    finally:
        db.close()
    return episodes, runs, attempts


def log_events(out: Path, name: str) -> list[dict]:
    lines = (out / "sweep.log").read_text().splitlines()
    return [event for event in map(json.loads, lines) if event.get("event") == name]


@pytest.mark.parametrize("outage", [3.0, 30.0])
def test_an_engine_restart_mid_sweep_costs_re_runs_not_results(second_engine, reference, tmp_path, outage):
    out = tmp_path / "runs"
    process = start(sweep_file(tmp_path, wait=300), second_engine)
    try:
        wait_for(process, out, STOP_AFTER)
        second_engine.stop()
        time.sleep(outage)  # the outage itself: the engine is away this long
        second_engine.start()
        answering = time.time()
        _, err = ended(process, 600, log=out / "sweep.log")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    got = results(out)
    assert got == reference  # the same episodes, none twice, with the same rewards
    episode_statuses, run_statuses, attempts = statuses(out)
    assert not {"task_error", "timeout", "infra_error"} & set(episode_statuses), episode_statuses
    assert run_statuses == ["finished"]
    assert second_engine.managed_containers() == []
    lost, back = log_events(out, "engine_unreachable"), log_events(out, "engine_back")
    assert len(lost) >= 1 and len(back) == len(lost), (lost, back)
    reruns = sum(a - 1 for a in attempts)
    recovered = datetime.fromisoformat(back[-1]["timestamp"]).timestamp() - answering
    print(f"outage {outage:g} s: the sweep was waiting for {[e['after_s'] for e in back]} s and recovered "
          f"{recovered:.1f} s after the engine answered again; {reruns} re-runs of {TOTAL} episodes")


def test_an_engine_that_stays_away_stops_the_sweep_with_one_line(second_engine, reference, tmp_path):
    out = tmp_path / "runs"
    path = sweep_file(tmp_path, wait=5)
    process = start(path, second_engine, quiet=False)  # what a user at the console sees
    try:
        wait_for(process, out, STOP_AFTER)
        second_engine.stop()
        _, err = ended(process, 120, log=out / "sweep.log")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        if second_engine.process is None:
            second_engine.start()
    assert process.returncode == 2, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "has not answered for 5 s" in errors[0], err
    assert "engine_unreachable" in err and log_events(out, "engine_unreachable")  # said so while it waited
    kept = stored(out)
    episode_statuses, run_statuses, _ = statuses(out)
    assert run_statuses == ["interrupted"]
    assert not {"task_error", "timeout", "infra_error"} & set(episode_statuses), episode_statuses

    resumed = start(path, second_engine)  # the engine is back: the same command finishes the sweep
    _, err = ended(resumed, 600, log=out / "sweep.log")
    assert resumed.returncode == 0, err
    assert results(out) == reference
    assert kept >= STOP_AFTER
    assert second_engine.managed_containers() == []  # the stopped run's containers were reaped


def finished_as_the_reference(process: subprocess.Popen[str], out: Path, reference: list[tuple],
                              engine: SecondEngine) -> str:
    """Wait for the sweep; it must end as an uninterrupted run would have. Its stderr."""
    _, err = ended(process, 600, log=out / "sweep.log")
    assert process.returncode == 0 and "Traceback" not in err, err
    assert results(out) == reference
    episode_statuses, run_statuses, _ = statuses(out)
    assert not {"task_error", "timeout", "infra_error"} & set(episode_statuses), episode_statuses
    assert run_statuses == ["finished"] and engine.managed_containers() == []
    return err


def test_a_half_hung_engine_is_waited_for_and_costs_re_runs_not_results(second_engine, reference, tmp_path):
    proxy = HangingProxy(second_engine.socket, tmp_path / "proxy.sock")
    proxy.start()
    try:
        proxy.hang_at_first(20.0)  # from the first container the sweep creates: 20 s of held creates
        out = tmp_path / "runs"
        finished_as_the_reference(start(sweep_file(tmp_path, wait=300, timeout=4), proxy), out, reference,
                                  second_engine)
    finally:
        proxy.close()
    assert proxy.held >= 1 and proxy.first_held_at is not None
    lost, back = log_events(out, "engine_unreachable"), log_events(out, "engine_back")
    assert lost and "stopped answering (" in lost[0]["reason"] and "took longer than 4 s" in lost[0]["reason"]
    assert len(back) == len(lost)
    noticed = datetime.fromisoformat(lost[0]["timestamp"]).timestamp() - proxy.first_held_at
    print(f"half-hung engine: noticed {noticed:.1f} s after its first held create (deadline 4 s); "
          f"{proxy.held} requests held; back after {[e['after_s'] for e in back]} s")


def test_a_frozen_engine_is_noticed_within_a_ping_and_costs_re_runs_not_results(second_engine, reference, tmp_path):
    out = tmp_path / "runs"
    process = start(sweep_file(tmp_path, wait=300), second_engine)
    assert second_engine.process is not None
    try:
        wait_for(process, out, STOP_AFTER)
        frozen = time.time()
        os.kill(second_engine.process.pid, signal.SIGSTOP)
        time.sleep(20)
    finally:
        os.kill(second_engine.process.pid, signal.SIGCONT)
    finished_as_the_reference(process, out, reference, second_engine)
    lost = log_events(out, "engine_unreachable")
    noticed = datetime.fromisoformat(lost[0]["timestamp"]).timestamp() - frozen
    assert lost and noticed < 15, (noticed, lost)  # a ping of at most 10 s, every 2 s
    print(f"frozen engine: noticed {noticed:.1f} s after SIGSTOP ({lost[0]['reason']})")
