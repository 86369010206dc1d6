"""Bash with the original harness's container lifecycle, for replaying its recordings.

Our `BashEnv` gives every episode a pristine container and computes each task's gold once, in
another pristine container. The original did neither. It kept two long-lived containers per image,
one for the agent and one for the gold, and "reset" both with `git reset --hard; git clean -fd`:
before each episode (the agent's) and before every scoring (the gold's, which ran again each time).
That reset leaks. Files outside git (`/root`, `/home`) survive, and every file that git rewrites
(one an earlier episode changed, deleted or chmod-ed) gets the reset's time as its mtime and 0644
or 0755 as its mode. So what `find -mmin +5` or `-mtime +31` saw in the gold's container depended
on every gold and every reset before it.

`OriginalLifecycleBashEnv` reproduces that lifecycle, so that `replay --containers original` can
show which disagreements come from it and which from the environment itself. It is never used for
sweeps: a benchmark run wants the complete reset. Episodes must be replayed one at a time, in the
recording's order, through one instance. A recorded action can break the containers for good (one
gzipped every binary from `/`); the next reset then raises SandboxError, and `replay` goes on with a
new instance, that is with new containers.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from environments.bash import (
    DOCKER_EXEC_LINGER,
    GOLD_TIMEOUT,
    BashEnv,
    BashGold,
    split_action,
)
from environments.file_ages import FileAges, age_repository, checked
from orchestrator.fidelity.original_host import ADDRESSES, INODE_BYTES, MODULES, PROC, recording_zone
from environments.runtime import default_pool_config
from foundation.engine import engine_deadline
from foundation.errors import SandboxError
from foundation.pool import Pool, Sandbox
from foundation.pool.container_sandbox import ContainerSandbox
from tasks import Task

LEAKY_RESET = "git reset --hard; git clean -fd;"
AS_RECORDED = "-as-recorded"  # the image's second name, whose containers have hosts of their own
# The original host's kernel modules: a tmpfs over /sys/module holds a directory for each (their
# files are the kernel's, and unknown), in place of this machine's.
SYS_MODULE = "/sys/module"
HOST = "-original-host"  # the twin's name, further, when its containers see the original's machine


class OriginalLifecycleBashEnv(BashEnv):
    """`original_host`: the containers see the original's machine where the recordings show it
    (its kernel's modules, its uptime and load, its inodes: orchestrator/fidelity/original_host.py), as a
    replay of its recordings wants; off, this machine's, as the differential harness wants, whose
    original side runs here."""

    def __init__(self, runtime: Any, *, original_host: bool = False) -> None:
        super().__init__(runtime)
        self.original_host = original_host
        self._containers: dict[str, tuple[Sandbox, Sandbox]] = {}  # image -> (agent, gold)
        self._held = AsyncExitStack()

    async def _containers_for(self, task: Task) -> tuple[Sandbox, Sandbox]:
        image = task.image
        if image not in self._containers:
            pool = self.runtime.pool
            twin = await self._as_recorded(image)
            agent = await self._held.enter_async_context(pool.lease(twin))
            gold = await self._held.enter_async_context(pool.lease(twin))
            for sandbox, address in zip((agent, gold), ADDRESSES):
                # A container's files have other inodes and ctimes than the build that indexed them,
                # and git's first reset would rewrite them all (to 0644/0755, stamped now). The
                # original's containers, made from the very layer that was committed, had a valid
                # index: only what an episode changed got rewritten. Aged once: then the files
                # age on, and resets write fresh ones, as there.
                workdir = await self.runtime.image_workdir(image)
                await age_repository(sandbox, task, workdir)
                if self.original_host:  # first: it restarts the container, which loses what follows
                    await _give_ctimes(sandbox, task, workdir)
                    await _give_modules(sandbox)
                    await _give_clock(sandbox, task)
                # Two hosts, as there: `hostname`, $HOSTNAME and /etc/hosts differ between the gold's
                # output and the agent's (the recordings print `HOSTNAME=8191dc145a2a`, 172.17.0.2).
                await sandbox.exec(["/bin/sh", "-c", f'echo "{address}\t$(hostname)" >> /etc/hosts'], cwd="/",
                                   timeout=GOLD_TIMEOUT)
            self._containers[image] = (agent, gold)
        return self._containers[image]

    async def _as_recorded(self, image: str) -> str:
        """`image` under a second name whose containers are named as the original's were: each its
        own host, named by its container id (Docker's default), where ours share `intercode`; and
        whose /sys/module is a tmpfs, for the original host's modules, and whose capped layer has its
        inode size."""
        twin = f"{image}{AS_RECORDED}{HOST if self.original_host else ''}"
        docker, pool = self.runtime.docker, self.runtime.pool
        if docker is None or not isinstance(pool, Pool):
            raise SandboxError("the original's container lifecycle needs Docker's pool", image=image)
        async with engine_deadline(f"tag image {image}"):
            await docker.images.tag(f"{image}:latest", twin, tag="latest")
        config = default_pool_config(image)
        hardening: dict[str, Any] = {"hostname": ""}
        if self.original_host:
            hardening["tmpfs"] = {**config.hardening.tmpfs, SYS_MODULE: "rw,nosuid,nodev,noexec,mode=755"}
            hardening["binds"] = [*config.hardening.binds, *await asyncio.to_thread(_proc_binds)]
            hardening["inode_bytes"] = INODE_BYTES
        pool.configure(twin, config.model_copy(update={"hardening": config.hardening.model_copy(update=hardening)}))
        return twin

    async def _leaky_reset(self, sandbox: Sandbox, task: Task, role: str) -> None:
        result = await sandbox.exec(split_action(self.shell(task), LEAKY_RESET), cwd=self.image_workdir,
                                    timeout=GOLD_TIMEOUT)
        if result.exit_code != 0:  # the original raised here too; an earlier action broke the container
            raise SandboxError(f"git reset failed in the {role}'s container: {result.output.strip()[-200:]}",
                               container_id=sandbox.container_id, image=sandbox.image)

    async def _start(self, task: Task) -> None:
        self.image_workdir = await self.runtime.image_workdir(task.image)
        self.sandbox, _ = await self._containers_for(task)
        await self._leaky_reset(self.sandbox, task, "agent")
        self.workdir = self.start_dir(task)

    async def _stop(self) -> None:
        self.sandbox = None  # the containers stay for the next episode, as the original's did

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            self._containers.clear()
            await self._held.aclose()

    async def scoring_gold(self) -> BashGold:
        """The original's get_reward: reset the gold's container, run the gold again, look."""
        assert self.task is not None
        task, mode = self.task, self.mode
        _, sandbox = await self._containers_for(task)
        await self._leaky_reset(sandbox, task, "gold")
        try:
            argv = split_action(self.shell(task), task.gold_text)
            output = (await sandbox.exec(argv, cwd=self.image_workdir, timeout=GOLD_TIMEOUT,
                                         linger=DOCKER_EXEC_LINGER)).output
        except ValueError:
            output = ""
        changes = await self.changes(sandbox, self.strict)
        hashes = {path: await self.hash(sandbox, path, self.strict) for path, _ in changes}
        return BashGold(output, {mode: changes}, {mode: hashes})


async def _give_ctimes(sandbox: Sandbox, task: Task, workdir: str) -> None:
    """The ctimes of the original's image layer, on the files the aging copied into the container's
    layer (stamped with this moment): `find -cmin +1440` and `-cmin -60` see them as old as the
    image was when the recording was made (environments/file_ages.py, `FileAges.ctimes`). Where the
    container's layer is not ours to edit (no disk cap of ours), the files keep this moment's."""
    ages = FileAges.of(task)
    if ages is None or not ages.roots or not isinstance(sandbox, ContainerSandbox) or not await sandbox.layer_is_ours():
        return
    await sandbox.set_ctimes(ages.ctimes())
    # The restart gave the copied-up files other inode numbers: their layer is another file system
    # than the image's, and overlayfs keeps a lower file's number only in the mount that copied it
    # up. A stat mismatch makes git's reset rewrite a file (a fresh age), so git now compares
    # mtimes to the second, sizes and modes (it already left ctimes out: the aging rewrote them).
    await checked(sandbox, ["git", "config", "core.checkStat", "minimal"], workdir, "configure git")


async def _give_modules(sandbox: Sandbox) -> None:
    """The original host's kernel, as far as /sys/module goes: `find -name '*php'` from `/` met its
    `acpiphp` (orchestrator/fidelity/original_host.py). A directory each; their files are the kernel's."""
    await checked(sandbox, ["mkdir", "-p", *(f"{SYS_MODULE}/{name}" for name in MODULES)], "/",
                  f"give {SYS_MODULE} the original host's modules")


async def _give_clock(sandbox: Sandbox, task: Task) -> None:
    """The recording's wall clock as the containers' local time: /etc/localtime a zone whose offset
    from UTC is the recording's moment less the replay's (orchestrator/fidelity/original_host.py,
    `recording_zone`). `date`, `cal` and `ls -l` then print the recording's dates and times, as the
    files' ages hold at it, whatever day the replay runs on; the kernel's clock, and so every age
    (`find -mtime`, `ls -t`), is untouched. Without it `ls -l` printed this day's month: StarChat fs3
    #1's `ls -l | grep ".c"` matched "Oct" and "Dec" and nothing in the recording's June."""
    ages = FileAges.of(task)
    if ages is None or not ages.roots or not ages.shift_ns:
        return
    zone = base64.b64encode(recording_zone(-round(ages.shift_ns / 10**9))).decode()
    write = ("import base64, os, sys\nif os.path.lexists('/etc/localtime'): os.remove('/etc/localtime')\n"
             "open('/etc/localtime', 'wb').write(base64.b64decode(sys.argv[1]))")
    await checked(sandbox, ["python3", "-c", write, zone], "/", "give the recording's clock")


def _proc_binds() -> list[str]:
    """Binds of the original host's /proc files (orchestrator/fidelity/original_host.py): each written, once,
    to a file of this machine named by its content, and mounted read-only over the container's (the
    engine allows these /proc files to be mounted over, as LXCFS does)."""
    binds = []
    for target, text in PROC.items():
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        source = Path(tempfile.gettempdir()) / "intercode-original-host" / f"{Path(target).name}-{digest}"
        if not source.exists():
            source.parent.mkdir(parents=True, exist_ok=True)
            partial = source.with_suffix(".partial")
            partial.write_text(text)
            partial.replace(source)
        binds.append(f"{source}:{target}:ro")
    return binds
