"""A disk cap per container: its writable layer holds at most `Hardening.disk_mb`.

Which mechanism holds depends on the engine's storage driver, found once per pool (`probe`):

- **The driver's own quota** (`quota`): overlay2 on XFS mounted with `pquota`, btrfs or zfs. The
  container is created with `StorageOpt size`, and the engine enforces it.
- **A file system per writable layer** (`layer-fs`): overlay2 without a quota (on ext4, or on a
  kernel built without CONFIG_QUOTA, as on the reference machine), with the engine's layers on
  this host and us root. Between create and start, an ext4 file system of `disk_mb` in a sparse
  file is mounted over the container's layer directory, so its upper and work directories (which
  overlayfs wants on one file system) live in it. ext4 as on the host: the same block size and
  directory sizes, so `du` and `ls -l` read as before. The file is unlinked once mounted; its
  space returns when the engine removes the container, whose layer clean-up unmounts it (and the
  loop device goes with the mount).
- **Nothing** (`none`): a remote engine, or not root. The pool says so once; the README lists what
  holds where.

Either way a write past the cap fails inside the container with ENOSPC ("No space left on
device"); the host and the neighbours don't notice.

The engine must see our mount. Docker 20.10 bind-mounts its data root onto itself when it starts
(for mount propagation), and a layer file system mounted just before that bind is hidden under it:
the container would run uncapped, and its removal would fail with "device or resource busy". So
when the data root was a mount point at the probe, a mount waits until it is one again (an engine
that just restarted), and after the start `verify` checks that the container's overlay sits on
our file system.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import aiodocker
import structlog

from foundation.engine import engine_call, engine_host
from foundation.errors import EngineLost, EngineStalled, SandboxError

log = structlog.get_logger(__name__)

QUOTA_DRIVERS = {"btrfs", "zfs"}
DISKS_DIR = "intercode-disks"  # beside the engine's data root: where a layer's file is made
STALE_AFTER = 600.0  # seconds; a file left by a process killed between mkfs and unlink
ROOT_WAIT = 30.0  # seconds for a restarted engine to bind its data root again
# No journal (the host's own ext4 here has none either; a crash loses the container anyway), no
# reserved blocks (the cap is the cap), inode tables initialised lazily: a sparse file reads zeros.
# Its inodes are `Hardening.inode_bytes` large (512 by default, which keeps a copied-up directory's
# overlay xattrs inside the inode, so that `du` counts it 4K as in a fresh container).
MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard"]
MOUNT_OPTIONS = "loop,noinit_itable,discard"  # discard: deleting a file frees the host's disk too


class DiskCapError(SandboxError):
    """The cap could not be put on a container: it is not started uncapped."""


@dataclass(frozen=True, slots=True)
class DiskCaps:
    """How this engine caps a container's disk: "quota", "layer-fs" or "none", and why."""

    mode: str
    reason: str
    root: Path | None = None  # the engine's data root (layer-fs)
    root_bound: bool = False  # it was a mount point at the probe: wait for that before mounting

    def storage_opt(self, disk_mb: int | None) -> dict[str, str] | None:
        """The create body's StorageOpt, where the driver enforces it."""
        return {"size": f"{disk_mb}M"} if self.mode == "quota" and disk_mb else None

    async def cap(self, container: aiodocker.containers.DockerContainer, disk_mb: int | None,
                  inode_bytes: int = 512) -> None:
        """Before start: give the container's writable layer a file system of `disk_mb`, its inodes
        `inode_bytes` large."""
        if self.mode != "layer-fs" or not disk_mb:
            return
        info = await container.show()
        upper = ((info.get("GraphDriver") or {}).get("Data") or {}).get("UpperDir")
        if not upper:
            raise DiskCapError("the engine names no writable layer to cap", container_id=container.id)
        layer = Path(upper).parent
        if self.root is not None and self.root_bound:
            await _wait_for_bound_root(self.root, container.id)
        await mount_layer_fs(layer, disk_mb, container.id, inode_bytes)
        if self.root is not None and self.root_bound and not await asyncio.to_thread(_under_root, layer, self.root):
            # The engine unbound its root meanwhile (it is stopping): our mount would outlive it,
            # hidden under the next bind, and keep the container from being removed.
            await _run(["umount", "--lazy", str(layer)], container.id)
            raise DiskCapError("the engine is stopping: its data root is no longer mounted", container_id=container.id)

    async def verify(self, upper_dir: str | None, container_id: str) -> None:
        """After start: the container's overlay must sit on the layer's own file system. If the
        engine does not see our mount, the container runs uncapped: say so (loudly, once per
        container) rather than fail the episode."""
        if self.mode != "layer-fs" or upper_dir is None:
            return
        layer = str(Path(upper_dir).parent)
        if not await asyncio.to_thread(_overlay_on_layer_fs, layer):
            log.warning("pool.disk_cap_not_in_effect", container=container_id[:12],
                        reason="the engine does not see the layer's own file system (another mount namespace?)")


async def probe(docker: aiodocker.Docker) -> DiskCaps:
    """Find how this engine's containers can be capped (once per pool)."""
    try:
        async with engine_call("describe the engine's storage"):
            info = await docker.system.info()
    except (aiodocker.DockerError, EngineLost) as exc:  # a stalled engine (EngineStalled) is the caller's
        if isinstance(exc, EngineStalled):
            raise
        return DiskCaps("none", f"the engine did not describe its storage ({exc!r})")
    driver = str(info.get("Driver", ""))
    status = {str(k): str(v) for k, v in info.get("DriverStatus") or []}
    backing = status.get("Backing Filesystem", "")
    if driver in QUOTA_DRIVERS or (driver == "overlay2" and backing == "xfs"):
        return DiskCaps("quota", f"{driver} on {backing or driver} enforces StorageOpt size")
    if driver != "overlay2":
        return DiskCaps("none", f"the storage driver {driver!r} has no quota we can use")
    root = Path(str(info.get("DockerRootDir", "")))
    reason = await asyncio.to_thread(_layer_fs_unusable, root, engine_host())
    if reason:
        return DiskCaps("none", f"overlay2 on {backing} has no quota, and {reason}")
    await asyncio.to_thread(_remove_stale, root.parent / DISKS_DIR)
    return DiskCaps("layer-fs", f"overlay2 on {backing} has no quota: each writable layer gets its own ext4",
                    root, await asyncio.to_thread(os.path.ismount, root))


def _layer_fs_unusable(root: Path, host: str) -> str:
    """Why a file system per layer can't be made here ('' when it can)."""
    if not host.startswith("unix://"):
        return f"the engine ({host}) is not on this host"
    if os.geteuid() != 0:
        return "mounting a layer's file system needs root"
    if not (root / "overlay2").is_dir():
        return f"the engine's layers ({root}) are not on this host"
    missing = [tool for tool in ("mkfs.ext4", "mount") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} is missing (Debian: e2fsprogs, mount)"
    return ""


def _remove_stale(directory: Path) -> None:
    """Files of layers whose mount never happened (the process was killed in between)."""
    if not directory.is_dir():
        return
    now = time.time()
    for path in directory.iterdir():
        try:
            if now - path.stat().st_mtime > STALE_AFTER:
                path.unlink()
        except OSError:
            pass  # another process removed it first


async def mount_layer_fs(layer: Path, disk_mb: int, container_id: str, inode_bytes: int = 512) -> None:
    """Make an ext4 of `disk_mb` (inodes of `inode_bytes`) holding the layer directory's entries, and
    mount it over it."""
    disks = layer.parent.parent.parent / DISKS_DIR
    image = disks / f"{container_id}.ext4"
    try:
        await asyncio.to_thread(disks.mkdir, mode=0o700, exist_ok=True)
        await _run([*MKFS, "-I", str(inode_bytes), "-d", str(layer), str(image), f"{disk_mb}M"], container_id)
        await _run(["mount", "-o", MOUNT_OPTIONS, str(image), str(layer)], container_id)
        await asyncio.to_thread(_tidy, layer)
    finally:
        await asyncio.to_thread(image.unlink, missing_ok=True)  # mounted, the loop device holds it


async def _wait_for_bound_root(root: Path, container_id: str) -> None:
    deadline = time.monotonic() + ROOT_WAIT
    while not await asyncio.to_thread(os.path.ismount, root):
        if time.monotonic() > deadline:
            raise DiskCapError(f"the engine's data root {root} was not mounted again within {ROOT_WAIT:g} s",
                               container_id=container_id)
        await asyncio.sleep(0.05)  # between two checks of the engine's own start-up step


def _mounts() -> list[list[str]]:
    """Our mount table: per mount its id, its parent's id, ..., its mount point (field 4)."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mountinfo:
        return [line.split(" ", 5) for line in mountinfo]


def _under_root(layer: Path, root: Path) -> bool:
    """Whether the file system at `layer` is mounted inside the engine's bind of its data root."""
    by_point = {fields[4]: fields for fields in _mounts()}
    mounted, bound = by_point.get(str(layer)), by_point.get(str(root))
    return mounted is not None and bound is not None and mounted[1] == bound[0]


def _overlay_on_layer_fs(layer: str) -> bool:
    """Whether the overlay mounted at LAYER/merged is a child of the file system mounted at LAYER."""
    by_point = {fields[4]: fields for fields in _mounts()}
    mounted, merged = by_point.get(layer), by_point.get(f"{layer}/merged")
    return mounted is not None and merged is not None and merged[1] == mounted[0]


def _tidy(layer: Path) -> None:
    """The new file system's lost+found is no part of the layer."""
    try:
        (layer / "lost+found").rmdir()
    except FileNotFoundError:
        pass


async def _run(argv: list[str], container_id: str, text: str | None = None) -> None:
    """`argv` to its end (given `text` on its standard input); killed when the wait is cancelled."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL if text is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        output, _ = await process.communicate(None if text is None else text.encode())
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        raise
    if process.returncode != 0:
        lines = output.decode(errors="replace").strip().splitlines()
        raise DiskCapError(f"{argv[0]} failed: {lines[-1] if lines else process.returncode}", container_id=container_id)


CTIME_WAIT = 30.0  # seconds for the engine to let go of a stopped container's layer, and for each tool
CTIME_MOUNT_OPTIONS = "noinit_itable,discard"  # MOUNT_OPTIONS, on the loop device that is already there


async def restamp_ctimes(layer: Path, stamps: dict[str, int], container_id: str) -> int:
    """Give every entry of a stopped container's writable layer under each path of `stamps` (a path
    in the container) that ctime, in epoch seconds; return how many entries got one.

    The kernel stamps a ctime with its own clock, and nothing sets it after. So this is an offline
    edit of the layer's file system (`debugfs`), which must be ours (`layer-fs`): it is unmounted,
    edited and mounted again, on the same loop device (held open meanwhile, else unmounting would
    detach it). The engine mounts the container's root on it again when it starts."""
    device = await asyncio.to_thread(_source_of, layer)
    if device is None or not device.startswith("/dev/loop"):
        raise DiskCapError("a ctime can be set only in a layer file system of ours (layer-fs disk caps)",
                           container_id=container_id)
    entries = await asyncio.to_thread(_entries_under, layer / "diff", stamps)
    if not entries:
        return 0
    held = await asyncio.to_thread(os.open, device, os.O_RDONLY)
    try:
        async with asyncio.timeout(CTIME_WAIT):
            # The stopped container's root, mounted on our file system, goes with the engine's clean-up.
            while await asyncio.to_thread(os.path.ismount, layer / "merged"):
                await asyncio.sleep(0.05)
            await _run(["umount", str(layer)], container_id)
            commands = "".join(f"set_inode_field <{ino}> ctime @{when}\n" for _, ino, when in entries)
            await _run(["debugfs", "-w", "-f", "-", device], container_id, commands)
            await _run(["mount", "-o", CTIME_MOUNT_OPTIONS, device, str(layer)], container_id)
    finally:
        await asyncio.to_thread(os.close, held)
    path, _, when = entries[0]
    if int((await asyncio.to_thread(os.lstat, path)).st_ctime) != when:
        raise DiskCapError("debugfs did not set the layer's ctimes", container_id=container_id)
    return len(entries)


def _source_of(layer: Path) -> str | None:
    """The device of the file system mounted at `layer` (mountinfo's source field), if one is."""
    for fields in _mounts():
        if len(fields) > 5 and fields[4] == str(layer) and " - " in fields[5]:
            return fields[5].split(" - ", 1)[1].split()[1]
    return None


def _entries_under(diff: Path, stamps: dict[str, int]) -> list[tuple[Path, int, int]]:
    """Each entry of the layer under a stamped path (the path itself too): its path, inode and ctime."""
    found: list[tuple[Path, int]] = []
    for path, when in stamps.items():
        top = diff / path.strip("/")
        if not os.path.lexists(top):
            continue
        found.append((top, when))
        if top.is_dir() and not top.is_symlink():
            for parent, dirs, files in os.walk(top):
                found.extend((Path(parent) / name, when) for name in dirs + files)
    return [(entry, os.lstat(entry).st_ino, when) for entry, when in found]
