"""Environments of your own (a Dockerfile, a dataset, a reward function and a manifest, from outside
the project) and your data in our kinds' formats: every way in (a sweep file, `tasks check`,
validate, the Python API, the gym adapter), every strategy, and one line for every mistake."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main

EXAMPLE = PROJECT_ROOT / "examples" / "own-task"
PARTS = ("Dockerfile", "tasks.jsonl", "reward.py", "environment.toml")


def sweep_file(tmp_path: Path, tasks: str, strategies: list[str], models: str = '[[models]]\nname = "oracle"\n',
               extra: str = "") -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(f'name = "own"\noutput = "{tmp_path / "out"}"\nstrategies = {json.dumps(strategies)}\n'
                    f"{extra}\n{models}\n{tasks}")
    return path


def test_the_example_is_under_100_lines_across_its_four_parts():
    lines = sum(len((EXAMPLE / part).read_text().splitlines()) for part in PARTS)
    assert lines < 100, f"{lines} lines"
    assert "intercode" not in (EXAMPLE / "Dockerfile").read_text().lower()  # the driver is ours to add


# ----------------------------------------------------------------------------- one line per mistake


def copy_example(tmp_path: Path) -> Path:
    target = tmp_path / "env"
    shutil.copytree(EXAMPLE, target)
    return target


@pytest.mark.parametrize(("break_it", "expected"), [
    (lambda d: (d / "Dockerfile").unlink(), "has no Dockerfile"),
    (lambda d: (d / "tasks.jsonl").write_text('{"query": "fine", "gold": "ls"}\n{"gold": "ls"}\n'),
     "tasks.jsonl: record 2 has no `query`"),
    (lambda d: (d / "tasks.jsonl").write_text('{"query": "fine"\n'), "tasks.jsonl line 1 is not valid JSON"),
    (lambda d: (d / "reward.py").write_text("import no_such_module\n"), "reward.py does not import: ModuleNotFoundError"),
    (lambda d: (d / "reward.py").write_text("def score(a, b, c):\n    return 1\n"), "reward.py has no function 'reward'"),
    (lambda d: (d / "environment.toml").write_text('name = "jq"\ncolour = "blue"\n'),
     "environment.toml: colour: unknown key"),
    (lambda d: (d / "environment.toml").write_text('name = "bash"\n'), "one of the project's own kinds"),
    (lambda d: (d / "environment.toml").write_text('name = "jq"\nlanguage = "ruby"\n'), "language"),
])
def test_a_broken_environment_is_one_line_naming_its_file(tmp_path, capsys, break_it, expected):
    directory = copy_example(tmp_path)
    break_it(directory)
    sweep = sweep_file(tmp_path, f'[[tasks]]\npath = "{directory}"\n', ["try_again"])
    assert main(["sweep", str(sweep), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and expected in err, err
    assert "Traceback" not in err and not (tmp_path / "out" / "results.db").exists()


@pytest.mark.parametrize(("tasks", "expected"), [
    ('path = "nowhere"', "path"),
    ('path = "x.json"\nkind = "bash"', "needs `dockerfile`"),
    ('dataset = "starter-bash"\nharbor = "."', "exactly one of"),
    ('path = "."\ndump = "x.sql"', "`dump` goes with kind"),
])
def test_a_bad_task_set_is_one_line(tmp_path, capsys, tasks, expected):
    sweep = sweep_file(tmp_path, f"[[tasks]]\n{tasks}\n", ["try_again"])
    assert main(["sweep", str(sweep), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err, err


def test_the_manifest_s_limits_are_each_task_s_own(tmp_path):
    """The runner gives an episode its task's turns and time limit, else the sweep's: a manifest's
    `max_turns` and `episode_timeout` must reach every task it makes, and none set leaves the sweep's."""
    from tasks.own import read_environment

    directory = copy_example(tmp_path)
    tasks = read_environment(directory).tasks()
    assert tasks and {(task.max_turns, task.time_limit) for task in tasks} == {(6, None)}  # the example's max_turns
    manifest = directory / "environment.toml"
    manifest.write_text(manifest.read_text().replace("max_turns = 6\n", "") + "episode_timeout = 42\n")
    tasks = read_environment(directory).tasks()
    assert tasks and {(task.max_turns, task.time_limit) for task in tasks} == {(None, 42.0)}
