"""What an environment needs from a container, as a protocol: the Docker pool's lease implements
it (foundation/pool/container_sandbox.py, ContainerSandbox), and so can anything else that runs actions
somewhere, on another host or in a local directory (foundation/local.py, LocalSandbox). Docker-free:
its values are the driver client's (foundation/driver_client.py), and a contract keeps aiodocker
and foundation.pool out of it (pyproject.toml, checked by tests/unit/test_layers.py).

    async with provider.lease(image) as sandbox:      # a Sandbox, valid for the block
        result = await sandbox.run("ls /testbed")      # an action, the original InterCode way
        if broken:
            sandbox.mark_broken("the service died")     # the provider throws it away, never reuses it
"""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from foundation.driver_client import ExecResult, PythonResult, PythonRun

__all__ = ["ActionLimits", "ExecResult", "PythonResult", "PythonRun", "Sandbox", "SandboxProvider", "TooLarge",
           "files_tar", "run_action", "simplify_path"]


class TooLarge(Exception):  # noqa: N818 — what the files are, as the caller reports it
    """Files asked for out of a sandbox held more than the bytes allowed; `seen`: those counted."""

    def __init__(self, path: str, seen: int) -> None:
        super().__init__(f"{path} holds more than {seen} bytes")
        self.path, self.seen = path, seen


class ActionLimits(BaseModel):
    """Defaults for every action sent through the driver."""

    model_config = ConfigDict(extra="forbid")

    timeout: float = Field(10.0, gt=0, description="Seconds before the action's process group is killed.")
    output_cap: int = Field(64 * 1024, gt=0, description="Bytes of output kept; the rest is counted and cut.")
    flood: int = Field(8 << 20, gt=0, description="Kill an action that prints more than this beyond the cap.")


@runtime_checkable
class Sandbox(Protocol):
    """One place to run an episode's actions, for the length of a lease."""

    limits: ActionLimits
    cwd: str  # where `run` runs (moved by a leading `cd`)
    broken: str | None  # why it must not be reused, once `mark_broken` was called

    @property
    def image(self) -> str:
        """The image it was made from: lineage of every result made in it."""

    @property
    def container_id(self) -> str:
        """Its identity, for lineage and logs."""

    async def exec(self, argv: list[str], *, cwd: str | None = None, timeout: float | None = None,
                   cap: int | None = None, env: dict[str, str] | None = None, linger: float = 0.0,
                   user: str | None = None) -> ExecResult:
        """Run `argv` in `cwd` within the limits: the raw call. It answers when `argv` exits; with
        `linger`, when its output ends or `linger` seconds after it exited, whichever is first (what
        its background jobs print meanwhile counts). `user`: who runs it (Docker's forms, or
        "image": the image's USER; icdriver/users.py); root when None."""

    async def run(self, action: str, *, shell: str = "/bin/bash", timeout: float | None = None,
                  cap: int | None = None) -> ExecResult:
        """Run a shell action in a fresh shell in `cwd`; a leading `cd` moves `cwd`."""

    async def session(self, action: str, *, timeout: float | None = None, cap: int | None = None,
                      user: str | None = None) -> ExecResult:
        """Run a shell action in the lease's one persistent shell (as `user`, as exec's: a shell of
        another user's is ended first)."""

    async def python(self, codes: Sequence[str], *, timeout: float | None = None, cap: int | None = None,
                     name: str = "main", fresh: bool = False, close: bool = False) -> PythonRun:
        """Run Python `codes` in the lease's persistent interpreter `name`."""

    async def put(self, dest: str, tar: bytes) -> int:
        """Unpack the uncompressed tar `tar` under the directory `dest` (made if missing): files
        handed in by the host, such as a verifier's tests. Returns how many members it had."""

    async def get(self, path: str, *, most: int) -> dict[str, bytes]:
        """The regular files at `path` (a file, or a folder and all under it), by their path inside
        it (a file's own name for a file): files handed out to the host, such as a task's artifacts.
        {} when there is nothing there. TooLarge once more than `most` bytes of them have been
        counted, on our side: what is inside the container (a replaced `du`, a sparse file grown
        meanwhile) can't make us read more."""

    async def services(self) -> dict[str, str]:
        """The services beside it (a task's compose services), each at the address this machine
        reaches it at."""

    def mark_broken(self, reason: str) -> None:
        """It is no good any more: when the lease ends, its provider removes it instead of reusing it."""


class SandboxProvider(Protocol):
    """Leases sandboxes of an image: the Docker pool (foundation/pool/pool.py, Pool), or a
    Docker-free stand-in (foundation/local.py, LocalProvider). What a sweep's scheduler and a
    cluster's host agent ask of it, and nothing more."""

    def lease(self, image: str) -> AbstractAsyncContextManager[Sandbox]:
        """A sandbox of `image` for the block; given back (or removed, once marked broken) after it."""
        ...

    def capacity(self, image: str) -> int | None:
        """How many sandboxes of `image` can serve at once, or soon will; None: no limit."""
        ...

    async def warm(self, image: str, count: int, timeout: float = 120.0) -> None:
        """Make `count` sandboxes of `image` ready before the first lease asks (SandboxError when
        they aren't within `timeout` seconds)."""
        ...

    def stats(self) -> dict[str, dict[str, int]]:
        """Per image, how many sandboxes are in each state (a host's status)."""
        ...

    async def recover(self) -> None:
        """Whatever made the sandboxes went away and came back: forget those it had."""
        ...


async def run_action(sandbox: Any, action: str, *, shell: str, timeout: float | None, cap: int | None,
                     located: Callable[[str], str] = str) -> ExecResult:
    """`Sandbox.run` for any sandbox: a fresh `shell -c` in its tracked `cwd`; a leading `cd`
    resolves its directory textually, checks it with a shell's `cd` from the top (`located` gives
    the directory's own path there) and moves `cwd` when that worked."""
    action = action.strip()
    if action.startswith("cd"):
        new_dir = simplify_path(sandbox.cwd, action[2:].strip())
        result: ExecResult = await sandbox.exec([shell, "-c", f"cd {located(new_dir)}"], cwd="/", timeout=timeout,
                                                cap=cap)
        if result.ok:
            sandbox.cwd = new_dir
        return result
    result = await sandbox.exec([shell, "-c", action], timeout=timeout, cap=cap)
    return result


def simplify_path(current: str, changed: str) -> str:
    """Resolve a `cd` argument against the working directory, as the original harness did:
    purely textually (no symlinks, no `~`), `..` stopping at the root, empty meaning stay."""
    if not changed:
        return current
    if changed.startswith("/"):
        current = ""
    parts: list[str] = []
    for segment in f"{current}/{changed}".split("/"):
        if segment == "..":
            if parts:
                parts.pop()
        elif segment and segment != ".":
            parts.append(segment)
    return "/" + "/".join(parts)


def files_tar(files: dict[str, bytes]) -> bytes:
    """An uncompressed tar of `files` (name in the tar -> content, mode 644), for `Sandbox.put`."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()
