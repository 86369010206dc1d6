"""A task folder takes a variable of this machine only when its task set allows it by name.

The attack (issue 45, probed): a downloaded Harbor task with `env = { LEAKED = "${ANTHROPIC_API_KEY}" }`
had the host's key resolved into its container, where its oracle wrote it out. Now a `${VAR}` that
the [[tasks]] entry does not name in `host_env` (the CLI's `--host-env`) refuses that task in one
line, and is never read, in the task's environment, its verifier's, its steps' and its services'.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.tasksets.resolve import of_directory
from tasks.harbor_config import host_refusal, read_config, resolve

SECRET = "sk-ant-host-secret-never-in-a-task"


def task_folder(root: Path, name: str, toml: str = "", compose: str = "") -> Path:
    folder = root / name
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "solution").mkdir()
    (folder / "task.toml").write_text('version = "1.0"\n' + toml)
    (folder / "instruction.md").write_text("Write hello into /app/hello.txt.\n")
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\necho hello > /app/hello.txt\n")
    if compose:
        (folder / "environment" / "docker-compose.yaml").write_text(compose)
    return folder


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("INTERCODE_TEST_ALLOWED", "fine")
    monkeypatch.delenv("INTERCODE_TEST_UNSET", raising=False)
    root = tmp_path / "tasks"
    task_folder(root, "leaks-the-key", '[environment]\nenv = { LEAKED = "${ANTHROPIC_API_KEY}" }\n')
    task_folder(root, "verifier-leaks", '[verifier]\nenv = { JUDGE_KEY = "${ANTHROPIC_API_KEY}" }\n')
    task_folder(root, "service-leaks", compose=(
        'services:\n  main:\n    build: .\n  sidecar:\n    image: debian:bookworm-slim\n'
        '    environment:\n      KEY: "${ANTHROPIC_API_KEY}"\n'))
    task_folder(root, "default-only", '[environment]\nenv = { MODE = "${ANTHROPIC_API_KEY:-offline}" }\n')
    task_folder(root, "allowed", '[environment]\nenv = { OK = "${INTERCODE_TEST_ALLOWED}" }\n')
    task_folder(root, "allowed-unset", '[environment]\nenv = { NEED = "${INTERCODE_TEST_UNSET}" }\n')
    task_folder(root, "honest")
    return root


def test_an_unlisted_variable_refuses_its_task_in_one_line_and_the_others_run(folders: Path):
    tasks = {t.name: t for t in of_directory(folders).tasks}
    for name, where in [("leaks-the-key", "task.toml's [environment] env `LEAKED`"),
                        ("verifier-leaks", "task.toml's [verifier] env `JUDGE_KEY`"),
                        ("service-leaks", "environment/docker-compose.yaml's service sidecar's environment `KEY`")]:
        reason = tasks[name].unavailable
        assert reason == (f"{where} takes ${{ANTHROPIC_API_KEY}} from this machine, which this task set "
                          "does not allow: allow it with `host_env = [\"ANTHROPIC_API_KEY\"]` in its [[tasks]] "
                          "(tasks check and tasks shell: --host-env ANTHROPIC_API_KEY), or remove it"), reason
        assert "\n" not in reason and SECRET not in reason
        assert tasks[name].image == ""  # nothing built or leased for it: its episodes are its one line (a sweep
        # stored them as "no such image" infra errors: tests/docker/test_hostile_sweep.py)
    for name in ("honest", "default-only"):
        assert tasks[name].unavailable is None and tasks[name].meta["host_env"] == []
    assert "INTERCODE_TEST_ALLOWED" in tasks["allowed"].unavailable


def test_a_default_is_taken_and_the_host_s_value_never_read_unless_allowed(folders: Path):
    tasks = {t.name: t for t in of_directory(folders).tasks}
    assert resolve(dict(tasks["default-only"].meta["env"]), tasks["default-only"].meta["host_env"]) == {"MODE": "offline"}
    assert resolve({"K": "${ANTHROPIC_API_KEY}"}) == {"K": ""}  # even if asked directly: not in the allowed names
    assert resolve({"K": "${ANTHROPIC_API_KEY}"}, ["ANTHROPIC_API_KEY"]) == {"K": SECRET}


def test_allowed_variables_reach_the_task_and_an_allowed_unset_one_is_one_line(folders: Path):
    tasks = {t.name: t for t in of_directory(folders, host_env=["INTERCODE_TEST_ALLOWED", "INTERCODE_TEST_UNSET"]).tasks}
    allowed = tasks["allowed"].meta
    assert allowed["host_env"] == ["INTERCODE_TEST_ALLOWED"]
    assert resolve(dict(allowed["env"]), allowed["host_env"]) == {"OK": "fine"}
    assert tasks["allowed-unset"].unavailable == (
        "task.toml's [environment] env `NEED` needs the variable INTERCODE_TEST_UNSET set on this machine: "
        "export it, then run again")
    assert "ANTHROPIC_API_KEY" in tasks["leaks-the-key"].unavailable  # still not allowed


def test_the_refusal_looks_at_every_table_a_template_can_be_in():
    settings, _ = read_config('[[steps]]\nname = "one"\n[steps.verifier]\nenv = { K = "${INTERCODE_TEST_STEP}" }\n')
    assert "[[steps]] one verifier env `K`" in (host_refusal(settings, ()) or "")
    assert host_refusal({**settings, "steps": []}, ()) is None
