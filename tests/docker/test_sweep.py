"""Sweeps against the real engine: the quickstart, resume, 300+ episodes at concurrency 128,
infrastructure re-runs, time limits, export, and every bad input as one line."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from foundation.pool.ownership import Owner
from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.fidelity.trajectories import read_episodes
from orchestrator.store.export import HARNESS
from tasks import load_tasks
from tests.stores import rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

QUICKSTART = PROJECT_ROOT / "examples" / "quickstart.toml"


def sweep_file(tmp_path: Path, body: str, *, name: str = "t", tasks: str = "starter-bash", **top: object) -> Path:
    head = "".join(f"{k} = {json.dumps(v)}\n" for k, v in {"name": name, "output": str(tmp_path / "out"),
                                                            "strategies": ["single"], **top}.items())
    task_blocks = "".join(f'[[tasks]]\ndataset = "{t}"\n' for t in tasks.split(","))
    path = tmp_path / f"{name}.toml"
    path.write_text(head + body + task_blocks)
    return path


def sweep(*args: str | Path) -> int:
    return main(["sweep", *map(str, args), "--quiet"])


@contextlib.contextmanager
def container_killer(command: str) -> Iterator[None]:
    """While the block runs, a thread kills (from outside, as the engine's failure would) every
    container of this process's pools that runs `command`."""
    stop = threading.Event()

    def kill() -> None:
        while not stop.wait(0.2):
            for container in our_containers():
                top = subprocess.run(["docker", "top", container], capture_output=True, text=True).stdout
                if command in top:
                    subprocess.run(["docker", "kill", container], capture_output=True)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def our_containers() -> list[str]:
    """Containers this test process's pools made (other processes may be running their own)."""
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=intercode.owner={Owner.me()}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_the_quickstart_runs_then_a_second_run_only_reports(tmp_path, capsys):
    out = tmp_path / "quick"
    assert sweep(QUICKSTART, "--output", out) == 0
    assert rows(out, "SELECT count(*), count(DISTINCT model || strategy || task_set || task_id || epoch) FROM episodes") == [(72, 72)]
    assert rows(out, "SELECT model, sum(success), count(*) FROM episodes GROUP BY model ORDER BY model") == [
        ("openai/local-sim", 28, 36), ("oracle", 36, 36)]
    # lineage: the image each episode ran on, the provider's model name, the commit, the file's hash
    assert rows(out, "SELECT count(*) FROM episodes WHERE image_digest LIKE 'sha256:%'") == [(72,)]
    assert rows(out, "SELECT DISTINCT served_model FROM episodes WHERE model LIKE 'openai/%'") == [("local-sim",)]
    (git_sha, sweep_hash, status), = rows(out, "SELECT git_sha, sweep_hash, status FROM runs")
    assert len(git_sha) >= 40 and len(sweep_hash) == 64 and status == "finished"
    assert rows(out, "SELECT count(*) FROM llm_calls") == rows(out, "SELECT count(*) FROM turns t JOIN episodes e "
                                                                    "ON e.id = t.episode_id WHERE e.model != 'oracle'")
    assert rows(out, "SELECT DISTINCT cost_usd FROM episodes WHERE model = 'oracle'") == [(0.0,)]  # no call, nothing paid
    assert (out / "report.html").is_file() and (out / "sweep.log").is_file()
    assert all(json.loads(line)["event"] for line in (out / "sweep.log").read_text().splitlines())
    assert sweep(QUICKSTART, "--output", out) == 0  # the same sweep again: nothing to run
    assert rows(out, "SELECT count(*) FROM episodes") == [(72,)]
    assert rows(out, "SELECT count(*), sum(status = 'finished') FROM runs") == [(2, 2)]
    assert "72/72 episodes stored (0 this run" in capsys.readouterr().err
    assert our_containers() == []


def test_over_300_episodes_at_concurrency_128_are_all_stored(tmp_path):
    models = "".join(f'[[models]]\nname = "openai/sim-{n}"\nlocal = {{ latency = 0.5, solve_rate = 0.5, seed = {n} }}\n'
                     f'limits = {{ max_concurrency = 128 }}\n' for n in (1, 2))
    path = sweep_file(tmp_path, models, tasks="starter-bash,starter-sql,starter-python,starter-ctf",
                      strategies=["single", "try_again"], epochs=5, max_turns=2, concurrency=128)
    assert sweep(path) == 0
    out = tmp_path / "out"
    episodes = rows(out, "SELECT model, strategy, task_set, task_id, epoch, failure_class, started_at, finished_at "
                         "FROM episodes")
    assert len(episodes) == 2 * 2 * 18 * 5 == len({e[:5] for e in episodes})
    assert [e for e in episodes if e[5] is not None] == []
    # at least 100 episodes were in flight at one moment
    events = sorted([(e[6], 1) for e in episodes] + [(e[7], -1) for e in episodes])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak >= 100
    # the same seeded model knows the same tasks in every epoch and strategy
    per_task = rows(out, "SELECT model, task_id, count(DISTINCT success) FROM episodes WHERE strategy='single' "
                         "GROUP BY 1, 2")
    assert {n for *_, n in per_task} == {1}


def test_an_infrastructure_failure_is_rerun_a_bounded_number_of_times(tmp_path):
    task = load_tasks("starter-bash")[0]
    trajectory = tmp_path / "wait.json"  # its one action waits, while the test kills its container from outside
    trajectory.write_text(json.dumps({"0": {"environment": "ic_bash", "dataset": "starter", "task_id": 0,
                                            "query": task.query, "turn_history": {
                                                "actions": ["sleep 8.5"], "observations": [""],
                                                "rewards": [0], "valid_action": [True]}}}))
    path = sweep_file(tmp_path, f'[[models]]\nname = "replay:{trajectory}"\n', infra_retries=2)
    with container_killer("sleep 8.5"):
        assert sweep(path) == 0
    out = tmp_path / "out"
    stored = {r[0]: r[1:] for r in rows(out, "SELECT task_id, status, failure_class, attempts, error FROM episodes")}
    status, failure, attempts, error = stored[task.id]
    assert (status, failure, attempts) == ("infra_error", "infra", 3) and "driver exited" in error
    assert all(v[1] is None for k, v in stored.items() if k != task.id)  # the others are unaffected
    assert sweep(path) == 0  # a resume runs infra failures again, and replaces them
    assert rows(out, "SELECT count(*), max(run_id) FROM episodes WHERE task_id = ?".replace("?", repr(task.id))) == [(1, 2)]
    assert our_containers() == []


def test_an_episode_over_its_time_limit_is_a_task_failure(tmp_path):
    path = sweep_file(tmp_path, '[[models]]\nname = "openai/slow"\nlocal = { latency = 3 }\n', episode_timeout=1)
    assert sweep(path) == 0
    stored = rows(tmp_path / "out", "SELECT DISTINCT status, failure_class, error FROM episodes")
    assert stored == [("timeout", "task", "the episode took longer than 1 s")]


def test_export_writes_files_that_replay_reads_back(tmp_path):
    path = sweep_file(tmp_path, '[[models]]\nname = "oracle"\n', tasks="starter-bash,starter-sql")
    assert sweep(path) == 0
    assert main(["export", str(tmp_path / "out"), "--format", "intercode", "--to", str(tmp_path / "x")]) == 0
    files = sorted((tmp_path / "x").glob("*.json"))
    assert [f.name for f in files] == ["oracle__single__starter-bash.json", "oracle__single__starter-sql.json"]
    episodes = read_episodes(files[0])
    tasks = load_tasks("starter-bash")
    assert [e.query for e in episodes] == [t.query for t in tasks]
    assert [t.action for t in episodes[0].turns] == [tasks[0].gold_text]
    assert [t.reward for t in episodes[0].turns] == [1.0]
    assert {e.harness for e in episodes} == {HARNESS}  # so replay gives them pristine containers, as they ran


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_bad_inputs_give_one_line_and_keep_results(tmp_path, capsys, monkeypatch):
    path = sweep_file(tmp_path, '[[models]]\nname = "oracle"\n')
    assert sweep(path) == 0
    capsys.readouterr()
    before = rows(tmp_path / "out", "SELECT * FROM episodes ORDER BY id")
    other = sweep_file(tmp_path, '[[models]]\nname = "oracle"\n', name="other")
    assert sweep(other) == 2
    assert "holds results of a different sweep ('t'" in one_error_line(capsys)
    with open(tmp_path / "out" / ".lock", "a") as held:  # another sweep is writing there
        fcntl.flock(held, fcntl.LOCK_EX)
        assert sweep(path) == 2
        assert "is in use by another sweep" in one_error_line(capsys)
    assert rows(tmp_path / "out", "SELECT * FROM episodes ORDER BY id") == before
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for body, expected in [('[[models]]\nname = "no-such-model-xyz"\n', "unknown model 'no-such-model-xyz'"),
                           ('[[models]]\nname = "openai/gpt-4o"\n', "needs OPENAI_API_KEY"),
                           ('[[models]]\nname = "openai/gpt-4o"\napi_key_env = "NOPE_KEY"\n', "NOPE_KEY (api_key_env) is not set")]:
        (tmp_path / "out2").exists() and subprocess.run(["rm", "-rf", str(tmp_path / "out2")], check=True)
        bad = sweep_file(tmp_path, body, name="bad", output=str(tmp_path / "out2"))
        assert sweep(bad) == 2
        assert expected in one_error_line(capsys)
    spider = sweep_file(tmp_path, '[[models]]\nname = "oracle"\n', name="s", tasks="spider", output=str(tmp_path / "o3"))
    assert main(["sweep", str(spider), "--quiet", "--data-dir", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in one_error_line(capsys)
    assert our_containers() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_stops_with_one_line_and_keeps_what_was_committed(tmp_path, capsys):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(disk)], check=True)
    try:
        models = '[[models]]\nname = "openai/big"\nlocal = { default_answer = "' + "```\\necho " + "x" * 3000 + "\\n```" + '" }\n'
        path = sweep_file(tmp_path, models, tasks="starter-bash,starter-sql,starter-python", output=str(disk / "out"),
                          epochs=20, max_turns=3, strategies=["try_again"])
        assert sweep(path) == 2
        line = one_error_line(capsys)
        assert line.startswith("error: the disk is full writing") and "run the same command again" in line
        (stored, bad), = rows(disk / "out", "SELECT count(*), sum(n_turns != (SELECT count(*) FROM turns "
                                            "WHERE episode_id = episodes.id)) FROM episodes")
        assert 0 < stored < 3 * 5 * 20 and not bad  # whole episodes only
        assert rows(disk / "out", "PRAGMA integrity_check") == [("ok",)]
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    assert our_containers() == []


def _imported(args: list[str]) -> set[str]:
    """The top-level packages a `python -m orchestrator` run imported (from -X importtime)."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "orchestrator", *args, "--quiet"],
                         capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in run.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_a_sweep_of_offline_models_never_imports_litellm_or_ray(tmp_path):
    oracle = sweep_file(tmp_path, '[[models]]\nname = "oracle"\n')
    imported = _imported(["sweep", str(oracle)])
    assert "orchestrator" in imported and not {"litellm", "openai", "ray"} & imported
    assert main(["export", str(tmp_path / "out"), "--format", "intercode", "--to", str(tmp_path / "x")]) == 0
    (recorded,) = (tmp_path / "x").glob("*.json")
    replay = sweep_file(tmp_path, f'[[models]]\nname = "replay:{recorded}"\n', name="r", output=str(tmp_path / "r"))
    imported = _imported(["sweep", str(replay)])
    assert "tasks" in imported and not {"litellm", "openai", "ray"} & imported


def test_the_tools_strategy_in_a_sweep_with_openai_and_anthropic_format_models(tmp_path):
    """Native tool calling in a grid: local models of both formats (the offline server answers the
    known tasks with the gold as tool calls), the oracle beside them; LLM calls recorded per answer."""
    models = "".join(f'[[models]]\nname = "{name}"\nlocal = {{ solve_rate = 1.0 }}\n'
                     for name in ("openai/sim-tools", "anthropic/sim-tools")) + '[[models]]\nname = "oracle"\n'
    path = sweep_file(tmp_path, models, tasks="starter-bash,starter-ctf", strategies=["tools", "try_again"])
    assert sweep(path) == 0
    assert rows(tmp_path / "out", "SELECT model, strategy, sum(success), count(*) FROM episodes "
                                  "GROUP BY model, strategy ORDER BY model, strategy") == [
        ("anthropic/sim-tools", "tools", 8, 8), ("anthropic/sim-tools", "try_again", 8, 8),
        ("openai/sim-tools", "tools", 8, 8), ("openai/sim-tools", "try_again", 8, 8),
        ("oracle", "tools", 8, 8), ("oracle", "try_again", 8, 8)]
    answers = rows(tmp_path / "out", "SELECT count(DISTINCT t.episode_id || '.' || t.output) FROM turns t "
                                     "JOIN episodes e ON e.id = t.episode_id WHERE e.model LIKE '%/sim-tools'")
    assert rows(tmp_path / "out", "SELECT count(*) FROM llm_calls") == answers
    assert rows(tmp_path / "out", "SELECT DISTINCT served_model FROM episodes WHERE model LIKE 'anthropic/%'") == [
        ("sim-tools",)]
    assert our_containers() == []
