"""The original side, from the project's end: the original's venv and one driver process per suite.

The original's Python dependencies live in their own venv (`.venv-original`, made here on first
use from `original-requirements.txt`), never in the project's. `original_side.py` runs there and speaks
JSON lines; this module only starts it, asks and reads. Containers and image aliases the driver
makes carry the run's label or name prefix, and `remove_leftovers` removes them whatever happened.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import aiodocker

from checks.differential.original_images import ORIGINAL_DIR
from foundation.settings import PROJECT_ROOT

VENV = PROJECT_ROOT / ".venv-original"
REQUIREMENTS = Path(__file__).with_name("original-requirements.txt")
DRIVER = Path(__file__).with_name("original_side.py")
REQUEST_TIMEOUT = 600.0  # one request: opening an environment sleeps, a turn runs a command and the gold


class OriginalError(RuntimeError):
    """The driver process died or broke the protocol (not: the original raised, that is an answer)."""


async def ensure_venv(say: Any = print) -> Path:
    """The original venv's interpreter, making the venv first when it is missing."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".requirements"
    wanted = REQUIREMENTS.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    say(f"making {VENV.name} for the original harness's dependencies")
    if not python.exists():  # from the base interpreter: a venv made by a venv's python lacks pip
        await _run(getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(VENV))
    await _run(str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(REQUIREMENTS))
    stamp.write_text(wanted)
    return python


async def _run(*argv: str) -> None:
    process = await asyncio.create_subprocess_exec(*argv)
    if await process.wait() != 0:
        raise OriginalError(f"{' '.join(argv[:4])} ... failed with {process.returncode}")


class OriginalHarness:
    """One driver process: `open` a kind's environment, then `reset` and `turn`, then `close`."""

    def __init__(self, python: Path, run_label: str, log: Path) -> None:
        self.python, self.run_label, self.log = python, run_label, log
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> OriginalHarness:
        with self.log.open("ab") as stderr:
            self._process = await asyncio.create_subprocess_exec(
                str(self.python), str(DRIVER), str(ORIGINAL_DIR), self.run_label,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                limit=1 << 24, cwd=str(ORIGINAL_DIR))
        return self

    async def __aexit__(self, *exc: object) -> None:
        process = self._process
        if process is None:
            return
        try:
            if process.returncode is None and not exc[0]:
                await self.request({"op": "close"})
        finally:
            self._process = None
            if process.returncode is None:
                process.kill()
            await process.wait()

    async def request(self, request: dict[str, Any]) -> dict[str, Any]:
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            raise OriginalError("the driver is not running")
        process.stdin.write((json.dumps(request) + "\n").encode())
        await process.stdin.drain()
        line = await asyncio.wait_for(process.stdout.readline(), REQUEST_TIMEOUT)
        if not line:
            raise OriginalError(f"the driver exited ({await process.wait()}); see {self.log}")
        answer: dict[str, Any] = json.loads(line)
        return answer


async def remove_leftovers(docker: aiodocker.Docker, run_label: str, alias_prefix: str) -> int:
    """Remove the run's containers (by label) and image aliases (by name); how many containers."""
    containers = await docker.containers.list(all=True, filters={"label": [f"icdiff.run={run_label}"]})
    for container in containers:
        await container.delete(force=True)
    for image in await docker.images.list(filters={"reference": [f"{alias_prefix}*"]}):
        for tag in image.get("RepoTags") or []:
            if tag.startswith(alias_prefix):
                await docker.images.delete(tag, noprune=True)
    return len(containers)
