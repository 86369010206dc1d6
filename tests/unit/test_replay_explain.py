"""`replay --explain FILE TASK`: a recorded Bash reward split into the reward's three parts (the split
nearest ours), and one episode's turns side by side with their replay, without Docker."""

from __future__ import annotations

import pytest

import environments.bash  # noqa: F401 — registers the Bash kind
from environments.rewards.bash import recorded_split
from foundation.errors import ConfigError
from orchestrator.fidelity.explain import explain, pick
from orchestrator.fidelity.replayed_turn import TurnResult
from orchestrator.fidelity.trajectories import RecordedEpisode, RecordedTurn
from tasks import Task

OURS = {"file_changes": 0.33, "file_contents": 0.33, "output_similarity": 0.05, "constant": 0.01}


@pytest.mark.parametrize(("recorded", "ours", "split"), [
    (0.72, OURS, (0.33, 0.33, 0.05)),  # the same sum: the same parts
    (0.85, OURS, (0.33, 0.33, 0.18)),  # the output alone differs
    (1.0, {**OURS, "file_changes": 0.05}, (0.33, 0.33, 0.33)),  # file changes 0.33 and output 0.33: two differ
    (0.44, OURS, (0.05, 0.33, 0.05)),  # file changes take 0.33, 0.05 or 0: one missing or extra change
    (0.01, OURS, (0.0, 0.0, 0.0)),
    (0.67, {**OURS, "output_similarity": 0.31}, (0.33, 0.33, 0.0)),  # contents 0.02 would sum too: the output differs
])
def test_a_recorded_reward_is_split_nearest_ours(recorded, ours, split):
    assert tuple(recorded_split(recorded, ours).values()) == split


def test_a_reward_no_split_sums_to_has_none():
    assert recorded_split(1.2, OURS) is None and recorded_split(0.5, {"reward": 0.5}) is None


def episode(key: str, rewards: list[float], source: str = "ic_bash_multiturn_x_10_turns_fs_2.json") -> RecordedEpisode:
    turns = [RecordedTurn(f"ls /system/{n}", f"file{n}\nsame", reward) for n, reward in enumerate(rewards)]
    return RecordedEpisode(key, "bash", "./data/nl2bash/nl2bash_fs_2.json", int(key), "List the files", turns, source)


def test_an_episode_is_explained_turn_by_turn_with_the_part_that_differs():
    recorded = episode("7", [0.39, 1.0])
    results = [
        TurnResult("7", 0, "ls /system/0", 0.39, 0.39, True, observation="file0\nsame",
                   parts={**OURS, "file_changes": 0.0, "missing": "?? /system/a"}),
        TurnResult("7", 1, "ls /system/1", 1.0, 0.72, False, "observation differs", observation="file1\nother",
                   parts=OURS),
    ]
    task = Task("bash", "nl2bash-fs2", 7, "List the files", "ls /system", "intercode/nl2bash-fs2")
    text = "\n".join(explain(recorded, results, task, before=7))
    assert "replayed after the 7 episodes before it" in text and "gold:  ls /system" in text
    assert "success: recorded solved (best 1.00), ours not solved (best 0.72)" in text
    assert "turn 1: recorded 0.39, ours 0.39: agree" in text and "turn 2: recorded 1.00, ours 0.72: DIFFER" in text
    second = text.split("turn 2:")[1].splitlines()
    assert [line.split()[:2] for line in second if "<- differs" in line] == [["output", "0.33"]]
    assert "our changes missing against the gold's: ?? /system/a" in text
    assert "part at line 2: recorded 'same', ours 'other'" in text


def test_the_episodes_to_replay_are_those_up_to_it_in_the_original_containers():
    episodes = [episode(str(n), [0.0]) for n in range(5)]
    assert [e.key for e in pick(episodes, "3")] == ["0", "1", "2", "3"]
    exported = [RecordedEpisode("2", "bash", "", 2, "q", [], "x.json", harness="intercode-orchestrator")]
    assert pick(exported, "2") == exported  # ran pristine: alone
    with pytest.raises(ConfigError, match="no episode '?9'?.*0, 1, 2, 3, 4"):
        pick(episodes, "9")
