"""Files back to pristine: the build-time snapshot of the restorable top-level paths, and the
reset that brings them back, touching only what an episode changed.

`snapshot` runs once at image build time: it archives the restorable top-level paths into PRISTINE
(a tar) so that a reset can restore them, whatever the agent did to them. Every function takes the
file system's top as a parameter, "/" by default, so that the tests can run them on a temporary
tree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tarfile
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypedDict, TypeVar, cast

if TYPE_CHECKING:
    from typing import NotRequired  # Python 3.11's: only in annotations, which are strings here

CONFIG = "/etc/intercode/reset.json"
STATE = "/etc/intercode/pristine.json"
PRISTINE = "/usr/lib/intercode/pristine.tar"  # one file in a system dir: invisible to `find /testbed`, `ls /`
# Top-level paths that are never restored by copying: the system, kernel mounts, the pristine copy.
ALWAYS_SYSTEM = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run",
                 "sbin", "sys", "usr", "var", ".dockerenv"}

Stamp = tuple[int, int, int]  # a path's (inode, ctime_ns, type): `walk`
T = TypeVar("T")


class Config(TypedDict, total=False):
    """CONFIG, the image's: top-level paths to leave to the system besides ALWAYS_SYSTEM."""

    system: list[str]


class State(TypedDict):
    """STATE, written by `snapshot`: what the reset restores."""

    roots: list[str]  # the restorable top-level paths, archived in PRISTINE
    toplevel: list[str]  # every top-level name at the snapshot: any other is removed
    root_mtime_ns: NotRequired[int]  # the top's mtime; pin_root_mtime does without it


class Restorer:
    """The restorable trees as the snapshot left them, and the reset that brings them back."""

    def __init__(self, top: str = "/", state: str = STATE, pristine: str = PRISTINE) -> None:
        self.top, self.pristine_path = top, pristine
        self.state: State | None = load_json(state, None)
        self.pristine: Pristine | None = None  # the archive's index, read on the first restore
        if self.state:
            copy_up_directories(self.state["roots"])
            pin_root_mtime(self.state, top)
        # root -> {path: (ino, ctime_ns, type)}, recorded while the files are pristine; and root ->
        # {file: atime_ns}, to give files that were only read their atime back
        self.atimes: dict[str, dict[str, int]] = {root: {} for root in self.state["roots"]} if self.state else {}
        self.baseline: dict[str, dict[str, Stamp]] = {root: walk(root, {}, self.atimes[root]) for root in self.atimes}

    @property
    def roots(self) -> list[str]:
        return self.state["roots"] if self.state else []

    def restore(self) -> tuple[int, int]:
        """Bring each restorable path back to pristine; (restored, removed) paths."""
        restored = removed = 0
        if self.state is not None:
            removed += remove_new_toplevel(self.state["toplevel"], self.top)
            for root, before in self.baseline.items():
                atimes: dict[str, int] = {}
                now = walk(root, {}, atimes)
                read = restore_atimes(before, now, self.atimes[root], atimes)
                if now != before:
                    self.pristine = self.pristine or Pristine(self.pristine_path)
                    r, d = restore_root(root, before, now, self.pristine)
                    restored, removed = restored + r, removed + d
                if read or now != before:
                    self.atimes[root] = {}
                    self.baseline[root] = walk(root, {}, self.atimes[root])
            pin_root_mtime(self.state, self.top)
        return restored, removed


def load_json(path: str, default: T) -> T:
    """The JSON in `path`, a file of ours of `default`'s type; `default` when there is none."""
    try:
        with open(path) as fh:
            return cast(T, json.load(fh))
    except FileNotFoundError:
        return default


def walk(path: str, found: dict[str, Stamp], atimes: dict[str, int] | None = None) -> dict[str, Stamp]:
    """Map every path under `path` to (inode, ctime_ns, type). ctime cannot be set from user
    space, so any change to content, mode, owner or name since the walk shows as a new value.
    With `atimes`, also map every regular file to its atime: reading a file changes only that."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return found
    found[path] = (st.st_ino, st.st_ctime_ns, stat.S_IFMT(st.st_mode))
    if atimes is not None and stat.S_ISREG(st.st_mode):
        atimes[path] = st.st_atime_ns
    if stat.S_ISDIR(st.st_mode):
        for entry in os.scandir(path):
            walk(entry.path, found, atimes)
    return found


def restore_atimes(before: Mapping[str, Stamp], now: Mapping[str, Stamp], atimes_before: Mapping[str, int],
                   atimes_now: Mapping[str, int]) -> int:
    """Give the files an episode only read their atime back (`find -amin`, `-atime`).

    A file in the container's own layer (one the driver or a reset wrote) gets a new atime when
    it is read; one still in the image's layer does not. Left alone, a reused container would
    answer `find -atime +1` differently from a fresh one. Setting the atime moves the ctime,
    so the caller walks the root again."""
    restored = 0
    for path, atime in atimes_now.items():
        old = atimes_before.get(path)
        if old is not None and old != atime and now.get(path) == before.get(path):
            try:
                os.utime(path, ns=(old, os.lstat(path).st_mtime_ns), follow_symlinks=False)
                restored += 1
            except OSError:
                pass
    return restored


def pin_root_mtime(state: State, top: str = "/") -> None:
    """Give `/` its build-time mtime back. The engine touches `/` when it creates a container, so
    `ls -ld /` (or `ls -al` with an empty `$(which tool)`) would otherwise print the container's
    creation minute: the gold's container and the agent's would disagree. An episode that added
    or removed a top-level entry changed it too; the reset removes the entry, this the date."""
    ns = state.get("root_mtime_ns")
    if ns is not None:
        os.utime(top, ns=(ns, ns))


def copy_up_directories(roots: Iterable[str]) -> None:
    """Copy every directory of the restorable trees up into the container's own layer, each one
    marked "impure" as an episode's first change inside it would mark it.

    overlayfs marks a directory whose children were copied up as "impure" with an xattr, which on
    ext4 can cost a block: `du` would then depend on what earlier episodes touched (fs3 #12 moves
    the files of leaf directories away; the reset brings them back, but their directories stay
    impure, and `du` of a reused container then printed 4 KiB more per directory than a fresh
    one). A same-mode chmod copies each directory up once, at start, which marks every parent of a
    directory; a directory with no subdirectory is marked by copying up its first file the same
    way (only that file's ctime moves, to the container's start, as every directory's already
    does). Fresh and reused containers then agree."""
    for root in roots:
        if os.path.isdir(root) and not os.path.islink(root):
            for dirpath, dirnames, filenames in os.walk(root):
                os.chmod(dirpath, stat.S_IMODE(os.lstat(dirpath).st_mode))
                if dirnames:
                    continue
                for name in sorted(filenames):
                    path = os.path.join(dirpath, name)
                    st = os.lstat(path)
                    if stat.S_ISREG(st.st_mode):
                        os.chmod(path, stat.S_IMODE(st.st_mode))
                        break


class Pristine:
    """The build-time archive of the restorable paths, indexed by absolute path."""

    def __init__(self, path: str = PRISTINE) -> None:
        self.tar = tarfile.open(path, "r:")
        self.members = {"/" + m.name.lstrip("/"): m for m in self.tar.getmembers()}

    def get(self, path: str) -> tarfile.TarInfo | None:
        return self.members.get(path)

    def restore(self, path: str) -> None:
        """Recreate `path` (and, for a directory, everything under it) exactly as archived."""
        member = self.members[path]
        if member.isdir():
            below = sorted(p for p in self.members if is_under(p, path))
            for sub in below:
                self._create(sub, self.members[sub])
            for sub in sorted((p for p in below if self.members[p].isdir()), key=len, reverse=True):
                self.set_meta(sub)
        else:
            self._create(path, member)

    def _create(self, path: str, member: tarfile.TarInfo) -> None:
        if member.isdir():
            os.mkdir(path)
        elif member.issym():
            os.symlink(member.linkname, path)
        elif member.islnk():
            self._write(path, self.members["/" + member.linkname.lstrip("/")])
        elif member.isfile():
            self._write(path, member)
        else:
            os.mknod(path, member.mode | {tarfile.CHRTYPE: stat.S_IFCHR, tarfile.BLKTYPE: stat.S_IFBLK,
                                          tarfile.FIFOTYPE: stat.S_IFIFO}[member.type],
                     os.makedev(member.devmajor, member.devminor))
        if not member.isdir():
            self.set_meta(path, member)

    def _write(self, path: str, member: tarfile.TarInfo) -> None:
        source = self.tar.extractfile(member)
        assert source is not None  # a regular file's member: it has content
        with source as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)

    def set_meta(self, path: str, member: tarfile.TarInfo | None = None) -> None:
        member = member or self.members[path]
        os.chown(path, member.uid, member.gid, follow_symlinks=False)
        if not member.issym():
            os.chmod(path, member.mode)
        mtime_ns = int(round(float(member.pax_headers.get("mtime", member.mtime)) * 1e9))
        os.utime(path, ns=(mtime_ns, mtime_ns), follow_symlinks=False)


def restore_root(root: str, before: Mapping[str, Stamp], now: Mapping[str, Stamp],
                 pristine: Pristine) -> tuple[int, int]:
    """Bring one top-level path back to its archived state, touching only what changed."""
    changed = sorted(p for p in set(now) | set(before) if now.get(p) != before.get(p))
    restored = removed = 0
    rebuilt: list[str] = []
    dirs: set[str] = set()
    for path in changed:
        if any(is_under(path, tree) for tree in rebuilt):
            continue
        member = pristine.get(path)
        if member is None:
            if os.path.lexists(path):
                remove(path)
                removed += 1
            continue
        if os.path.lexists(path) and not (member.isdir() and os.path.isdir(path) and not os.path.islink(path)):
            remove(path)
        if os.path.lexists(path):
            dirs.add(path)  # a directory that still exists: only its metadata may differ
        elif os.path.isdir(os.path.dirname(path)):
            pristine.restore(path)
            if member.isdir():
                rebuilt.append(path)
            restored += 1
        dirs.update(p for p in (os.path.dirname(path),) if is_under(p, root))
    # Directory metadata last and deepest first: restoring children rewrites their parent's mtime.
    for path in sorted(dirs, key=len, reverse=True):
        member = pristine.get(path)
        if member is not None and member.isdir() and os.path.isdir(path):
            pristine.set_meta(path, member)
    return restored, removed


def is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        for dirpath, dirnames, _ in os.walk(path):
            for d in dirnames:  # a directory without write or search permission can't be emptied
                sub = os.path.join(dirpath, d)
                if not os.path.islink(sub):
                    os.chmod(sub, 0o700)
        os.chmod(path, 0o700)
        shutil.rmtree(path)
    else:
        os.unlink(path)


def remove_new_toplevel(pristine_names: Iterable[str], top: str = "/") -> int:
    keep = set(pristine_names) | ALWAYS_SYSTEM
    mounted = mount_points()
    removed = 0
    for name in os.listdir(top):
        path = os.path.join(top, name)
        if name not in keep and path not in mounted:
            remove(path)
            removed += 1
    return removed


def mount_points() -> set[str]:
    """Where something is mounted, from the mount table. Not by st_dev (os.path.ismount): when the
    container's writable layer has a file system of its own (its disk cap), a file in it has that
    file system's device, unlike `/`, without being a mount point."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
        return {re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split(" ", 5)[4])
                for line in table}


def snapshot(top: str = "/", config: str = CONFIG, state: str = STATE, pristine: str = PRISTINE) -> None:
    """Build-time: record the top level and archive every restorable root into `pristine`."""
    settings = load_json(config, Config())
    system = ALWAYS_SYSTEM | set(settings.get("system", []))
    toplevel = sorted(os.listdir(top))
    roots = [os.path.join(top, n) for n in toplevel if n not in system]
    os.makedirs(os.path.dirname(pristine), exist_ok=True)
    # PAX keeps sub-second mtimes; no compression, so a restore reads members directly. Members are
    # named by their absolute path (less the leading "/"): that is how Pristine finds them.
    with tarfile.open(pristine, "w:", format=tarfile.PAX_FORMAT) as tar:
        for root in roots:
            tar.add(root, arcname=root.lstrip("/"), recursive=True)
    os.chmod(pristine, 0o600)
    os.makedirs(os.path.dirname(state), exist_ok=True)
    with open(state, "w") as fh:
        recorded: State = {"roots": roots, "toplevel": toplevel, "root_mtime_ns": os.stat(top).st_mtime_ns}
        json.dump(recorded, fh)
    print("pristine snapshot of %s" % " ".join(roots))
