"""`replay` and `replay:FILE` against bad input and broken containers: every bad trajectory file is
one `error:` line (exit 2), a replay with nothing to compare is not a success, and a container
that a recorded action breaks, or that dies, costs its own episode only: the environment is
re-created and the replay goes on (flagged where the original ran in the broken container)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from agents.llm import LLMClient, ModelSpec
from foundation.errors import ConfigError
from orchestrator.cli import main
from orchestrator.fidelity.replay import bad_line
from orchestrator.fidelity.trajectories import RecordedEpisode, TaskFinder, read_episodes
from orchestrator.sweep.sweep_models import resolve_model

FS1_FILE = "./data/nl2bash/nl2bash_fs_1.json"


def episode(query: str, actions: list[Any], rewards: list[Any], *, task_id: Any = 0,
            environment: str = "ic_bash") -> dict[str, Any]:
    return {"environment": environment, "dataset": FS1_FILE, "task_id": task_id, "query": query,
            "turn_history": {"actions": actions, "observations": [""] * len(actions), "rewards": rewards,
                             "valid_action": [True] * len(actions)}}


def write(tmp_path: Path, content: object, name: str = "trajectory.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(content))
    return path


def fs1_queries(data_dir: Path) -> list[str]:
    return [task["query"] for task in json.loads((data_dir / "nl2bash" / "nl2bash_fs_1.json").read_text())]


def one_line_error(path: Path, *needles: str) -> str:
    with pytest.raises(ConfigError) as caught:
        read_episodes(path)
    message = str(caught.value)
    assert message and "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


def bad_episode(path: Path, key: str, *needles: str) -> RecordedEpisode:
    """Episode `key` of the file, read as bad: one line naming why (the others are read as they are)."""
    episodes = {e.key: e for e in read_episodes(path)}
    bad = episodes[key]
    assert bad.bad and "\n" not in bad.bad, bad
    for needle in needles:
        assert needle in bad.bad, bad.bad
    assert not any(e.bad for k, e in episodes.items() if k != key)
    return bad


def cli_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI in this process; it must exit 2 with exactly one line on stderr, `error: ...`."""
    assert main(list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


# ---------------------------------------------------------------- bad files: one line, no Docker

def test_a_file_that_is_not_utf8_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('{"0": {"query": "café"}}'.encode("latin-1"))
    one_line_error(path, str(path), "UTF-8")
    line = cli_error(capsys, "replay", str(path))
    assert str(path) in line and "UTF-8" in line
    client = LLMClient([ModelSpec(name="openai/local", api_base="http://127.0.0.1:9/v1", api_key=SecretStr("x"))])
    with pytest.raises(ConfigError, match="UTF-8"):  # a sweep's `replay:FILE` model reads it the same way
        resolve_model(f"replay:{path}", client=client)


@pytest.mark.parametrize(("actions", "turn"), [([5, None, {}], "turn 1"), (["ls", None], "turn 2"),
                                                (["ls", "pwd", {"cmd": "ls"}], "turn 3")])
def test_an_action_that_is_not_a_string_names_the_turn_and_keeps_those_before(tmp_path: Path, actions: list[Any],
                                                                              turn: str) -> None:
    path = write(tmp_path, {"0": episode("q", ["ls"], [0.0]), "7": episode("q", actions, [0.0] * len(actions))})
    bad = bad_episode(path, "7", turn, "action")
    assert [t.action for t in bad.turns] == actions[:int(turn.split()[1]) - 1]


BAD_EPISODES: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "not an object": (lambda e: [e], "not an object"),
    "turn_history not an object": (lambda e: {**e, "turn_history": ["ls"]}, "turn_history"),
    "actions not a list": (lambda e: {**e, "turn_history": {**e["turn_history"], "actions": "ls"}}, "actions"),
    "rewards missing": (lambda e: {**e, "turn_history": {"actions": ["ls"], "observations": [""]}}, "rewards"),
    "reward a string": (lambda e: {**e, "turn_history": {**e["turn_history"], "rewards": ["0.5"]}}, "turn 1"),
    "reward true": (lambda e: {**e, "turn_history": {**e["turn_history"], "rewards": [True]}}, "reward"),
    "lengths differ": (lambda e: {**e, "turn_history": {**e["turn_history"], "rewards": [0.1, 0.2]}},
                       "differ in length (1 actions, 1 observations, 2 rewards); read as far as they agree: 1 turn"),
    "all empty": (lambda e: {**e, "turn_history": {"actions": [], "observations": [], "rewards": []}},
                  "no turns"),
    "unknown environment": (lambda e: {**e, "environment": "ic_cobol"}, "ic_cobol"),
    "environment a list": (lambda e: {**e, "environment": ["ic_bash"]}, "environment"),
    "query a number": (lambda e: {**e, "query": 12}, "query"),
    "dataset an object": (lambda e: {**e, "dataset": {}}, "dataset"),
}


@pytest.mark.parametrize("case", BAD_EPISODES)
def test_every_field_is_checked_and_a_bad_episode_is_one_line(tmp_path: Path, case: str) -> None:
    change, needle = BAD_EPISODES[case]
    path = write(tmp_path, {"2": episode("q", ["pwd"], [0.5]), "3": change(episode("q", ["ls"], [0.5]))})
    bad = bad_episode(path, "3", needle)
    assert bad.kind == "bash"  # the file's kind, when the episode names none: the table's row


def test_what_is_tolerated(tmp_path: Path, data_dir: Path) -> None:
    query = fs1_queries(data_dir)[0]
    path = write(tmp_path, {"0": episode(query, [], [], task_id={"weird": [1]}),
                            "1": episode(query, ["ls", "pwd"], [None, 1], task_id=10**300),
                            "2": episode(query, ["ls"], [0], task_id=True)})
    empty, nulls, boolean = read_episodes(path)
    assert empty.turns == [] and empty.bad.startswith("no turns")  # nothing to replay, and said so
    assert not nulls.bad and not boolean.bad
    assert [t.reward for t in nulls.turns] == [None, 1.0]  # no recorded reward: replayed, not compared
    finder = TaskFinder(data_dir)
    found = [finder.find(e) for e in (empty, nulls, boolean)]
    assert [task and task.id for task in found] == ["nl2bash-fs1/0"] * 3  # by the query, whatever the id
    digits = json.dumps({"0": episode(query, ["ls"], [0.5])}).replace('"task_id": 0', '"task_id": ' + "9" * 5000)
    (tmp_path / "huge.json").write_text(digits)
    one_line_error(tmp_path / "huge.json", "too many digits")  # Python refuses such integers: one line too


def test_files_that_are_not_trajectory_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one_line_error(write(tmp_path, {}), "has no episodes")
    one_line_error(write(tmp_path, [episode("q", ["ls"], [0.5])]), "a JSON object keyed by episode", "array")
    one_line_error(write(tmp_path, "text"), "a JSON object keyed by episode")
    one_line_error(tmp_path, str(tmp_path), "directory")
    (tmp_path / "empty.json").write_text("")
    one_line_error(tmp_path / "empty.json", "empty")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    one_line_error(tmp_path / "deep.json", "deep")
    (tmp_path / "nan.json").write_text('{"0": ' + json.dumps(episode("q", ["ls"], [0.5]))
                                       .replace("0.5]", "NaN]") + "}")
    bad_episode(tmp_path / "nan.json", "0", "turn 1", "reward")
    key = "line one\nline two " + "x" * 10_000
    (odd,) = read_episodes(write(tmp_path, {key: episode("q", [7], [0.5])}, "odd-key.json"))
    line = bad_line(odd, odd.bad)  # what the replay lists under "bad episodes"
    assert "\n" not in line and len(line) < 700 and "turn 1" in line
    assert cli_error(capsys, "replay", str(write(tmp_path, {}, "none.json"))).endswith("has no episodes")
    cli_error(capsys, "replay", str(tmp_path))


def test_files_that_cannot_be_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    one_line_error(loop, str(loop), "cannot be read", "symbolic links")
    assert "symbolic links" in cli_error(capsys, "replay", str(loop))
    good = write(tmp_path, {"0": episode("q", ["ls"], [0.5])})
    assert "given twice" in cli_error(capsys, "replay", str(good), str(tmp_path / "." / good.name))
    one_line_error(tmp_path / ("x" * 300), "cannot be read", "too long")
    if os.geteuid() != 0:  # root reads files whatever their mode
        path = write(tmp_path, {"0": episode("q", ["ls"], [0.5])})
        path.chmod(0)
        one_line_error(path, str(path), "cannot be read", "ermission")


def test_a_huge_query_does_not_stall_the_task_search(tmp_path: Path, data_dir: Path) -> None:
    (found,) = read_episodes(write(tmp_path, {"0": episode("find " * 400_000, ["ls"], [0.5], task_id=None)}))
    finder = TaskFinder(data_dir)
    finder.tasks("nl2bash-fs1")  # the data is read before the clock starts
    started = time.monotonic()
    assert finder.find(found) is None
    assert time.monotonic() - started < 5  # the close-query search took almost a minute


def test_a_task_of_another_kind_is_not_found(tmp_path: Path, data_dir: Path) -> None:
    query = fs1_queries(data_dir)[0]  # a bash task's, in an episode of SQL
    (found,) = read_episodes(write(tmp_path, {"0": episode(query, ["ls"], [0.5], environment="ic_sql")}))
    assert TaskFinder(data_dir).find(found) is None
