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


def test_the_command_table_names_the_module_that_registers_each_command():
    """A command line imports only its command's module (orchestrator/cli.py's COMMANDS), so the
    table must name, for every command, the module that registers it."""
    import argparse
    import importlib

    from orchestrator.cli import COMMANDS

    registered = {}
    for module in set(COMMANDS.values()):
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).add_parser(sub)
        registered.update(dict.fromkeys(sub.choices, module))
    assert registered == COMMANDS


# ------------------------------------------------------------------ one line, never a traceback (issue 27, item 8)

SWEEP = ('name = "t"\noutput = {output}\nstrategies = ["single"]\n'
         '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "starter-bash"\n')


def sweep_file(tmp_path, output: str, extra: str = "") -> str:
    path = tmp_path / "s.toml"
    path.write_text(extra + SWEEP.format(output=output))
    return str(path)


def test_a_sweep_output_that_is_a_file_is_one_line(tmp_path):
    taken = tmp_path / "passwd"
    taken.write_text("root:x:0:0\n")
    assert_one_line_error(run("sweep", sweep_file(tmp_path, f'"{taken}"')), str(taken), "not a directory", "output")
    assert taken.read_text() == "root:x:0:0\n"
    inside = taken / "out"  # a file on the way to it
    assert_one_line_error(run("sweep", sweep_file(tmp_path, f'"{inside}"')), "not a directory", "output")


def test_a_nul_byte_in_a_sweep_file_is_one_line(tmp_path):
    result = run("sweep", sweep_file(tmp_path, f'"{tmp_path}/out\\u0000x"'))
    assert_one_line_error(result, "output", "NUL")
    assert not (tmp_path / "out").exists()


def test_a_sweep_file_nested_100000_levels_deep_is_one_line(tmp_path):
    deep = "x = " + "[" * 100_000 + "]" * 100_000 + "\n"
    assert_one_line_error(run("sweep", sweep_file(tmp_path, f'"{tmp_path}/out"', deep)), "nested too deeply")
    deep_table = "x = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n"
    assert_one_line_error(run("sweep", sweep_file(tmp_path, f'"{tmp_path}/out"', deep_table)), "nested too deeply")
    # Not too deep for tomllib, but too deep for pydantic to serialize (the sweep's identity): bounded too.
    params = "{a = " * 270 + "1" + "}" * 270
    path = tmp_path / "params.toml"
    path.write_text(SWEEP.format(output=f'"{tmp_path}/out"').replace('name = "oracle"\n',
                                                                      f'name = "oracle"\nparams = {params}\n'))
    assert_one_line_error(run("sweep", str(path)), "models.0.params.a", "nested too deeply (more than 32 levels)")


@pytest.mark.parametrize("args", [["--size", "-1"], ["--size", "0"], ["--episodes", "0"], ["--hold", "-1"]])
def test_pool_demo_rejects_counts_below_their_minimum(args):
    assert_one_line_error(run("pool", "demo", *args), args[0])


@pytest.mark.parametrize("port", ["99999", "-5", "65536"])
def test_view_rejects_a_port_outside_0_to_65535(tmp_path, port):
    from tests.stores import written_store

    out = written_store(tmp_path / "out")
    assert_one_line_error(run("view", str(out), "--port", port), "--port", port, "0 to 65535")


def test_export_to_a_file_is_one_line(tmp_path):
    from tests.stores import written_store

    out = written_store(tmp_path / "out")
    taken = tmp_path / "passwd"
    taken.write_text("root:x:0:0\n")
    assert_one_line_error(run("export", str(out), "--to", str(taken)), str(taken), "not a directory")
    assert taken.read_text() == "root:x:0:0\n"
