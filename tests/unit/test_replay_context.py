"""Replay contexts: each NL2Bash recording replays in the world its observations show it ran in,
the container (file system) and the file ages at recording, inferred from observations alone.

The recordings are synthetic, in eval_n_turn.py's shape, made by emulating the original's harness
in worlds unlike their dataset's (tests/fixtures/replay/make_recordings.py says how): file system
2's tasks run in file system 1; file system 3's recorded five days after its image's build and
file system 2's thirteen days after, under another clock (libfaketime's), with `find -mtime`,
`-atime`, `ls -l` and `ls -t` turns, and golds that delete by age.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.fidelity.file_systems import load_file_systems
from orchestrator.fidelity.replay_context import infer_contexts, which_file_system
from orchestrator.fidelity.trajectories import TaskFinder, read_episodes

FIXTURES = Path(__file__).parent.parent / "fixtures" / "replay"
IN_FS1 = FIXTURES / "fs2_tasks_in_fs1.json"
AGED = FIXTURES / "fs3_five_days_after_build.json"
AGED_FS2 = FIXTURES / "fs2_thirteen_days_after_build.json"
SHARED_FS3 = Path("trajectories") / "bash" / "ic_bash_multiturn_gpt-4_10_turns_fs_3.json"


def context_of(path: Path, data_dir: Path):
    (context,) = infer_contexts(read_episodes(path), TaskFinder(data_dir), data_dir).values()
    return replace(context, anchor_ns=0)  # the replay's own moment, not inferred


def test_a_run_of_fs2_tasks_made_in_fs1_is_detected(data_dir: Path) -> None:
    context = context_of(IN_FS1, data_dir)
    assert (context.dataset, context.ran_in) == ("nl2bash-fs2", "nl2bash-fs1")
    assert context.container_evidence == ("ran in nl2bash-fs1: 13 of 18 observations name paths missing from fs2, "
                                          "3 list paths of fs1")


MISSING = "ls: cannot access '{}': No such file or directory"
WHICH = {  # (dataset, observations) -> the file system inferred
    "its own despite a few deletions": ("nl2bash-fs2", ["/system/text1.txt\n/system/a.out"] * 5
                                        + [MISSING.format("/system/a.out")] * 3, "nl2bash-fs2"),
    "too little against to move": ("nl2bash-fs2", [MISSING.format("/system")] * 2, "nl2bash-fs2"),
    "fs1's tasks where /system is listed": ("nl2bash-fs1", [MISSING.format("/testbed/dir1")] * 4
                                            + ["/system/folder1/text2.txt"], "nl2bash-fs2"),
    "fs1's tasks where nothing else shows": ("nl2bash-fs1", [MISSING.format("/testbed")] * 4, "nl2bash-fs2"),
    "fs4's tasks where /workspace is listed": ("nl2bash-fs4", ["/workspace/dir1/hello.c"] * 3, "nl2bash-fs3"),
    "fs4's tasks, their own": ("nl2bash-fs4", ["/etc/hosts", "/workspace/dir1/hello.c"], "nl2bash-fs4"),
}


@pytest.mark.parametrize("case", WHICH)
def test_which_file_system_weighs_paths_listed_against_paths_missing(data_dir: Path, case: str) -> None:
    dataset, observations, expected = WHICH[case]
    assert which_file_system(dataset, observations, load_file_systems(data_dir))[0] == expected


@pytest.mark.parametrize(("recording", "fs", "recorded", "days"), [(AGED, 3, "2023-06-02 14:00", "5.2"),
                                                                   (AGED_FS2, 2, "2023-06-10 11:30", "13.1")])
def test_a_run_made_days_after_its_build_is_dated(data_dir: Path, recording: Path, fs: int, recorded: str,
                                                  days: str) -> None:
    context = context_of(recording, data_dir)
    assert context.ran_in == f"nl2bash-fs{fs}" and context.clock is not None
    assert f"{context.clock.built:%Y-%m-%d %H:%M}" == "2023-05-28 09:43"
    assert f"{context.clock.recorded:%Y-%m-%d %H:%M}" == recorded
    assert context.clock_evidence.startswith(f"recorded {days} days after its image's build")


def test_the_shared_recordings_ran_in_their_own_file_systems(data_dir: Path) -> None:
    episodes = [e for n in (1, 2, 3, 4) for e in read_episodes(
        data_dir / "trajectories" / "bash" / f"ic_bash_multiturn_gpt-4_10_turns_fs_{n}.json")]
    contexts = infer_contexts(episodes, TaskFinder(data_dir), data_dir)
    assert [(c.dataset, c.ran_in) for c in contexts.values()] == [(f"nl2bash-fs{n}",) * 2 for n in (1, 2, 3, 4)]
    fs3 = contexts[str(data_dir / SHARED_FS3)].clock
    assert fs3 is not None and f"{fs3.built:%H:%M}" == "09:43" and 20 <= fs3.age.total_seconds() / 60 <= 40


@pytest.mark.parametrize("recording", [IN_FS1, AGED, AGED_FS2, SHARED_FS3])
def test_the_context_is_the_same_whatever_the_rewards(tmp_path: Path, data_dir: Path, recording: Path) -> None:
    """Inferred from observations only: every reward changed (flipped, or all 1), the same context."""
    source = recording if recording.is_absolute() else data_dir / recording
    raw = json.loads(source.read_text())
    contexts = []
    for name, change in (("flipped", lambda r: round(1 - r, 2)), ("ones", lambda r: 1.0)):
        for episode in raw.values():
            history = episode["turn_history"]
            history["rewards"] = [change(r) for r in history["rewards"]]
        path = tmp_path / name / source.name  # the same file name: the context names its file
        path.parent.mkdir()
        path.write_text(json.dumps(raw))
        contexts.append(replace(context_of(path, data_dir), source=""))
    assert contexts[0] == contexts[1] == replace(context_of(source, data_dir), source="")


def test_the_bases_own_logs_are_dated_old_whether_or_not_the_file_ages_are_known(data_dir: Path) -> None:
    """The system's logs came from layers older than any file system's set-up: every fs1 recording
    that asks (`find /var/log -mtime +1`) lists them as older than a day. A fresh image's are
    minutes old, so they are dated BASE_AGE back in every context, even one whose ages are unknown."""
    from datetime import timedelta

    from environments.file_ages import FileAges
    from orchestrator.fidelity.replay_context import BASE, BASE_AGE, Clock
    from tasks import load_tasks

    unknown = context_of(data_dir / "trajectories" / "bash" / "ic_bash_multiturn_gpt-4_10_turns_fs_1.json", data_dir)
    task = load_tasks("nl2bash-fs1", data_dir=data_dir)[46]
    ages = FileAges.of(unknown.apply(task))
    assert unknown.clock is None and ages is not None
    assert (ages.roots, ages.base, ages.base_ns) == ((), BASE, int(BASE_AGE.total_seconds()) * 10**9)
    known = context_of(data_dir / SHARED_FS3, data_dir)
    aged = FileAges.of(known.apply(load_tasks("nl2bash-fs3", data_dir=data_dir)[0]))
    assert aged is not None and aged.roots and aged.built_ns > 0 and aged.base_ns == ages.base_ns
    assert known.clock is not None
    older = replace(known, clock=Clock(known.clock.built, known.clock.built + timedelta(days=40), 2))
    oldest = FileAges.of(older.apply(load_tasks("nl2bash-fs3", data_dir=data_dir)[0]))
    assert oldest is not None and oldest.base_ns == 41 * 86400 * 10**9, "a day older than a build older still"
