"""The leased container as its holder sees it: actions in, results out, valid only during the lease.
It implements the Sandbox protocol (foundation/sandbox.py)."""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import aiodocker

from foundation.engine import engine_call
from foundation.engine_gate import releasing_network
from foundation.errors import DriverExited, SandboxError
from foundation.sandbox import ActionLimits, TooLarge
from foundation.driver_client import DriverClient, ExecResult, PythonResult, PythonRun
from foundation.pool.disk import restamp_ctimes
from foundation.sandbox import run_action

# What an action that killed the container's processes gets back; it ran, and killed its own output.
TAR_HEADROOM = 1 << 20  # bytes of a tar's headers and padding beyond the files' own, for a few thousand files
KILLED = ("[the action killed every process of the container, the environment's driver among them: the driver "
          "was started again, with a fresh shell and interpreter]")
KILLED_RESULT = ExecResult(exit_code=137, output=KILLED)

if TYPE_CHECKING:
    from foundation.pool.container import PooledContainer


class ContainerSandbox:
    """One container for the length of a lease.

    `run` executes an action the original InterCode way: a fresh `bash -c` in the tracked working
    directory, where an action starting with `cd` moves that directory. `session` runs it in one
    persistent shell instead. `exec` is the raw call: an argv, a cwd, the limits.
    """

    def __init__(self, member: PooledContainer, limits: ActionLimits) -> None:
        self._member = member
        self.limits = limits
        self.cwd = "/"
        self._closed = False
        self.broken: str | None = None  # set by `mark_broken`: the lease retires the container

    @property
    def image(self) -> str:
        return self._member.image

    @property
    def container_id(self) -> str:
        return self._member.id

    def _driver(self) -> DriverClient:
        if self._closed:
            raise SandboxError("sandbox used after its lease ended", container_id=self.container_id)
        assert self._member.driver is not None
        return self._member.driver

    async def exec(self, argv: list[str], *, cwd: str | None = None, timeout: float | None = None,
                   cap: int | None = None, env: dict[str, str] | None = None, linger: float = 0.0,
                   user: str | None = None) -> ExecResult:
        try:
            return await self._driver().exec(argv, cwd=cwd or self.cwd, timeout=timeout or self.limits.timeout,
                                             cap=cap or self.limits.output_cap, flood=self.limits.flood, env=env,
                                             linger=linger, user=user)
        except DriverExited as exc:
            await self._survive(exc)
            return KILLED_RESULT

    async def run(self, action: str, *, shell: str = "/bin/bash", timeout: float | None = None,
                  cap: int | None = None) -> ExecResult:
        return await run_action(self, action, shell=shell, timeout=timeout, cap=cap)

    async def session(self, action: str, *, timeout: float | None = None, cap: int | None = None,
                      user: str | None = None) -> ExecResult:
        try:
            result = await self._driver().session(action, timeout=timeout or self.limits.timeout,
                                                  cap=cap or self.limits.output_cap, user=user)
        except DriverExited as exc:
            await self._survive(exc)
            return KILLED_RESULT
        if result.cwd:
            self.cwd = result.cwd
        return result

    async def put(self, dest: str, tar: bytes) -> int:
        try:
            return await self._driver().put(dest, tar)
        except DriverExited as exc:  # something the agent left running killed it: once more, with a new driver
            await self._survive(exc)
            return await self._driver().put(dest, tar)

    async def python(self, codes: Sequence[str], *, timeout: float | None = None, cap: int | None = None,
                     name: str = "main", fresh: bool = False, close: bool = False) -> PythonRun:
        """Run Python `codes` in the lease's persistent interpreter `name`; gone with the lease."""
        try:
            return await self._driver().python(codes, timeout=timeout or self.limits.timeout,
                                               cap=cap or self.limits.output_cap, name=name, fresh=fresh, close=close)
        except DriverExited as exc:
            await self._survive(exc)
            killed = PythonResult("", f"Error: {KILLED}", raised=True, died=True)
            return PythonRun(tuple(killed for _ in codes), restarted=True)

    async def _survive(self, lost: DriverExited) -> None:
        """The driver is gone. When its container still runs, an action killed it (`kill -9 -1`
        spares only PID 1): that is the agent's doing, so the episode goes on with a new driver, and
        the container is retired at the lease's end (what the action left is not the pool's to
        reset). A container that stopped is infrastructure: `lost` is raised, also when it was
        still stopping as we looked (killed from outside) and the new driver found it stopped.
        So is a container the pool took back (the engine came back from an outage, the pool
        closes): closing its driver ended the action, and it may still run while its removal waits."""
        if self._taken_back() or not await self._member.running() or self._taken_back():
            raise lost
        self.mark_broken("an action killed every process of the container")
        try:
            await self._member.restart_driver()
        except SandboxError:
            try:
                alive = await self._member.running()
            except SandboxError:  # gone altogether
                alive = False
            if not alive or self._taken_back():
                raise lost from None
            raise
        if self._taken_back():
            raise lost

    def _taken_back(self) -> bool:
        """Whether the pool took the container out of service while it was leased."""
        return not self._member.usable

    async def layer_is_ours(self) -> bool:
        """Whether the container's writable layer is a file system of ours (a disk cap's, layer-fs),
        which `set_ctimes` can edit."""
        upper = self._member.upper_dir
        return upper is not None and await asyncio.to_thread(os.path.ismount, Path(upper).parent)

    async def set_ctimes(self, stamps: dict[str, int]) -> int:
        """Stop the container, give the entries of its writable layer under each path of `stamps`
        that ctime (epoch seconds: foundation/pool/disk.py, `restamp_ctimes`), start it again with a
        new driver; return how many entries got one. Its processes end, and what a tmpfs held is
        gone; its files stay. Only on a capped layer of ours (layer-fs); else SandboxError. The pool
        removes the container when the lease ends: a layer edited offline is not its to reset."""
        member = self._member
        if member.upper_dir is None:
            raise SandboxError("a ctime can be set only where the container's layer is on this host",
                               container_id=self.container_id, image=self.image)
        self.mark_broken("its layer's ctimes were set offline")
        async with releasing_network(member.docker), \
                engine_call("stop the container", container_id=self.container_id, image=self.image):
            await member.container.kill(signal="SIGKILL")
            await member.container.wait()
        stamped = await restamp_ctimes(Path(member.upper_dir).parent, stamps, self.container_id)
        async with engine_call("start the container", container_id=self.container_id, image=self.image):
            await member.container.start()
        await member.restart_driver()
        return stamped

    async def get(self, path: str, *, most: int) -> dict[str, bytes]:
        """The engine's archive of `path`, read as it streams and counted here: past `most` bytes
        (and a tar's headers) the stream is closed and TooLarge raised, whatever the container says
        of its size. aiodocker's get_archive reads the whole answer first, so the request is made on
        its session (the Engine API's GET /containers/{id}/archive)."""
        container = self._member.container
        url = f"{container.docker.docker_host}/containers/{container.id}/archive"
        buffer = bytearray()
        async with engine_call("copy files out of the container", container_id=self.container_id, image=self.image):
            async with container.docker.session.get(url, params={"path": path}) as response:
                if response.status == 404:
                    return {}
                if response.status != 200:
                    message = (await response.content.read(1000)).decode(errors="replace").strip()
                    raise SandboxError(f"could not copy {path} out: {response.status} {message}",
                                       container_id=self.container_id)
                async for chunk in response.content.iter_chunked(1 << 16):
                    buffer += chunk
                    if len(buffer) > most + TAR_HEADROOM:
                        raise TooLarge(path, len(buffer))
        files = files_of(tarfile.open(fileobj=io.BytesIO(bytes(buffer))))
        if sum(map(len, files.values())) > most:
            raise TooLarge(path, sum(map(len, files.values())))
        return files

    async def services(self) -> dict[str, str]:
        group = self._member.group
        return await group.addresses() if group is not None else {}

    def mark_broken(self, reason: str) -> None:
        """The container is no good any more (it died under a service): when the lease ends, the
        pool removes it instead of resetting it for the next lease."""
        self.broken = reason

    def close(self) -> None:
        self._closed = True


def files_of(archive: tarfile.TarFile) -> dict[str, bytes]:
    """The regular files of a tar the engine gave (its top folder's name left out)."""
    found = {}
    with archive:
        members = [m for m in archive.getmembers() if m.isfile()]
        top = "" if len(members) == 1 and members[0].name.count("/") == 0 else None
        for member in members:
            name = member.name if top is not None else member.name.partition("/")[2] or member.name
            extracted = archive.extractfile(member)
            if extracted is not None:
                found[name] = extracted.read()
    return found
