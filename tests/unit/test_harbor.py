"""Harbor task folders run as they are (tests/fixtures/harbor, written for the project): the
oracle solves every solvable one under every strategy, each broken verifier is a verifier error
(never the model's 0), the tests stay hidden from the agent, the reward's parts are kept, and the
container is the task's (its resources, its network, its WORKDIR) and comes back clean."""

from __future__ import annotations

from foundation.settings import PROJECT_ROOT
from orchestrator.images.specs import BY_NAME, SOURCE_LABEL
from orchestrator.tasksets import of_directory
from tasks.harbor import read_harbor

FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "harbor"
UNSUPPORTED = PROJECT_ROOT / "tests" / "fixtures" / "harbor-unsupported"


def test_task_toml_is_read_for_timeouts_resources_and_network():
    tasks = {t.name: t for t in read_harbor(FIXTURES, "fixtures")}
    assert len(tasks) >= 15 and all(t.env == "harbor" and t.id == f"fixtures/{t.name}" for t in tasks.values())
    limits = tasks["resource-limits"].meta
    assert (limits["cpus"], limits["memory_mb"], limits["storage_mb"], limits["allow_internet"]) == (1.0, 512, 2048, False)
    assert tasks["verifier-timeout"].meta["verifier_timeout"] == 3.0
    assert tasks["verifier-env"].meta["verifier_env"] == {"EXPECTED_GREETING": tasks["verifier-env"].meta["verifier_env"]
                                                          ["EXPECTED_GREETING"]}
    assert tasks["hello-file"].query == (FIXTURES / "hello-file" / "instruction.md").read_text()
    assert "unavailable" not in tasks["hello-file"].meta


def test_what_we_do_not_support_is_one_line_naming_it():
    tasks = {t.name: t.meta.get("unavailable", "") for t in read_harbor(UNSUPPORTED, "unsupported")}
    assert "uses volumes" in tasks["compose-task"] and "`gpus`" in tasks["gpu-task"]
    assert all("\n" not in reason for reason in tasks.values())


def test_a_task_folders_images_name_the_folder_they_are_made_of() -> None:
    # the label the test suite's clean-up finds the images of its temporary folders by (tests/conftest.py)
    taskset = of_directory(PROJECT_ROOT / "tests" / "fixtures" / "harbor")
    for task in taskset.tasks:
        name = task.image.removeprefix("intercode/")
        for spec in (BY_NAME[f"{name}-src"], BY_NAME[name]):
            assert spec.labels == {SOURCE_LABEL: task.meta["dir"]}, spec
