"""Harbor task folders run as they are (tests/fixtures/harbor, written for the project): the
oracle solves every solvable one under every strategy, each broken verifier is a verifier error
(never the model's 0), the tests stay hidden from the agent, the reward's parts are kept, and the
container is the task's (its resources, its network, its WORKDIR) and comes back clean."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from environments import make_environment
from environments.harbor import UNPACK_SOLUTION, solution_action
from environments.runtime import Runtime
from orchestrator.cli import main
from orchestrator.report.summary import summarize_all
from orchestrator.store.results import load_results
from orchestrator.tasksets.resolve import TaskSet, TaskSetConfig, prepare, resolve
from tests.stores import rows
from tests.unit.test_harbor import FIXTURES, UNSUPPORTED

BROKEN = {"no-reward-file": "wrote no reward", "test-script-cannot-start": "could not start (exit 126)",
          "verifier-timeout": "ran longer than its 3 s", "reward-json-without-headline": "`checks_passed` is 3, not a reward in [0, 1]"}


def expected(folder: Path, strategy: str) -> str:
    # a multi-step task's steps each a run of the strategy (as Harbor runs them): Single Turn's one
    # action solves each step, as the others' do
    return "verifier_error" if folder.name in BROKEN else "solved"


@pytest.mark.docker
def test_a_sweep_over_the_folders_scores_the_oracle_and_classes_the_broken(tmp_path, capsys):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'name = "harbor"\noutput = "{tmp_path / "out"}"\nstrategies = ["try_again", "tools", "single"]\n'
                     f'[[models]]\nname = "oracle"\n[[tasks]]\nharbor = "{FIXTURES}"\n'
                     f'[[tasks]]\nharbor = "{UNSUPPORTED}"\n')
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    out = tmp_path / "out"
    folders = sorted(p for p in FIXTURES.iterdir() if (p / "task.toml").is_file())
    for strategy in ("try_again", "tools", "single"):
        got = {task.split("/")[1]: (status, reward, error) for task, status, reward, error in rows(
            out, "SELECT task_id, status, reward, error FROM episodes WHERE strategy = ? AND task_set = 'harbor'",
            (strategy,))}
        assert {name: status for name, (status, _, _) in got.items()} == {f.name: expected(f, strategy) for f in folders}
        assert all(reward == 1.0 for status, reward, _ in got.values() if status == "solved")
        for name, words in BROKEN.items():
            assert words in got[name][2], got[name]
    unsupported = rows(out, "SELECT status, failure_class, error FROM episodes WHERE task_set = 'harbor-unsupported'")
    assert len(unsupported) == 6 and all(s == "task_error" and "not supported" in e for s, _, e in unsupported)
    cells = {s.strategy: s for s in summarize_all(load_results(out).episodes) if s.task_set == "harbor"}
    assert all(s.failures["verifier"] == len(BROKEN) for s in cells.values())  # never the model's 0
    assert all(s.success_rate == 1.0 for strategy, s in cells.items() if strategy != "single")
    # Harbor's multi-step recipe under `single`: each step a run of its own with the step's instruction
    # and its own one action (it stored 0.5 when the steps shared one run: the first step solved, not the second)
    steps = rows(out, "SELECT e.reward, e.id FROM episodes e WHERE e.task_id = 'harbor/multi-step' AND e.strategy = 'single'")
    assert [reward for reward, _ in steps] == [1.0]
    actions = [a for a, in rows(out, "SELECT action FROM turns WHERE episode_id = ? ORDER BY rowid", (steps[0][1],))]
    assert sum(a.startswith(UNPACK_SOLUTION) for a in actions) == 2 and actions.count("submit") == 2, actions
    parts = rows(out, "SELECT t.breakdown FROM turns t JOIN episodes e ON e.id = t.episode_id WHERE "
                      "e.task_id = 'harbor/fractional-reward' AND t.breakdown IS NOT NULL")
    assert parts and all(json.loads(p) == {"reward": 1.0, "north": 1.0, "east": 1.0, "south": 1.0, "west": 1.0} for p, in parts)
    seen = rows(out, "SELECT t.observation FROM turns t JOIN episodes e ON e.id = t.episode_id WHERE "
                     "e.task_id = 'harbor/resource-limits' AND t.breakdown IS NOT NULL LIMIT 1")[0][0]
    limits = json.loads(seen.split("limits: ", 1)[1].splitlines()[0])
    assert limits["memory_limit_mb"] == 512 and limits["cpu_limit"] == 1.0  # task.toml's resources, as the task saw them


def one_task(name: str, tmp_path: Path | None = None, **changes: str) -> TaskSet:
    """The fixture `name` as a task set; with `changes`, a copy whose task.toml has them replaced."""
    folder = FIXTURES / name
    if changes:
        assert tmp_path is not None
        folder = shutil.copytree(folder, tmp_path / f"{name}-{uuid.uuid4().hex[:6]}")
        text = (folder / "task.toml").read_text()
        for old, new in changes.items():
            assert old in text
            text = text.replace(old, new)
        (folder / "task.toml").write_text(text)
    return resolve(TaskSetConfig(harbor=str(folder), allow_internet=True), base_dir=Path.cwd(), data_dir=None)


@pytest.mark.docker
async def test_the_agent_never_sees_tests_or_solution_and_the_reset_takes_them_away(tmp_path):
    task_set = await prepare(FIXTURES / "hidden-tests")
    task = task_set.tasks[0]
    pools = {image: config.model_copy(update={"max_size": 1}) for image, config in task_set.pools().items()}
    async with Runtime.open(images=pools) as runtime:
        async with make_environment("harbor", runtime) as env:
            await env.reset(task, multi_turn=True)
            first = await env.step("ls /tests /solution; ls -ld /logs/*; pwd")
            assert first.observation.count("No such file or directory") == 2 and "/app" in first.observation
            # /logs's folders there from the start, open to every user, as Harbor mounts them: none holds anything
            assert first.observation.count("drwxrwxrwx") == 3, first.observation
            await env.step(solution_action(task))
            done = await env.step("submit")
            assert done.done and done.reward == 1.0 and "Verifier: reward 1" in done.observation
            assert env.sandbox is not None
            trajectory = json.loads((await env.sandbox.exec(["cat", "/logs/agent/trajectory.json"])).output)
            assert trajectory["schema_version"].startswith("ATIF-") and trajectory["steps"][0]["source"] == "user"
            calls = [s["tool_calls"][0]["arguments"]["command"] for s in trajectory["steps"][1:]]
            assert calls[0].startswith("ls /tests") and len(calls) == 2  # the agent's two actions, not the submit
            container = env.sandbox.container_id
        async with make_environment("harbor", runtime) as env:  # the same container, after its reset
            await env.reset(task, multi_turn=True)
            again = await env.step("ls /tests /solution /app/answer.txt; ls -A /logs/*")
            assert env.sandbox is not None and env.sandbox.container_id == container
            assert again.observation.count("No such file or directory") == 3
            assert "trajectory.json" not in again.observation and "reward" not in again.observation, again.observation


@pytest.mark.docker
async def test_partial_work_gets_the_fractional_reward_with_its_parts():
    task_set = await prepare(FIXTURES / "fractional-reward")
    async with Runtime.open(images=task_set.pools()) as runtime:
        async with make_environment("harbor", runtime) as env:
            await env.reset(task_set.tasks[0], multi_turn=True)
            await env.step("mkdir -p /app/out && cd /app/out && echo north > north.txt && echo east > east.txt")
            step = await env.step("submit")
            assert step.reward == 0.5 and env.breakdown() == {"reward": 0.5, "north": 1.0, "east": 1.0, "south": 0.0,
                                                           "west": 0.0}


@pytest.mark.docker
async def test_the_network_is_given_only_when_the_task_and_the_user_allow_it(tmp_path):
    for allow, interfaces in ((False, "lo"), (True, "eth0 lo")):
        task_set = one_task("hello-file", tmp_path, **{"allow_internet = false": f"allow_internet = {str(allow).lower()}"})
        await prepare(Path(task_set.tasks[0].meta["dir"]))
        async with Runtime.open(images=task_set.pools()) as runtime:
            async with make_environment("harbor", runtime) as env:
                await env.reset(task_set.tasks[0], multi_turn=True)
                step = await env.step("ls /sys/class/net | sort | tr '\\n' ' '")
                assert step.observation.strip() == interfaces
    refused = resolve(TaskSetConfig(harbor=task_set.tasks[0].meta["dir"]), base_dir=Path.cwd(), data_dir=None)
    assert refused.hardening[refused.tasks[0].image]["network"] is False  # the user did not allow it


@pytest.mark.docker
async def test_the_agents_time_runs_out_into_the_verifier(tmp_path):
    task_set = one_task("hello-file", tmp_path, **{"timeout_sec = 120.0": "timeout_sec = 2.0"})
    await prepare(Path(task_set.tasks[0].meta["dir"]))
    async with Runtime.open(images=task_set.pools()) as runtime:
        async with make_environment("harbor", runtime) as env:
            await env.reset(task_set.tasks[0], multi_turn=True)
            slow = await env.step("sleep 5; echo late")
            assert "late" not in slow.observation and "stopped" in slow.observation and not slow.done
            after = await env.step("echo 'Hello, world!' > /app/hello.txt")
            assert after.done and after.reward == 0.0 and "time (2 s) is up" in after.observation


@pytest.mark.docker
def test_tasks_check_is_one_line_per_task(capsys):
    assert main(["tasks", "check", str(FIXTURES)]) == 1  # the four broken verifiers
    out = capsys.readouterr().out.splitlines()
    lines = {line.split()[1]: line for line in out if line.startswith(("ok ", "FAIL", "skip"))}
    folders = [p.name for p in FIXTURES.iterdir() if (p / "task.toml").is_file()]
    assert sorted(lines) == sorted(folders)
    assert all(lines[name].startswith("FAIL") and words in lines[name] for name, words in BROKEN.items())
    # its verifier writes no reward for an agent that did nothing (it plants a stale one): a defect to fix
    assert lines["stale-reward-file"].startswith("FAIL") and "doing nothing: tests/test.sh wrote no reward" in \
        lines["stale-reward-file"]
    assert all(line.startswith("ok ") for name, line in lines.items() if name not in {*BROKEN, "stale-reward-file"})
    assert main(["tasks", "check", str(UNSUPPORTED)]) == 0
    assert capsys.readouterr().out.count("skip ") == 2
