"""Harbor task folders run as they are (tests/fixtures/harbor, written for the project): the
oracle solves every solvable one under every strategy, each broken verifier is a verifier error
(never the model's 0), the tests stay hidden from the agent, the reward's parts are kept, and the
container is the task's (its resources, its network, its WORKDIR) and comes back clean."""

from __future__ import annotations

from foundation.settings import PROJECT_ROOT
from orchestrator.images.specs import BY_NAME, SOURCE_LABEL
from orchestrator.tasksets.resolve import of_directory
from tasks.harbor import read_harbor

FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "harbor"
UNSUPPORTED = PROJECT_ROOT / "tests" / "fixtures" / "harbor-unsupported"


def test_task_toml_is_read_for_timeouts_resources_and_network():
    tasks = {t.name: t for t in read_harbor(FIXTURES, "fixtures")}
    assert len(tasks) >= 15 and all(t.kind == "harbor" and t.id == f"fixtures/{t.name}" for t in tasks.values())
    limits = tasks["resource-limits"].meta
    assert (limits["cpus"], limits["memory_mb"], limits["storage_mb"], limits["allow_internet"]) == (1.0, 512, 2048, False)
    assert tasks["verifier-timeout"].meta["verifier_timeout"] == 3.0
    assert tasks["verifier-env"].meta["verifier_env"] == {"EXPECTED_GREETING": tasks["verifier-env"].meta["verifier_env"]
                                                          ["EXPECTED_GREETING"]}
    assert tasks["hello-file"].query == (FIXTURES / "hello-file" / "instruction.md").read_text()
    assert tasks["hello-file"].unavailable is None


def test_what_we_do_not_support_is_one_line_naming_it():
    tasks = {t.name: (t.unavailable or "") for t in read_harbor(UNSUPPORTED, "unsupported")}
    assert "uses volumes" in tasks["compose-task"] and "`gpus`" in tasks["gpu-task"]
    assert all("\n" not in reason for reason in tasks.values())


def test_a_task_folders_images_name_the_folder_they_are_made_of() -> None:
    # the label the test suite's clean-up finds the images of its temporary folders by (tests/conftest.py)
    taskset = of_directory(PROJECT_ROOT / "tests" / "fixtures" / "harbor")
    for task in taskset.tasks:
        name = task.image.removeprefix("intercode/")
        for spec in (BY_NAME[f"{name}-src"], BY_NAME[name]):
            assert spec.labels == {SOURCE_LABEL: task.meta["dir"]}, spec


def test_a_task_gets_at_most_this_machines_cores_memory_and_a_bounded_disk(tmp_path) -> None:
    """task.toml's limits had no upper bound: a stranger's task could ask for a disk cap that fills
    the host (issue 45). It gets this machine's most, and the run says so once."""
    from orchestrator.tasksets.resolve import MOST_CPUS, MOST_MEMORY_MB, MOST_STORAGE_MB
    from tests.unit.test_host_env import task_folder

    task_folder(tmp_path, "greedy", "[environment]\ncpus = 512\nmemory_mb = 99999999\nstorage_mb = 99999999\n")
    task_folder(tmp_path, "modest", "[environment]\ncpus = 1\nmemory_mb = 512\nstorage_mb = 1024\n")
    taskset = of_directory(tmp_path)
    pools = {task.name: taskset.hardening[task.image] for task in taskset.tasks}
    assert (pools["greedy"]["cpus"], pools["greedy"]["memory_mb"], pools["greedy"]["disk_mb"]) == (
        MOST_CPUS, MOST_MEMORY_MB, MOST_STORAGE_MB)
    assert (pools["modest"]["cpus"], pools["modest"]["memory_mb"], pools["modest"]["disk_mb"]) == (1, 512, 1024)
    [note] = [n for n in taskset.notes if "greedy" in n]
    assert note.startswith("greedy's task.toml asks for 512 CPUs") and "this machine's most" in note


def test_an_mcp_server_outside_the_tasks_services_is_refused_without_the_internet(tmp_path) -> None:
    """The sweep's process calls a task's MCP servers: one at this machine's loopback or a metadata
    address would be reached from here, off the task's network (issue 45)."""
    from tests.unit.test_host_env import task_folder

    server = '[[environment.mcp_servers]]\nname = "probe"\ntransport = "streamable-http"\nurl = "{}"\n'
    task_folder(tmp_path, "loopback", server.format("http://127.0.0.1:8080/mcp"))
    task_folder(tmp_path, "metadata", server.format("http://169.254.169.254/latest/meta-data/"))
    task_folder(tmp_path, "own-service", server.format("http://tools:8000/mcp"), compose=(
        "services:\n  main:\n    build: .\n  tools:\n    image: debian:bookworm-slim\n"))
    tasks = {t.name: t for t in of_directory(tmp_path).tasks}
    for name, url in [("loopback", "http://127.0.0.1:8080/mcp"), ("metadata", "http://169.254.169.254/latest/meta-data/")]:
        assert tasks[name].unavailable.startswith(f"task.toml's MCP server probe at {url} is not one of the "
                                                          "task's services, and the task has no internet"), name
    assert tasks["own-service"].unavailable is None
