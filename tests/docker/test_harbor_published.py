"""Harbor task folders as the field writes them, run (tests/fixtures/harbor-published): published
headers run with the oracle, the broken folders beside them cost only their own task, in `tasks
check` as in a sweep with another [[tasks]] entry; every failure's cause is in its line; a prebuilt
image the engine has is used; the authoring loop (`tasks init`, `tasks check`, `tasks shell`)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from environments import make_environment
from environments.runtime import Runtime
from foundation.engine import engine
from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.images.build import PARALLEL_BUILDS
from orchestrator.store.results import load_results
from orchestrator.report.summary import summarize_all
from orchestrator.tasks_cli.check import check_all
from orchestrator.tasksets.resolve import TaskSetConfig, prepare, resolve
from tasks.harbor import image_of
from tests.stores import rows

PUBLISHED = PROJECT_ROOT / "tests" / "fixtures" / "harbor-published"
HARBOR = PROJECT_ROOT / "tests" / "fixtures" / "harbor"
# Each task's verdict in `tasks check`, and words its line must hold.
EXPECTED = {
    "tb21-header": ("ok", ""),
    "tb2-docker-image": ("ok", ""),
    "harbor-026-fields": ("ok", ""),
    "no-python-no-apt": ("ok", ""),
    "busybox-scratch": ("ok", ""),  # no libc, python3, apt or bash in the image: the driver brings its own
    "typo-agent2": ("warn", "unknown table [agent2]"),
    "broken-dockerfile": ("FAIL", "exited with 100 (E: Unable to locate package no-such-package-xyz)"),
    "malformed-toml": ("FAIL", "task.toml is not valid TOML"),
    "missing-instruction": ("FAIL", "instruction.md is missing"),
    "absolute-link-in-tests": ("FAIL", "tests/expected.txt is a link to /etc/hostname, outside the task's folder"),
    "instruction-link-outside": ("FAIL", "instruction.md is a link to ../../../../README.md"),
    "reward-seven": ("FAIL", "/logs/verifier/reward.txt is 7, not a reward in [0, 1]"),
    "reward-negative": ("FAIL", "/logs/verifier/reward.json's `reward` is -0.5, not a reward in [0, 1]"),
    "verifier-needs-internet": ("FAIL", "tried to reach the internet (curl: (6) Could not resolve host: astral.sh); "
                                        "task.toml asks for the internet"),
    "solve-fails": ("FAIL", "the oracle scores 0: solve.sh exited 3: building the answer | make: *** No rule to make "
                            "target answer; the verifier: /app/answer.txt is missing or wrong"),
    "tb1-task": ("skip", "harbor tasks migrate"),
}


@pytest.fixture(scope="module")
def check_run(tmp_path_factory):
    """`tasks check` over a copy of the published folders (a place of its own: none of its images
    is built yet), once, in a process of its own: its exit status, each task's line, and all it
    printed. Its images are removed afterwards."""
    folder = shutil.copytree(PUBLISHED, tmp_path_factory.mktemp("published") / "published", symlinks=True)
    run = subprocess.run([sys.executable, "-m", "orchestrator", "tasks", "check", str(folder)], capture_output=True,
                         text=True, timeout=900, cwd=PROJECT_ROOT, env={**os.environ, "INTERCODE_TEST_VERBOSITY": "1"})
    lines = {line.split()[1]: line for line in run.stdout.splitlines() if line.startswith(("ok ", "warn", "FAIL", "skip"))}
    yield run.returncode, lines, run.stdout + run.stderr
    images = [image_of(task) for task in folder.iterdir()]
    subprocess.run(["docker", "rmi", "-f", *images, *(f"{image}-src" for image in images)], capture_output=True,
                   timeout=300)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tasks_check_gives_each_task_its_verdict_and_cause(check_run, name):
    code, lines, _ = check_run
    verdict, words = EXPECTED[name]
    assert lines[name].startswith(verdict) and words in lines[name], lines[name]
    assert code == 1


@pytest.mark.docker
def test_tasks_check_has_a_line_per_folder_and_no_traceback(check_run):
    code, lines, printed = check_run
    assert sorted(lines) == sorted(EXPECTED) and "Traceback" not in printed
    assert "note: 1 of 16 tasks ask for the internet" in printed and "--allow-internet" in printed
    assert "what each verifier wrote, per task: " in printed
    kept = Path(printed.split("what each verifier wrote, per task: ")[1].split()[0])
    assert (kept / "reward-seven" / "oracle" / "reward.txt").read_text().strip() == "7"
    assert "solve.sh exited 3" in (kept / "solve-fails" / "oracle" / "steps.txt").read_text()


@pytest.mark.docker
def test_tasks_check_builds_several_images_at_once_up_to_its_limit(check_run):
    _, _, printed = check_run
    building, most = set(), 0
    for line in printed.splitlines():
        if match := re.match(r"^\[([^\]]+)\] (building|built|failed: ) ?", line):
            (building.add if match[2] == "building" else building.discard)(match[1])
            most = max(most, len(building))
    assert 2 <= most <= PARALLEL_BUILDS, most


@pytest.mark.docker
def test_a_sweep_runs_the_published_and_the_broken_cost_only_their_own(tmp_path, capsys):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'name = "published"\noutput = "{tmp_path / "out"}"\nstrategies = ["try_again"]\n'
                     f'[[models]]\nname = "oracle"\n[[tasks]]\nharbor = "{PUBLISHED}"\n'
                     f'[[tasks]]\nharbor = "{HARBOR / "hello-file"}"\n')
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    out = tmp_path / "out"
    got = {task.split("/")[1]: (status, reward, error, attempts) for task, status, reward, error, attempts in rows(
        out, "SELECT task_id, status, reward, error, attempts FROM episodes")}
    solved = {"tb21-header", "tb2-docker-image", "harbor-026-fields", "no-python-no-apt", "busybox-scratch",
              "typo-agent2", "hello-file"}
    verifier = {"reward-seven", "reward-negative"}
    assert {name for name, found in got.items() if found[0] == "solved"} == solved
    assert {name for name, found in got.items() if found[0] == "verifier_error"} == verifier
    assert got["verifier-needs-internet"][0] == "verifier_offline"  # its own class: never the model's 0
    assert got["solve-fails"][:2] == ("submitted", 0.0)  # the model's 0: its solution did not work
    for name in ("broken-dockerfile", "malformed-toml", "missing-instruction", "absolute-link-in-tests",
                 "instruction-link-outside", "tb1-task"):
        status, _, error, _ = got[name]
        assert status == "task_error" and EXPECTED[name][1] in error and "\n" not in error
    assert all(attempts == 1 for *_, attempts in got.values())  # nothing taken for infrastructure and run again
    assert all(0.0 <= reward <= 1.0 for _, reward, _, _ in got.values() if reward is not None)
    assert all(0.0 <= r <= 1.0 for r, in rows(out, "SELECT reward FROM turns WHERE reward IS NOT NULL"))
    cells = summarize_all(load_results(out).episodes)
    assert all(cell.mean_reward is None or 0.0 <= cell.mean_reward <= 1.0 for cell in cells)
    logged = (out / "sweep.log").read_text()
    assert "ask for the internet" in logged and "unknown table [agent2]" in logged


@pytest.mark.docker
async def test_a_prebuilt_image_the_engine_has_is_used_instead_of_the_dockerfile():
    tag = "alexgshaw/tb2-docker-image:20251031"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        dockerfile = b"FROM debian:bookworm-slim\nRUN mkdir /app && echo prebuilt > /etc/fixture-origin\nWORKDIR /app\n"
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    async with engine() as docker:
        await docker.images.build(fileobj=io.BytesIO(context.getvalue()), encoding="identity", tag=tag)
        try:
            task_set = await prepare(PUBLISHED / "tb2-docker-image")
            async with Runtime.open(images=task_set.pools()) as runtime:
                async with make_environment("harbor", runtime) as env:
                    await env.reset(task_set.tasks[0], multi_turn=True)
                    assert (await env.step("cat /etc/fixture-origin")).observation.strip() == "prebuilt"
        finally:
            await docker.images.delete(tag, force=True)


@pytest.mark.docker
async def test_a_healthcheck_that_never_passes_is_the_tasks_error(tmp_path):
    folder = shutil.copytree(PUBLISHED / "harbor-026-fields", tmp_path / f"unhealthy-{uuid.uuid4().hex[:6]}")
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("test -f /app/ready", "echo not ready yet; test -f /app/never"))
    task_set = await prepare(folder)
    async with Runtime.open(images=task_set.pools()) as runtime:
        async with make_environment("harbor", runtime) as env:
            with pytest.raises(Exception, match="its healthcheck .* failed 2 times in a row: not ready yet"):
                await env.reset(task_set.tasks[0], multi_turn=True)


@pytest.mark.docker
async def test_a_verifier_that_times_out_spares_the_no_op_and_progress_is_shown(capsys):
    task_set = resolve(TaskSetConfig(harbor=str(HARBOR / "verifier-timeout")), base_dir=Path.cwd(), data_dir=None)
    said: list[str] = []
    results = await check_all(task_set, task_set.tasks, concurrency=1, say=said.append, tick=0.5)
    assert results[0].verdict == "FAIL" and "doing nothing: not run" in results[0].problem
    assert results[0].nothing is None
    assert any(line.startswith("... running: verifier-timeout: oracle: the verifier") for line in said), said


@pytest.mark.docker
def test_tasks_init_makes_a_task_that_tasks_check_passes_and_tasks_shell_opens(tmp_path, capsys):
    folder = tmp_path / "my-task"
    assert main(["tasks", "init", str(folder)]) == 0
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "environment/Dockerfile", "instruction.md", "solution/solve.sh", "task.toml", "tests/test.sh"]
    assert main(["tasks", "check", str(folder)]) == 0
    assert "ok   my-task" in capsys.readouterr().out
    assert main(["tasks", "init", str(folder)]) == 2  # not over a folder that has files
    shell = subprocess.run([sys.executable, "-m", "orchestrator", "tasks", "shell", str(folder)], cwd=PROJECT_ROOT,
                           input="pwd\nls /tests /solution 2>&1 | head -2\necho \"limit $(cat /sys/fs/cgroup/memory.max || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)\"\n"
                                 "exit 7\n", capture_output=True, text=True, timeout=300)
    assert shell.returncode == 7, shell.stderr
    assert "/app" in shell.stdout and shell.stdout.count("No such file or directory") == 2  # the agent's view
    assert f"limit {2048 << 20}" in shell.stdout  # task.toml's memory
    assert "removes the container" in shell.stderr
    left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=intercode.pool"], capture_output=True, text=True)
    assert json.dumps(left.stdout.split()) == "[]" or all(not c for c in left.stdout.split())
