"""The rest of Harbor's task format: services beside the agent's container (compose), the image's
ENTRYPOINT, multi-step tasks, MCP servers, skills, artifacts, rewards without a headline, and a
verifier that needs the internet. The fixtures are tests/fixtures/harbor (solved by the oracle)
and tests/fixtures/harbor-failing (each failing its own way)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from environments.harbor import _below, _front_matter, _headline
from environments.kind import gold_actions
from foundation.settings import PROJECT_ROOT
from orchestrator.tasksets.resolve import TaskSetConfig, resolve
from tasks.harbor import read_harbor
from tasks.harbor_compose import read_compose
from tasks.harbor_config import Malformed, Unsupported

HARBOR = PROJECT_ROOT / "tests" / "fixtures" / "harbor"


# ---------------------------------------------------------------- reading (no engine)

def compose(tmp_path: Path, text: str, *contexts: str) -> Path:
    environment = tmp_path / "environment"
    for context in contexts:
        (environment / context).mkdir(parents=True)
        (environment / context / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    environment.mkdir(exist_ok=True)
    (environment / "docker-compose.yaml").write_text(textwrap.dedent(text))
    return environment


def test_a_compose_file_gives_its_services_in_full(tmp_path):
    found = read_compose(compose(tmp_path, """
        services:
          main:
            environment: [API_URL=http://api:8000]
            depends_on: {api: {condition: service_healthy}}
          api:
            build: {context: ./api}
            command: python3 server.py --port 8000
            environment: {MODE: test, DEBUG: true}
            user: "1000:1000"
            expose: ["8000"]
            healthcheck: {test: "curl -sf localhost:8000", interval: 1m30s, timeout: 500ms, retries: 4, start_period: 2s}
            depends_on: [db]
          db:
            image: postgres:16
            healthcheck: {disable: true}
            frobnicate: 1
        """, "api"))
    assert found is not None and found.main_env == {"API_URL": "http://api:8000"}
    api, db = found.services
    assert api.command == ["python3", "server.py", "--port", "8000"] and api.environment == {"MODE": "test", "DEBUG": "true"}
    assert api.healthcheck == {"test": ["CMD-SHELL", "curl -sf localhost:8000"], "interval": 90.0, "timeout": 0.5,
                               "start_period": 2.0, "retries": 4}
    assert api.depends_on == {"db": "service_started"} and api.context and api.context.endswith("environment/api")
    assert api.user == "1000:1000" and db.user is None
    assert db.image == "postgres:16" and db.context is None and db.healthcheck == {"test": ["NONE"]}
    assert found.warnings == ["environment/docker-compose.yaml: service db's `frobnicate` is not a compose key we "
                              "know; it is ignored"]


@pytest.mark.parametrize(("text", "error", "words"), [
    ("services:\n  db:\n    image: x\n    volumes: ['./d:/d']\n", Unsupported, "uses volumes"),
    ("services:\n  db:\n    image: x\n    network_mode: host\n", Unsupported, "another network mode"),
    ("services:\n  db:\n    image: x\n    depends_on: [main]\n", Unsupported, "depends on `main`"),
    ("services:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: x\n    depends_on: [a]\n", Malformed, "a cycle"),
    ("services:\n  db:\n    image: x\n    depends_on: [nobody]\n", Malformed, "which is not a service"),
    ("services:\n  db:\n    command: run\n", Malformed, "neither `build` nor `image`"),
    ("services:\n  db:\n    build: ./nowhere\n", Malformed, "nowhere/Dockerfile is missing"),
    ("services:\n  db:\n    image: x\n    healthcheck: {test: [CURL, x]}\n", Malformed, "CMD, CMD-SHELL or NONE"),
    ("services:\n  db:\n    image: x\n    healthcheck: {test: x, interval: soon}\n", Malformed, "a duration"),
    ("services: [a, b]\n", Malformed, "no `services` table"),
    ("services:\n  db: {image: x\n", Malformed, "not valid YAML"),
])
def test_what_a_compose_file_asks_that_we_cannot_do_is_one_line(tmp_path, text, error, words):
    with pytest.raises(error) as raised:
        read_compose(compose(tmp_path, text))
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_a_multi_step_folder_is_read_with_each_steps_instruction():
    task = read_harbor(HARBOR / "multi-step", "h")[0]
    steps = task.meta["steps"]
    assert [s["name"] for s in steps] == ["create", "extend"] and task.query == steps[0]["instruction"]
    assert steps[0]["min_reward"] == {"reward": 1.0} and steps[1]["verifier_env"] == {"EXPECTED_LINES": "3"}
    assert steps[0]["artifacts"] == [{"source": "/app/seed.txt", "destination": None, "exclude": []}]
    assert task.meta["artifacts"][0]["source"] == "/app/notes.txt" and task.meta["reward_strategy"] == "mean"
    assert gold_actions(task)[1::2] == ["submit", "submit"]  # each step's solve.sh, then its submit


def test_a_step_without_its_instruction_is_that_tasks_line(tmp_path):
    import shutil
    folder = shutil.copytree(HARBOR / "multi-step", tmp_path / "multi-step")
    (folder / "steps" / "extend" / "instruction.md").unlink()
    task = read_harbor(folder, "h")[0]
    assert task.unavailable == "multi-step: steps/extend/instruction.md is missing" and task.malformed


def test_the_pool_of_a_task_with_services_starts_them_beside_it():
    task_set = resolve(TaskSetConfig(harbor=str(HARBOR / "service-api")), base_dir=Path.cwd(), data_dir=None)
    config = task_set.pools()[task_set.tasks[0].image]
    (api,) = config.services
    assert config.entrypoint and api.name == "api" and api.image.endswith("-svc-api")
    assert api.healthcheck is not None and api.healthcheck.interval == 1.0 and not config.hardening.network
    assert "NET_BIND_SERVICE" not in config.hardening.cap_drop  # a service the entrypoint starts may use port 80


def test_the_headline_and_the_early_stop_follow_harbor():
    assert _headline({"reward": 0.3, "style": 1.0}) == 0.3  # `reward` when there is one
    assert _headline({"correctness": 0.25}) == 0.25  # the one key, as Harbor's CLI reads it
    assert _headline({"correctness": 1.0, "style": 0.5}) == 0.75  # no headline in Harbor: the mean here
    assert _below({"reward": 0.5}, {"reward": 1.0}) and not _below({"reward": 1.0}, {"reward": 1.0})
    assert _below({"style": 1.0}, {"reward": 0.1})  # a key the step lacks misses its threshold
    assert _front_matter("---\nname: sum\ndescription: 'Adds up.'\n---\nbody") == {"name": "sum", "description": "Adds up."}
