"""Environments of your own (a Dockerfile, a dataset, a reward function and a manifest, from outside
the project) and your data in our kinds' formats: every way in (a sweep file, `tasks check`,
validate, the Python API, the gym adapter), every strategy, and one line for every mistake."""

from __future__ import annotations

import json

import gymnasium
import pytest

from agents.base import STRATEGIES
from environments import make_environment
from environments.kind import gold_actions
from environments.runtime import Runtime
from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.tasksets.resolve import prepare
from tests.stores import rows
from tests.unit.test_own_tasks import EXAMPLE, copy_example, sweep_file

FIXTURES = PROJECT_ROOT / "tests" / "fixtures"


# ----------------------------------------------------------------------------- running them


@pytest.mark.docker
def test_the_example_sweep_solves_with_the_oracle_and_runs_the_simulated_model(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(EXAMPLE / "sweep.toml"), "--output", str(out), "--quiet"]) == 0
    by_model = dict(rows(out, "SELECT model, count(*) FROM episodes GROUP BY model"))
    assert by_model == {"oracle": 12, "openai/sim": 12}
    assert rows(out, "SELECT count(*) FROM episodes WHERE model = 'oracle' AND success = 1") == [(12,)]
    sim = rows(out, "SELECT strategy, status, n_turns FROM episodes WHERE model = 'openai/sim'")
    assert {s for s, _, _ in sim} == {"try_again", "tools"} and all(n >= 1 for _, _, n in sim)
    assert any(status == "solved" for _, status, _ in sim) and not any(s.endswith("error") for _, s, _ in sim)
    assert rows(out, "SELECT DISTINCT env, max_turns FROM episodes") == [("jq", 6)]  # the manifest's limit
    breakdown = rows(out, "SELECT t.breakdown FROM turns t JOIN episodes e ON e.id = t.episode_id "
                          "WHERE e.model = 'oracle' AND t.reward = 1 LIMIT 1")[0][0]
    assert json.loads(breakdown) == {"matched": 1, "expected": 1} or "matched" in json.loads(breakdown)


@pytest.mark.docker
def test_every_strategy_runs_an_environment_of_your_own(tmp_path, capsys):
    sweep = sweep_file(tmp_path, f'[[tasks]]\npath = "{EXAMPLE}"\nlimit = 3\n', list(STRATEGIES))
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    failed = rows(tmp_path / "out", "SELECT strategy, task_id, status, error FROM episodes WHERE success = 0")
    # every one solves with the oracle but `nop`, which only submits (as Harbor's nop agent): below 1, never an error
    assert sorted((strategy, status) for strategy, _, status, _ in failed) == [("nop", "submitted")] * 3, failed
    assert rows(tmp_path / "out", "SELECT count(*) FROM episodes") == [(3 * len(STRATEGIES),)]


@pytest.mark.docker
def test_a_reward_that_raises_or_answers_text_is_a_task_error_of_that_episode_only(tmp_path, capsys):
    sweep = sweep_file(tmp_path, f'[[tasks]]\npath = "{FIXTURES / "own" / "flaky-reward"}"\n', ["try_again", "tools"])
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    found = {(task, strategy): (status, failure, error) for task, strategy, status, failure, error in rows(
        tmp_path / "out", "SELECT task_id, strategy, status, failure_class, error FROM episodes")}
    for strategy in ("try_again", "tools"):
        assert found["flaky-reward/0", strategy][:2] == ("solved", None)
        status, failure, error = found["flaky-reward/1", strategy]
        assert (status, failure) == ("task_error", "task") and "reward.py:6 in reward of flaky-reward raised KeyError" \
            in error  # the file and the line it raised at
        status, failure, error = found["flaky-reward/2", strategy]
        assert (status, failure) == ("task_error", "task") and "returned 'yes', not a number in [0, 1]" in error
    kept = rows(tmp_path / "out", "SELECT count(*) FROM turns t JOIN episodes e ON e.id = t.episode_id "
                                  "WHERE e.status = 'task_error'")
    assert kept[0][0] >= 4  # the failed episodes' turns are stored with them
    assert rows(tmp_path / "out", "SELECT count(*) FROM episodes WHERE attempts > 1") == [(0,)]  # never re-run
    logged = [json.loads(line) for line in (tmp_path / "out" / "sweep.log").read_text().splitlines()]
    assert any(e.get("event") == "episode_not_scored" and "reward.py:6 in reward" in e["error"] for e in logged)


@pytest.mark.docker
def test_python_and_sql_environments_and_your_data_in_our_kinds(tmp_path, capsys):
    data = FIXTURES / "data"
    tasks = "\n".join([
        f'[[tasks]]\npath = "{FIXTURES / "own" / "calc-py"}"',
        f'[[tasks]]\npath = "{FIXTURES / "own" / "shop-sql"}"',
        f'[[tasks]]\nname = "my-bash"\npath = "{data / "fs" / "tasks.json"}"\nkind = "bash"\n'
        f'dockerfile = "{data / "fs" / "Dockerfile"}"',
        f'[[tasks]]\nname = "my-sql"\npath = "{data / "shop" / "spider.json"}"\nkind = "sql"\ndump = "{data / "shop" / "shop2.sql"}"',
        f'[[tasks]]\nname = "my-mbpp"\npath = "{data / "mbpp.jsonl"}"\nkind = "python"',
    ])
    sweep = sweep_file(tmp_path, tasks, ["try_again", "single", "tools"])
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    failed = rows(tmp_path / "out", "SELECT task_set, strategy, task_id, status, error FROM episodes WHERE success = 0")
    assert failed == []
    counts = dict(rows(tmp_path / "out", "SELECT task_set, count(*) FROM episodes GROUP BY task_set"))
    assert counts == {"calc-py": 6, "shop-sql": 6, "my-bash": 6, "my-sql": 6, "my-mbpp": 6}
    envs = dict(rows(tmp_path / "out", "SELECT DISTINCT task_set, env FROM episodes"))
    assert envs == {"calc-py": "calc-py", "shop-sql": "shop-sql", "my-bash": "bash", "my-sql": "sql", "my-mbpp": "python"}


@pytest.mark.docker
def test_tasks_check_and_validate_an_environment_of_your_own(capsys):
    assert main(["tasks", "check", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert out.count("ok   ") == 6 and "6 tasks: 6 ok, 0 with warnings, 0 failed" in out
    assert main(["tasks", "check", str(FIXTURES / "own" / "flaky-reward")]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "reward.py:6 in reward of flaky-reward raised KeyError" in out and "1 ok, 0 with warnings, 2 failed" in out
    assert main(["validate", str(EXAMPLE)]) == 0
    assert "jq: 6/6 gold solutions score 1.0" in capsys.readouterr().out


@pytest.mark.docker
async def test_the_python_api_runs_an_environment_of_your_own():
    task_set = await prepare(EXAMPLE)
    assert task_set.kind == "jq" and len(task_set.tasks) == 6
    async with Runtime.open(images=task_set.pools()) as runtime:
        async with make_environment(task_set.kind, runtime) as env:
            task = task_set.tasks[1]
            assert await env.reset(task) == task.query
            step = await env.step("pwd")
            assert step.observation.strip() == "/data" and step.reward == 0  # the Dockerfile's WORKDIR
            step = await env.step(gold_actions(task)[0])
            reward, info = await env.score()
            assert (step.observation.strip(), reward) == ("560.5", 1.0) and env.breakdown() == {"matched": 1, "expected": 1}
            step = await env.step("echo 560")
            assert (await env.score())[0] == 0.0


@pytest.mark.docker
def test_the_gym_adapter_runs_an_environment_of_your_own():
    env = gymnasium.make("orchestrator.task_gym:intercode-tasks-v0", path=str(EXAMPLE))
    try:
        observation, info = env.reset(options={"index": 0})
        assert "How many orders" in observation and info["task"] == "jq/0"
        observation, reward, terminated, truncated, info = env.step("jq length orders.json")
        assert observation.strip() == "6" and not terminated
        observation, reward, terminated, truncated, info = env.step("submit")
        assert reward == 1.0 and terminated
    finally:
        env.close()


@pytest.mark.docker
def test_a_dockerfile_that_fails_to_build_costs_only_its_own_episodes(tmp_path, capsys):
    directory = copy_example(tmp_path)
    (directory / "Dockerfile").write_text("FROM debian:bookworm-slim\nRUN echo broken && false\n")
    (directory / "environment.toml").write_text((directory / "environment.toml").read_text().replace('"jq"', '"jq-broken"'))
    sweep = sweep_file(tmp_path, f'[[tasks]]\npath = "{directory}"\n[[tasks]]\npath = "{EXAMPLE}"\n', ["try_again"])
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    found = rows(tmp_path / "out", "SELECT task_id, status, error FROM episodes")
    broken = [(status, error) for task, status, error in found if task.startswith("jq-broken/")]
    assert len(broken) == 6 and all(status == "task_error" for status, _ in broken)
    error = broken[0][1]
    assert f"its image failed to build: {directory / 'Dockerfile'}: building" in error
    assert "the command exited with 1 (broken)" in error  # the step's own last word
    assert [status for task, status, _ in found if task.startswith("jq/")] == ["solved"] * 6  # the other entry ran
