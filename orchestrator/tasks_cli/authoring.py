"""`tasks init DIR` and `tasks shell DIR`: start a Harbor task folder, and step into a task's
container as its agent would be (its image with our layer, its working directory, its variables,
limits and network; no tests, no solution), through the engine's own `docker exec -it`."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from environments import make_environment
from environments.runtime import Runtime
from environments.workspace import WorkspaceEnv
from foundation.engine import engine_host
from foundation.errors import ConfigError
from orchestrator.images.ensure import ensure_each
from orchestrator.tasksets.resolve import of_directory
from tasks import Task

SHELL = ["/usr/lib/intercode/bash", "--noprofile", "--norc", "-i"]  # the agent's shell, interactive
SCAFFOLD = {
    "task.toml": """\
# A Harbor task (harborframework.com/docs/tasks), read here as Harbor reads it.
# `python -m orchestrator tasks check DIR` builds it, runs solution/solve.sh (which must score 1) and
# an agent that does nothing (which must score below 1).
schema_version = "1.4"

[metadata]
difficulty = "easy"
category = "example"

[agent]
timeout_sec = 300.0

[verifier]
timeout_sec = 60.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 4096
network_mode = "no-network"   # "public" when the task (or its verifier) needs the internet
""",
    "instruction.md": "Write the line `Hello, world!` to the file `greeting.txt` in the working directory (/app).\n",
    "environment/Dockerfile": """\
# The agent's container: this folder is the build context. Install what the task needs here.
FROM debian:bookworm-slim
WORKDIR /app
""",
    "solution/solve.sh": """\
#!/bin/bash
# The reference solution: what the oracle runs, in the working directory, before the tests.
set -euo pipefail
echo 'Hello, world!' > /app/greeting.txt
""",
    "tests/test.sh": """\
#!/bin/bash
# The verifier: copied to /tests after the agent is done (the agent never sees it), run in the
# working directory. It writes the reward, a number in [0, 1], to /logs/verifier/reward.txt (or
# several, as a JSON object, to /logs/verifier/reward.json).
mkdir -p /logs/verifier
if [ "$(cat /app/greeting.txt 2>/dev/null)" = 'Hello, world!' ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo "greeting.txt is missing or wrong"
    echo 0 > /logs/verifier/reward.txt
fi
""",
}


def init_task(folder: Path) -> Path:
    """A new task folder at `folder` that `tasks check` passes. ConfigError when it has files."""
    folder = folder.expanduser().resolve()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(f"{folder} exists and is not an empty folder: give a new one")
    for name, text in SCAFFOLD.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if name.endswith(".sh"):
            path.chmod(0o755)
    return folder


async def open_shell(path: Path, *, which: str | None, allow_internet: bool, host_env: list[str] | None = None) -> int:
    """An interactive shell in a fresh container of the task at `path`; the container is removed
    when the shell ends. The shell's exit status."""
    task_set = await asyncio.to_thread(of_directory, path, allow_internet=allow_internet, host_env=host_env)
    task = _one(task_set.tasks, which, path)
    if reason := task.unavailable:
        raise ConfigError(f"task {task.id} is unavailable here: {reason}")
    failed = await ensure_each([task.image], None)
    if failed:
        raise ConfigError(f"task {task.id}: its image failed to build: {failed[task.image]}")
    async with Runtime.open(images={task.image: task_set.pools()[task.image]}) as runtime:
        async with make_environment(task.kind, runtime) as env:
            await env.reset(task, multi_turn=True)
            if not isinstance(env, WorkspaceEnv) or env.sandbox is None:
                raise ConfigError(f"task {task.id} acts through no shell of a container (its kind is {task.kind})")
            variables = env.variables(task)
            container = env.sandbox.container_id
            print(f"a shell in {task.id}'s container ({container[:12]}) in {env.workdir}, as its agent has it; "
                  "`exit` ends it and removes the container", file=sys.stderr, flush=True)
            argv = ["docker", "exec", "-i", *(["-t"] if sys.stdin.isatty() else []), "-w", env.workdir,
                    *[arg for name, value in variables.items() for arg in ("-e", f"{name}={value}")],
                    container, *SHELL]
            shell = await asyncio.create_subprocess_exec(*argv, env={**os.environ, "DOCKER_HOST": engine_host()})
            return await shell.wait()  # the user's session: it takes as long as they do


def _one(tasks: list[Task], which: str | None, path: Path) -> Task:
    if which is not None:
        found = [t for t in tasks if which in (t.name, str(t.index))]
        if not found:
            raise ConfigError(f"{path} has no task {which!r}; its tasks: {', '.join(t.name or str(t.index) for t in tasks[:10])}")
        return found[0]
    if len(tasks) > 1 and tasks[0].kind == "harbor":
        raise ConfigError(f"{path} holds {len(tasks)} tasks: give one folder ({path}/{tasks[0].name}) or --task NAME")
    return tasks[0]
