"""A Sandbox without Docker: the project's driver (icdriver) runs as a local process, in a temporary
directory, and takes the actions there.

    provider = LocalProvider({"local/files": {"notes/a.txt": "hello\n"}})
    async with provider.lease("local/files") as sandbox:   # a fresh directory, seeded, committed to git
        result = await sandbox.run("cat notes/a.txt")

For tests of environment logic and strategies that need no real container: paths are the
directory's (`cwd="/"` is its top; an absolute path in an action is the host's, so such tests use
relative paths). Each lease gets a new directory, seeded with the image's files and committed to
git (the Bash reward diffs with `git status`), removed when the lease ends with its driver and
everything the driver started. The persistent shell (`session`) starts in that directory, and its
`cd` takes host paths; the persistent interpreters (`python`) are the driver's, as in a container.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from pathlib import Path

from foundation.errors import SandboxError
from foundation.sandbox import ActionLimits, TooLarge, run_action
from foundation.driver_client import DriverClient, ExecResult, PythonRun
from foundation.settings import PROJECT_ROOT

MARKER = "INTERCODE_LOCAL_SANDBOX"  # in the environment of everything a local driver starts
GIT_ENV = {"GIT_AUTHOR_NAME": "intercode", "GIT_AUTHOR_EMAIL": "intercode@localhost",
           "GIT_COMMITTER_NAME": "intercode", "GIT_COMMITTER_EMAIL": "intercode@localhost"}


class LocalSandbox:
    """One temporary directory for the length of a lease (the Sandbox protocol)."""

    def __init__(self, root: Path, image: str, limits: ActionLimits, driver: DriverClient) -> None:
        self.root = root
        self.driver = driver
        self._session_started = False
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
                   cap: int | None = None, env: dict[str, str] | None = None, linger: float = 0.0,
                   user: str | None = None) -> ExecResult:
        # `user` is not taken: everything here runs as this process's user (a user of a task's image
        # is the container's, and this machine's /etc/passwd is not the image's)
        env = {"HOME": str(self.root), **(env or {})}
        return await self.driver.exec(argv, cwd=str(self.path(cwd or self.cwd)), timeout=timeout or self.limits.timeout,
                                      cap=cap or self.limits.output_cap, flood=self.limits.flood, env=env, linger=linger)

    async def run(self, action: str, *, shell: str = "/bin/bash", timeout: float | None = None,
                  cap: int | None = None) -> ExecResult:
        return await run_action(self, action, shell=shell, timeout=timeout, cap=cap,
                                located=lambda directory: shlex.quote(str(self.path(directory))))

    async def session(self, action: str, *, timeout: float | None = None, cap: int | None = None,
                      user: str | None = None) -> ExecResult:
        if not self._session_started:  # `user` is not taken, as exec's  # the driver's shell starts at the host's /: move it to the top here
            await self.driver.session(f"cd {shlex.quote(str(self.root))}", timeout=10.0, cap=1024)
            self._session_started = True
        result = await self.driver.session(action, timeout=timeout or self.limits.timeout,
                                           cap=cap or self.limits.output_cap)
        if result.cwd is not None and Path(result.cwd).is_relative_to(self.root):
            self.cwd = "/" + str(Path(result.cwd).relative_to(self.root)).removeprefix(".")
            result = replace(result, cwd=self.cwd)
        return result

    async def python(self, codes: Sequence[str], *, timeout: float | None = None, cap: int | None = None,
                     name: str = "main", fresh: bool = False, close: bool = False) -> PythonRun:
        return await self.driver.python(codes, timeout=timeout or self.limits.timeout,
                                        cap=cap or self.limits.output_cap, name=name, fresh=fresh, close=close)

    async def put(self, dest: str, tar: bytes) -> int:
        return await self.driver.put(str(self.path(dest)), tar)

    async def get(self, path: str, *, most: int) -> dict[str, bytes]:
        where = self.path(path)
        if where.is_file():
            files = {where.name: where}
        elif where.is_dir():
            files = {str(f.relative_to(where)): f for f in sorted(where.rglob("*")) if f.is_file()}
        else:
            return {}
        seen = sum(f.stat().st_size for f in files.values())  # counted before anything is read
        if seen > most:
            raise TooLarge(path, seen)
        return {name: f.read_bytes() for name, f in files.items()}

    async def services(self) -> dict[str, str]:
        return {}  # no services beside a directory

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
        self.broken: list[str] = []  # reasons given by leases that marked theirs broken
        self.leased: Counter[str] = Counter()  # per image, the leases open now

    def capacity(self, image: str) -> int | None:
        return None  # a directory each: as many as are asked for

    async def warm(self, image: str, count: int, timeout: float = 120.0) -> None:
        """Nothing to make ahead: a directory is made in no time."""

    def stats(self) -> dict[str, dict[str, int]]:
        return {image: {"leased": n} for image, n in self.leased.items() if n}

    async def recover(self) -> None:
        """Nothing went away: the directories are the host's."""

    @asynccontextmanager
    async def lease(self, image: str) -> AsyncIterator[LocalSandbox]:
        root = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="intercode-local-", dir=self.base))
        self.leased[image] += 1
        try:
            await asyncio.to_thread(self._seed, root, self.seeds.get(image, {}))
            async with _local_driver(root) as driver:
                sandbox = LocalSandbox(root, image, self.limits, driver)
                try:
                    yield sandbox
                except SandboxError as exc:
                    sandbox.mark_broken(str(exc))
                    raise
                finally:
                    if sandbox.broken is not None:
                        self.broken.append(sandbox.broken)
        finally:
            self.leased[image] -= 1
            await asyncio.to_thread(shutil.rmtree, root, True)

    @staticmethod
    def _seed(root: Path, files: Mapping[str, str]) -> None:
        for name, text in files.items():
            path = root / name.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        env = {**os.environ, **GIT_ENV}
        for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "--allow-empty", "-m", "seed"]):
            subprocess.run(argv, cwd=root, env=env, check=True, capture_output=True)


@dataclass(frozen=True)
class _Chunk:
    stream: int
    data: bytes


class _Pipes:
    """A local driver's stdin and stdout as a DriverStream."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def write_in(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def read_out(self) -> _Chunk | None:
        assert self.process.stdout is not None
        data = await self.process.stdout.read(1 << 16)
        return _Chunk(1, data) if data else None

    async def close(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()  # the driver ends when its input ends


@asynccontextmanager
async def _local_driver(root: Path) -> AsyncIterator[DriverClient]:
    """The driver as a local process in `root`, in a session of its own; killed with its group after."""
    marker = f"{MARKER}={root.name}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-B", "-m", "icdriver", cwd=root, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), MARKER: root.name})
    try:
        driver = await DriverClient.over(_Pipes(process), f"local:{root.name}")
        try:
            yield driver
        finally:
            await driver.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        await asyncio.to_thread(_kill_marked, marker.encode())  # its shells, interpreters and background jobs


def _kill_marked(marker: bytes) -> None:
    """Kill every process whose environment carries `marker`: what the local driver started, in
    whatever session or group it went on to (a background job of the persistent shell, say)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):  # gone meanwhile, or not ours to read
            continue


if TYPE_CHECKING:  # the type checker holds the stand-in to the protocol
    from foundation.sandbox import SandboxProvider

    _provider: type[SandboxProvider] = LocalProvider
