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
from orchestrator.fidelity.replay import NETWORK, TurnResult, replay_all
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


# The paper's other models (docs/fidelity.md, "The paper's other models"): two of the twelve Try Again
# files, those whose episodes show that the original's gold and agent ran on two hosts (#52 greps
# /etc/hosts for the host name, #4 prints `env`), and those of the golds that reach the network.
MORE = "more/bash/ic_bash_multiturn_text-bison-001_10_turns_fs_{}.json"


@pytest.mark.parametrize(("fs", "at_least", "hosts", "network"), [
    (2, 0.99, "52", {"49"}),  # measured 0.997 of 382 turns
    (4, 0.99, "4", {"1", "12", "19"}),  # 0.995 of 186
])
def test_the_paper_s_other_models_replay_as_recorded(tmp_path, data_dir, capsys, fs, at_least, hosts, network):
    out = tmp_path / "turns.json"
    path = data_dir / "trajectories" / MORE.format(fs)
    assert main(["replay", str(path), "--data-dir", str(data_dir), "--json", str(out)]) == LEFT_OUT
    turns = json.loads(out.read_text())
    scored = [t for episode in turns.values() for t in episode
              if t["ours"] is not None and not t["flag"] and t["recorded"] is not None]
    share = sum(t["agree"] for t in scored) / len(scored)
    assert share >= at_least, f"{path.name}: {share:.3f} of {len(scored)} turns"
    assert turns[hosts] and all(t["agree"] for t in turns[hosts]), turns[hosts]
    assert {key for key, episode in turns.items() if any(t["reason"] == NETWORK for t in episode)} == network
