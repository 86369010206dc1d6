"""Regression guards on the real benchmark data: gold solutions and recorded trajectories.

Small slices of what docs/fidelity.md measures in full, with thresholds just under the measured
figures, so that a change that breaks fidelity fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from environments.runtime import Runtime
from orchestrator.cli import main
from orchestrator.fidelity.replay import TurnResult, replay_all
from orchestrator.fidelity.replay_cli import LEFT_OUT
from orchestrator.fidelity.trajectories import TaskFinder, read_episodes
from orchestrator.fidelity.validate import validate_all
from tasks import load_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]


async def replayed(data_dir: Path, file: str, limit: int, containers: str) -> list[TurnResult]:
    episodes = read_episodes(data_dir / "trajectories" / file)[:limit]
    async with Runtime.open(data_dir=data_dir) as runtime:
        return [r for r in await replay_all(runtime, TaskFinder(data_dir), episodes, 8, containers)
                if r.ours is not None]


# fs4 golds whose output moves from one moment to the next, for the gold as for the agent
# (docs/fidelity.md): #25 prints the load average (`w | head -n 1`), which a busy machine moves
# between the gold's run and the agent's; #11 finds nothing and lists `/`, where `/proc` and `/dev`
# carry their container's creation minute.
FS4_MOMENT_DEPENDENT = {"nl2bash-fs4/11", "nl2bash-fs4/25"}


async def test_gold_solutions_of_nl2bash_fs4_score_one_but_for_the_moment_dependent(data_dir):
    tasks = load_tasks("nl2bash-fs4", data_dir)
    async with Runtime.open(data_dir=data_dir) as runtime:
        outcomes = await validate_all(runtime, "bash", tasks, 8)
    assert len(outcomes) == len(tasks) > 0
    failed = {o.task: o.status for o in outcomes if o.status != "pass"}
    assert set(failed) <= FS4_MOMENT_DEPENDENT, failed
    assert all(status == "fail" for status in failed.values()), failed  # scored below 1, not an error


# fs2 #32 (`find /system -type f -mtime +31 -exec rm {} \;`) and #48: their recorded golds saw files
# that the original's leaky resets had restored with a fresh mtime. Only the original's container
# lifecycle reproduces them, and it does so whatever the clock: in it every one of their turns
# agrees, in pristine containers some do not.
LIFECYCLE_EPISODES = {"32", "48"}


# fs2's clock episodes: #37 prints file times to the minute (`find -printf '%TH:%TM'`) and #42 the
# `date`. Whether the gold's run and the agent's fall alike moves with the machine's load and the
# minute a run happens in (docs/fidelity.md): in original containers fs2 gave 289-295/310 over
# runs, and in every run we could look into (six, one under a CPU hog) the spread was in these two.
# The thresholds count the other turns, which did not move: 275/290 in original containers,
# 270/290 in pristine ones.
CLOCK_EPISODES = {"37", "42"}
FS2 = "bash/ic_bash_multiturn_gpt-4_10_turns_fs_2.json"


@pytest.mark.parametrize(("file", "limit", "containers", "at_least"), [
    (FS2, 53, "pristine", 0.92),  # measured 0.931
    (FS2, 53, "auto", 0.935),  # original containers: 0.948
    ("sql/ic_sql_multiturn_gpt-4_1_turns.json", 150, "auto", 0.99),
    ("python/ic_python_multiturn_gpt-4_7_turns.json", 40, "auto", 0.99),
    ("ctf/ic_ctf_multiturn_gpt-4_10_turns.json", 25, "auto", 0.99),
])
async def test_replay_agrees_with_the_recording(data_dir, file, limit, containers, at_least):
    results = await replayed(data_dir, file, limit, containers)
    assert len(results) >= limit
    if file == FS2:
        assert {r.episode for r in results} >= CLOCK_EPISODES | LIFECYCLE_EPISODES
        lifecycle = [r for r in results if r.episode in LIFECYCLE_EPISODES]
        disagreeing = [(r.episode, r.turn, r.recorded, r.ours) for r in lifecycle if not r.agree]
        assert (disagreeing == []) is (containers == "auto"), disagreeing
        results = [r for r in results if r.episode not in CLOCK_EPISODES]
    share = sum(r.agree for r in results) / len(results)
    assert share >= at_least, f"{file}: {share:.3f} of {len(results)} turns"


# The paper's other models (docs/fidelity.md, "The paper's other models"): ten of the twelve Try Again
# files, replayed whole as `replay --table` does, in about 2 minutes. The other two, text-bison-001's
# and text-davinci-003's fs 1, hold 20 and 15 actions that run into the 10-second timeout, each a core
# busy all along: 3 to 4 minutes more, which the suite's 15 do not hold (`replay --table
# trajectories/more/bash` replays all twelve, in docs/fidelity.md). Per file: the episodes whose
# success differs from the recording's, each explained there; those left out (the golds that reach
# the network); the share of turns whose reward agrees, just under what was measured (2026-11-29).
MORE = {  # file: (success differs in, left out, agreement at least)
    "starchat_10_turns_fs_1": (set(), 0, 0.99),  # 1.000: #21 met the original host's acpiphp
    "starchat_10_turns_fs_2": ({"19"}, 1, 0.965),  # 0.974: #19 the recording's pace
    "starchat_10_turns_fs_3": (set(), 0, 0.99),  # 0.998: #54 results.txt re-dated by a reset (0.992 before the recording's wall clock)
    "starchat_10_turns_fs_4": (set(), 3, 0.985),  # 0.994: #25 the original host's uptime and load
    "text-bison-001_10_turns_fs_2": (set(), 1, 0.99),  # 0.997: #52 two hosts
    "text-bison-001_10_turns_fs_3": (set(), 0, 0.93),  # 0.942: #14 the original host's inodes
    "text-bison-001_10_turns_fs_4": ({"5"}, 3, 0.985),  # 0.995: #4 two hosts; #5 the live process list (pstree)
    "text-davinci-003_10_turns_fs_2": ({"48"}, 1, 0.99),  # 0.997: #48 tar's order of a directory
    "text-davinci-003_10_turns_fs_3": (set(), 0, 0.955),  # 0.967: #34 the original host's inodes
    "text-davinci-003_10_turns_fs_4": (set(), 3, 0.975),  # 0.987: #10 `man -k`, as the minimized Ubuntu's
}
# Episodes whose success may differ from one run to the next, beside those above: #11's `ls -l /`
# shows /proc's link count, which counts every process of this machine. The gold's `ls` and the
# agent's agree only when no process started or ended between them: on the original's quiet machine
# they did (and on this one alone), but not always beside the other tests (a CI run, 2026-11-29).
MAY_DIFFER = {"text-davinci-003_10_turns_fs_4": {"11"}}
# Turns whose reward may differ from one machine to the next, beside those above, each file's count
# added to its agreeing turns: fs4 #2's `ls -l $(which c++)` (which finds none) lists `/`, and its
# gold `ls -ald` lists `.`, both dated when this machine made its base and its images. fs4's file
# ages are unknown, so the replay keeps them: on a machine whose base and images were made minutes
# apart (a fresh one), the two outputs share those dates' words and the output's part rises (0.92
# recorded, 0.96 ours), on one where days lay between, it does not (2026-12-06, issue 44).
MACHINE_TURNS = {"starchat_10_turns_fs_4": 2, "text-davinci-003_10_turns_fs_4": 2}


# The two slowest files, replayed by `./dev test-long` (CI runs it after `./dev test`) with MORE.
SLOWEST = {
    "text-bison-001_10_turns_fs_1": (set(), 0, 0.89),  # 0.904 of 104: #11 gzips `gzip` itself, the rest flagged
    "text-davinci-003_10_turns_fs_1": (set(), 0, 0.965),  # 0.976
}


def replayed_as_recorded(tmp_path: Path, data_dir: Path, expected: dict[str, tuple[set[str], int, float]]) -> None:
    """`replay --table` of the files named in `expected`, each file's figures checked against it."""
    files = tmp_path / "files"
    files.mkdir()
    for name in expected:
        (files / f"ic_bash_multiturn_{name}.json").symlink_to(data_dir / "trajectories" / "more" / "bash"
                                                           / f"ic_bash_multiturn_{name}.json")
    out = tmp_path / "table.json"
    left_out = any(left for _, left, _ in expected.values())
    assert main(["replay", "--table", str(files), "--data-dir", str(data_dir), "--json", str(out)]) == (
        LEFT_OUT if left_out else 0)
    rows = {Path(row["file"]).stem.removeprefix("ic_bash_multiturn_"): row
            for cell in json.loads(out.read_text())["cells"] if cell["strategy"] == "Try Again"
            for row in cell["files"]}
    assert set(rows) == set(expected)
    for name, (differ, left_out, at_least) in expected.items():
        row = rows[name]
        seen = ({episode for _, episode, _ in row["differ"]}, row["left_out"], row["agreement"])
        may = MAY_DIFFER.get(name, set())
        agreed = min(row["agreed"] + MACHINE_TURNS.get(name, 0), row["turns"])
        assert differ <= seen[0] <= differ | may and seen[1] == left_out and agreed >= at_least * row["turns"], (
            name, seen)


@pytest.mark.long  # 20 whole files, 3 to 4 min: ./dev test-long
def test_the_paper_s_other_models_replay_as_recorded(tmp_path, data_dir):
    replayed_as_recorded(tmp_path, data_dir, MORE)


@pytest.mark.long
def test_the_paper_s_slowest_files_replay_as_recorded(tmp_path, data_dir):
    replayed_as_recorded(tmp_path, data_dir, SLOWEST)
