"""A Sandbox without Docker: actions run as local processes in a temporary directory.

    provider = LocalProvider({"local/files": {"notes/a.txt": "hello\n"}})
    async with provider.lease("local/files") as sandbox:   # a fresh directory, seeded, committed to git
        result = await sandbox.run("cat notes/a.txt")

For tests of environment logic and strategies that need no real container: paths are the
directory's (`cwd="/"` is its top; an absolute path in an action is the host's, so such tests use
relative paths). Each lease gets a new directory, seeded with the image's files and committed to
git (the Bash reward diffs with `git status`), removed when the lease ends. There is no persistent
shell or interpreter: `session` and `python` raise SandboxError (use the Docker pool for those).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from foundation.errors import SandboxError
from foundation.pool.config import ActionLimits
from foundation.pool.driver import ExecResult, PythonRun
from foundation.pool.sandbox import simplify_path

GIT_ENV = {"GIT_AUTHOR_NAME": "intercode", "GIT_AUTHOR_EMAIL": "intercode@localhost",
           "GIT_COMMITTER_NAME": "intercode", "GIT_COMMITTER_EMAIL": "intercode@localhost"}


class LocalSandbox:
    """One temporary directory for the length of a lease (the Sandbox protocol)."""

    def __init__(self, root: Path, image: str, limits: ActionLimits) -> None:
        self.root = root
        self.limits = limits
        self.cwd = "/"
        self.broken: str | None = None
        self._image = image

    @property
    def image(self) -> str:
        return self._image

    @property
    def container_id(self) -> str:
        return f"local:{self.root.name}"

    def path(self, inside: str) -> Path:
        """The host path of `inside` (a path in the sandbox, "/" being its top)."""
        return self.root / inside.lstrip("/")

    async def exec(self, argv: list[str], *, cwd: str | None = None, timeout: float | None = None,
                   cap: int | None = None, env: dict[str, str] | None = None) -> ExecResult:
        limit, keep = timeout or self.limits.timeout, cap or self.limits.output_cap
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=self.path(cwd or self.cwd), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env={**os.environ, "HOME": str(self.root), **(env or {})},
            start_new_session=True)
        assert process.stdout is not None
        try:
            async with asyncio.timeout(limit):
                output = await process.stdout.read()
                await process.wait()
            timed_out = False
        except TimeoutError:
            output, timed_out = b"", True
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the action's whole group, background jobs too
            await process.wait()
        try:
            text, valid = output.decode(), True
        except UnicodeDecodeError:
            text, valid = output.decode(errors="replace"), False
        return ExecResult(process.returncode if not timed_out else -9, text[:keep], max(0, len(text) - keep),
                          timed_out=timed_out, elapsed=time.monotonic() - started, valid_utf8=valid)

    async def run(self, action: str, *, shell: str = "/bin/bash", timeout: float | None = None,
                  cap: int | None = None) -> ExecResult:
        action = action.strip()
        if action.startswith("cd"):
            new_dir = simplify_path(self.cwd, action[2:].strip())
            result = await self.exec([shell, "-c", "true"], cwd=new_dir, timeout=timeout, cap=cap) \
                if self.path(new_dir).is_dir() else ExecResult(1, f"cd: {new_dir}: No such file or directory\n")
            if result.ok:
                self.cwd = new_dir
            return result
        return await self.exec([shell, "-c", action], timeout=timeout, cap=cap)

    async def session(self, action: str, *, timeout: float | None = None, cap: int | None = None) -> ExecResult:
        raise SandboxError("a local sandbox has no persistent shell: use the Docker pool", image=self._image)

    async def python(self, codes: Sequence[str], *, timeout: float | None = None, cap: int | None = None,
                     name: str = "main", fresh: bool = False, close: bool = False) -> PythonRun:
        raise SandboxError("a local sandbox has no persistent interpreter: use the Docker pool", image=self._image)

    def mark_broken(self, reason: str) -> None:
        self.broken = reason


class LocalProvider:
    """Leases LocalSandboxes: `seeds` maps an image name to the files (path -> text) its
    directories start with. An unknown image starts empty."""

    def __init__(self, seeds: Mapping[str, Mapping[str, str]] | None = None, *, limits: ActionLimits | None = None,
                 base: Path | None = None) -> None:
        self.seeds = {image: dict(files) for image, files in (seeds or {}).items()}
        self.limits = limits or ActionLimits()
        self.base = base
        self.leases = 0
        self.broken: list[str] = []  # reasons given by leases that marked theirs broken

    @asynccontextmanager
    async def lease(self, image: str) -> AsyncIterator[LocalSandbox]:
        root = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="intercode-local-", dir=self.base))
        try:
            await asyncio.to_thread(self._seed, root, self.seeds.get(image, {}))
            sandbox = LocalSandbox(root, image, self.limits)
            self.leases += 1
            try:
                yield sandbox
            except SandboxError as exc:
                sandbox.mark_broken(str(exc))
                raise
            finally:
                if sandbox.broken is not None:
                    self.broken.append(sandbox.broken)
        finally:
            await asyncio.to_thread(shutil.rmtree, root, True)

    @staticmethod
    def _seed(root: Path, files: Mapping[str, str]) -> None:
        import subprocess

        for name, text in files.items():
            path = root / name.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        env = {**os.environ, **GIT_ENV}
        for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "--allow-empty", "-m", "seed"]):
            subprocess.run(argv, cwd=root, env=env, check=True, capture_output=True)
