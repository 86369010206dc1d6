"""One episode function (agents/episode.py, `run_episode`) that the sweep's runner, `tasks check`
and `validate` play their episodes through, and nightly's gate through the sweep; none of them
steps an environment or runs a strategy on its own. Played for real on a Docker-free sandbox
(foundation/local.py) with an environment of your own: `validate`'s gold agent scores 1, `tasks
check`'s gold scores 1 and its agent that does nothing scores 0."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from environments.runtime import Runtime
from foundation.local import LocalProvider
from foundation.settings import PROJECT_ROOT
from orchestrator.fidelity.validate import validate_all
from orchestrator.tasks_cli.check import Checker
from tasks import Task
from tests.local_starter import environment_of_your_own

PLAYERS = {  # module -> the function that plays its episodes
    "orchestrator/sweep/runner.py": "run_episode",
    "orchestrator/tasks_cli/check.py": "run_episode",
    "orchestrator/fidelity/validate.py": "run_episode",
    "orchestrator/nightly/gate.py": "run_sweep",  # whose workers' runner is the first above
}
OWN_LOOP = ("step", "reset", "begin_reset", "play")  # what a module playing its own episode would call


def calls(path: str) -> set[str]:
    tree = ast.parse((PROJECT_ROOT / path).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "")
    return names


@pytest.mark.parametrize("path", PLAYERS)
def test_every_command_plays_through_the_one_episode_function(path: str) -> None:
    found = calls(path)
    assert PLAYERS[path] in found
    assert not found & set(OWN_LOOP), f"{path} plays an episode its own way: {sorted(found & set(OWN_LOOP))}"


def test_the_check_sees_a_module_that_steps_an_environment_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine.py"
    mine.write_text("async def go(env):\n    await env.reset(None)\n    return await env.step('ls')\n")
    monkeypatch.setattr("tests.unit.test_one_episode_function.PROJECT_ROOT", tmp_path)
    assert {"reset", "step"} <= calls("mine.py")


MANIFEST = 'name = "print-three"\nlanguage = "shell"\nscore_every_action = false\n'
TASKS = '{"query": "Print 3.", "gold": "echo 3"}\n'
REWARD = '''
async def reward(sandbox, task, answer):
    return float(answer.split() == ["3"]), {"seen": answer}
'''


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    [found] = environment_of_your_own(tmp_path_factory.mktemp("print-three"), MANIFEST, TASKS, REWARD)
    return found


async def test_validate_and_tasks_check_play_their_agents_for_real(task: Task, tmp_path: Path) -> None:
    async with Runtime.local(LocalProvider({task.image: {}})) as runtime:
        [gold] = await validate_all(runtime, task.kind, [task], 1)
        check = await Checker(runtime, tmp_path, lambda line: None).check(task)
    assert (gold.status, gold.reward) == ("pass", 1.0)
    assert (check.oracle, check.nothing, check.problem) == (1.0, 0.0, "")
    kept = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("steps.txt"))
    assert len(kept) == 2 and "$ echo 3\n3" in next(tmp_path.rglob("oracle/steps.txt")).read_text()
