"""The command line: its help, and one clear line with a non-zero exit for every bad input."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess

import pytest

from orchestrator.cli import main
from tests.conftest import PROJECT


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m orchestrator ARGV` in this process (its `main`, as the module runs it), with `env`
    added to the environment meanwhile; what it printed and its exit code."""
    out, err = io.StringIO(), io.StringIO()
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(PROJECT):
            try:
                code = main(list(argv))
            except SystemExit as exit_:  # argparse: --help, a bad argument
                code = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return subprocess.CompletedProcess(["orchestrator", *argv], code, out.getvalue(), err.getvalue())


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_help_lists_the_commands():
    result = run("--help")
    assert result.returncode == 0
    for command in ("images", "pool"):
        assert command in result.stdout


def test_unknown_image_name():
    assert_one_line_error(run("images", "build", "no-such-image"), "unknown image", "nl2bash-fs1")


def test_missing_data_dir(tmp_path):
    assert_one_line_error(run("images", "build", "--data-dir", str(tmp_path / "nothing")), "--data-dir")


def test_engine_that_cannot_be_reached(tmp_path):
    result = run("pool", "status", env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    assert_one_line_error(result, "no Docker engine", "ensure-engine.sh")


@pytest.mark.docker
def test_image_not_built_for_the_pool():
    assert_one_line_error(run("pool", "demo", "--image", "intercode/never-built", "--size", "1"), "images build")


def test_replay_rejects_what_is_not_a_trajectory_file(tmp_path):
    missing = tmp_path / "none.json"
    assert_one_line_error(run("replay", str(missing)), "does not exist")
    wrong = tmp_path / "list.json"
    wrong.write_text("[1, 2]")
    assert_one_line_error(run("replay", str(wrong)), "not a trajectory file")
    partial = tmp_path / "partial.json"
    partial.write_text('{"0": {"environment": "ic_bash"}}')
    result = run("replay", str(partial))  # a bad episode, one line; with nothing else, nothing compared
    assert result.returncode == 1, result.stderr
    assert f"{partial}: episode 0: turn_history is missing" in result.stdout
    assert result.stderr.strip().splitlines() == ["no turn could be compared with its recording (1 bad episode): "
                                                  "see the reasons above"]


def test_validate_rejects_a_task_set_of_another_kind():
    assert_one_line_error(run("validate", "bash", "--tasks", "spider"), "not a bash task set")
