"""`replay` and `replay:FILE` against bad input and broken containers: every bad trajectory file is
one `error:` line (exit 2), a replay with nothing to compare is not a success, and a container
that a recorded action breaks, or that dies, costs its own episode only: the environment is
re-created and the replay goes on (flagged where the original ran in the broken container)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from foundation.pool import Pool
from orchestrator.cli import main
from orchestrator.fidelity.replay import TurnResult, replay_all
from orchestrator.fidelity.trajectories import TaskFinder, read_episodes
from tests.conftest import FS1, clean_runtime, containers_of_run
from tests.unit.test_replay_robust import cli_error, episode, fs1_queries, write

# Gzips the shell and git of the container it runs in, as the recorded `find . -type f -mtime +7
# -exec gzip -9 {} \;` run from `/` did to every binary: fast, and the next leaky reset fails.
BREAKS_THE_CONTAINER = "gzip -9 /usr/bin/bash /usr/bin/git"
# An action during which the container dies: the test kills it from outside once the marker exists
# (an action can't do it from inside: the container's first process, ours, ignores its signals).
DIE_MARKER = "/testbed/kill-this-container"
DIES_DURING = f"touch {DIE_MARKER} && sleep 60"


def fs1_golds(data_dir: Path) -> list[str]:
    return [task["gold"] for task in json.loads((data_dir / "nl2bash" / "nl2bash_fs_1.json").read_text())]


@pytest.mark.docker
def test_a_sweep_with_a_bad_replay_model_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('{"0": {"query": "café"}}'.encode("latin-1"))
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'name = "bad"\noutput = "{tmp_path / "out"}"\nstrategies = ["single"]\n'
                     f'[[models]]\nname = "replay:{path}"\n[[tasks]]\ndataset = "starter-bash"\n')
    line = cli_error(capsys, "sweep", str(sweep), "--quiet", "--no-report")
    assert str(path) in line and "UTF-8" in line


# ---------------------------------------------------------------- nothing compared: not a success

@pytest.mark.docker
def test_a_replay_that_compares_no_turn_exits_non_zero(tmp_path: Path, data_dir: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"0": episode("no task asks this", ["ls"], [0.5], task_id=None)})
    assert main(["replay", str(path), "--data-dir", str(data_dir)]) == 1
    captured = capsys.readouterr()
    assert "agreement: 0.000 (0 turns; 1 not scored)" in captured.out
    assert "task not found" in captured.out
    assert captured.err.strip().splitlines()[-1].startswith("no turn could be compared")


# ---------------------------------------------------------------- broken containers, for real

def broken_then_gold(data_dir: Path, first_actions: list[str]) -> dict[str, Any]:
    """Episode 0 runs `first_actions`; episodes 1 and 4 then run their task's gold, which scores 1.0."""
    queries, golds = fs1_queries(data_dir), fs1_golds(data_dir)
    return {"0": episode(queries[0], first_actions, [0.0] * len(first_actions), task_id=0),
            "1": episode(queries[1], [golds[1]], [1.0], task_id=1),
            "4": episode(queries[4], [golds[4]], [1.0], task_id=4)}


@pytest.mark.docker
@pytest.mark.parametrize("containers", ["original", "pristine"])
def test_a_recorded_action_that_breaks_the_container_costs_its_episode_only(
        tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], containers: str) -> None:
    path = write(tmp_path, broken_then_gold(data_dir, ["cd /", BREAKS_THE_CONTAINER]))
    out = tmp_path / "replay.json"
    code = main(["replay", str(path), "--data-dir", str(data_dir), "--containers", containers, "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    turns = json.loads(out.read_text())
    assert set(turns) == {"0", "1", "4"}
    assert [t["ours"] is not None for t in turns["0"]] == [True, True]  # the breaking turn itself was scored
    for key in ("1", "4"):  # replayed and scored right, in new containers
        assert [(t["ours"], t["agree"]) for t in turns[key]] == [(1.0, True)], turns[key]
    flags = [t["flag"] for key in ("1", "4") for t in turns[key]]
    if containers == "original":  # the original ran them in the container episode 0 broke
        assert all("episode 0" in flag and "git reset failed in the agent's container" in flag for flag in flags)
        assert "2 turns of 2 episodes scored but not counted" in printed and "(2 turns; 2 flagged)" in printed
    else:
        assert flags == ["", ""]
        assert "agreement: " in printed.splitlines()[-1] and "(4 turns)" in printed


async def kill_when_marked(docker: aiodocker.Docker, run_id: str) -> str:
    """Kill the run's container in which DIE_MARKER appears, from outside, as the engine would
    lose it; its id. Polls each running container of the run for the marker, within 60 s."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for container in await containers_of_run(docker, run_id):
            try:
                await container.get_archive(DIE_MARKER)
            except aiodocker.DockerError:
                continue  # not this one, or not yet
            await container.kill()
            return str(container.id)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no container of run {run_id} made {DIE_MARKER} within 60 s")


@pytest.mark.docker
@pytest.mark.parametrize("containers", ["original", "pristine"])
async def test_a_container_that_dies_mid_episode_is_re_created(docker: aiodocker.Docker, data_dir: Path,
                                                              tmp_path: Path, containers: str) -> None:
    path = write(tmp_path, broken_then_gold(data_dir, ["ls /testbed", DIES_DURING, "ls /testbed"]))
    episodes = read_episodes(path)
    async with clean_runtime(docker, FS1, data_dir=data_dir) as runtime:
        assert isinstance(runtime.pool, Pool)
        killer = asyncio.create_task(kill_when_marked(docker, runtime.pool.run_id))
        try:
            results = await replay_all(runtime, TaskFinder(data_dir), episodes, 4, containers)
        finally:
            killed = await asyncio.gather(killer, return_exceptions=True)  # it stops by itself, in 60 s at most
    assert isinstance(killed[0], str), killed  # the container did die under the action
    by_episode: dict[str, list[TurnResult]] = {}
    for result in results:
        by_episode.setdefault(result.episode, []).append(result)
    first = by_episode["0"]
    assert first[0].ours is not None
    assert [r.ours for r in first[1:]] == [None, None], first
    assert all("turn 2 of episode 0" in r.reason and "re-created" in r.reason for r in first[1:]), first
    for key in ("1", "4"):
        assert [(r.ours, r.agree) for r in by_episode[key]] == [(1.0, True)]
        assert all(bool(r.flag) is (containers == "original") for r in by_episode[key])


def long_file(path: Path, episodes: int) -> Path:
    """A trajectory file of ours (pristine containers) over the starter Bash tasks, each episode's
    one observation 10 KB long: `episodes` of them make a file of about 10 KB each."""
    from tasks import DATASETS, load_tasks

    tasks = load_tasks("starter-bash")
    observation = "a line of what the command printed\n" * 300
    path.write_text(json.dumps({str(i): {
        "environment": "ic_bash", "dataset": f"starter/{DATASETS['starter-bash'].path}", "task_id": t.index,
        "query": t.query, "harness": "intercode-orchestrator",
        "turn_history": {"actions": [t.gold_text], "observations": [observation], "rewards": [1.0],
                         "valid_action": [True]}} for i, t in ((i, tasks[i % len(tasks)]) for i in range(episodes))}))
    return path


@pytest.mark.docker
@pytest.mark.slow
def test_a_long_replay_says_what_it_is_doing(tmp_path: Path) -> None:
    """A 40 MB file: each step is on stderr as it starts, then how many episodes are replayed at
    least every 10 s (a 200 MB file once printed nothing for 120 s)."""
    import signal
    import subprocess
    import sys
    import threading

    from foundation.settings import PROJECT_ROOT

    path = long_file(tmp_path / "long.json", 4000)
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "replay", str(path)], cwd=PROJECT_ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic() - started, line.strip())
                                                          for line in process.stderr), daemon=True)
    reader.start()
    try:
        deadline = started + 120
        while time.monotonic() < deadline and not any("replayed" in line for _, line in lines):
            time.sleep(0.2)
    finally:
        # Only the way this test stops it: its shutdown (every container removed) is the sweep's and
        # the pool's tests' to time. On a loaded CI machine the engine took more than 60 s once.
        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=300)
        reader.join(timeout=10)
        process.stderr.close()
    print("\n".join(f"{at:6.1f} s  {line}" for at, line in lines))
    print(f"stopped {time.monotonic() - stopping:.1f} s after SIGTERM")
    # each line stamped with the command's own time since it started: what it promises holds on any
    # machine, however loaded (the first line came 5.2 s after the start beside a CPU hog once)
    assert lines and lines[0][1].startswith("[0 s] reading") and "MB" in lines[0][1]
    replayed = [(at, line) for at, line in lines if "replayed" in line]
    assert replayed and "/4,000 episodes" in replayed[0][1]
    stamps = [int(re.match(r"\[(\d+) s\]", line)[1]) for _, line in lines[: lines.index(replayed[0]) + 1]]
    assert max(b - a for a, b in zip(stamps, stamps[1:])) <= 11, stamps  # a line at least every 10 s
