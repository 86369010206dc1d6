"""File ages of a replay context: a file system's files given the ages they had when a recording
was made, in a container we just leased.

The original's images ran their set-up scripts at build time, so a file the set-up made "now" was
as old as the image, and one it dated explicitly (`touch -t 2023...`) had its fixed date. A
recording made days after the build saw the first kind days old, and the second kind as old as
they were on the day of the recording. Answers of `find -mtime`, `-atime`, `-newer`, `ls -t` and
`ls -l` depend on both. Our images date the first kind at their own build (images/common/redate.py)
and keep the second.

`FileAges` moves both so that, at the replay's `anchor`, every file has the age it had at the
recording: the image's build-time files `built_ns` before the anchor (their sub-second spread
kept), the explicitly dated ones shifted by `shift_ns` (the anchor less the recording's moment).
One anchor per recording: the gold's containers and the agent's print the same dates. Files a
reset or an action writes later get the kernel's time, fresh, as they did in the recording. A
file's ctime can't be set: it is the moment of aging. The pool's reset restores every mtime, so
a leased container comes back as the image made it.

The base's own files (`base`: the system's logs) came from layers older than any set-up; they are
dated `base_ns` before the anchor, their spread kept, whether or not the file system's ages are known
(orchestrator/fidelity/replay_context.py, BASE).

It travels in the task (`Task.meta["file_ages"]`): the gold cache keys by the task, so golds of
another context are never mixed with these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from foundation.errors import SandboxError
from foundation.pool import Sandbox
from tasks import Task

META = "file_ages"
TIMEOUT = 60.0
# Run in the container with the image's python3: every entry under the roots, dated by the rule
# above. An entry within a day of the newest one is the build's (redate.py's rule); the others
# carry the set-up's explicit dates. Their atimes are the build's, as a `touch -m` left them.
SCRIPT = r"""
import json, os, sys
args = json.loads(sys.argv[1])

def walk(roots):
    paths = []
    for root in roots:
        if os.path.lexists(root):
            paths.append(root)
            for parent, dirs, files in os.walk(root):
                paths.extend(os.path.join(parent, name) for name in dirs + files)
    return {path: os.lstat(path) for path in paths}

stats = walk(args["roots"])
if stats:
    newest = max(st.st_mtime_ns for st in stats.values())
    built = args["anchor_ns"] - args["built_ns"]
    for path, st in stats.items():
        if args["atimes_only"]:  # the files are aged already: their mtimes say which kind they are
            mtime = st.st_mtime_ns
            atime = mtime if mtime >= newest - 86400 * 10**9 else built
        elif st.st_mtime_ns >= newest - 86400 * 10**9:
            atime = mtime = built - (newest - st.st_mtime_ns)
        else:
            atime, mtime = built, st.st_mtime_ns + args["shift_ns"]
        os.utime(path, ns=(atime, mtime), follow_symlinks=False)
base = {} if args["atimes_only"] else walk(args["base"])
if base:  # the base's own files: base_ns old, their spread kept
    newest = max(st.st_mtime_ns for st in base.values())
    for path, st in base.items():
        when = args["anchor_ns"] - args["base_ns"] - (newest - st.st_mtime_ns)
        os.utime(path, ns=(when, when), follow_symlinks=False)
print(len(stats) + len(base))
"""


@dataclass(frozen=True)
class FileAges:
    """Ages to give a file system's files, at `anchor_ns` (epoch nanoseconds): the build's files
    `built_ns` old, the explicitly dated ones moved by `shift_ns`; and the base's own files (under
    `base`: the system's logs) `base_ns` old. No roots: only the base's files are dated."""

    roots: tuple[str, ...]
    anchor_ns: int
    built_ns: int
    shift_ns: int
    base: tuple[str, ...] = ()
    base_ns: int = 0

    def as_meta(self) -> dict[str, Any]:
        return {"roots": list(self.roots), "anchor_ns": self.anchor_ns, "built_ns": self.built_ns,
                "shift_ns": self.shift_ns, "base": list(self.base), "base_ns": self.base_ns}

    def ctimes(self) -> dict[str, int]:
        """The ctimes the original's image layers gave these files, in epoch seconds at the anchor:
        the build's moment for the roots' (its set-up wrote them then, explicit dates or not), the
        base's for the base's own files. Only an edit of the container's layer sets them."""
        built, base = (self.anchor_ns - self.built_ns) // 10**9, (self.anchor_ns - self.base_ns) // 10**9
        return {**{root: built for root in self.roots}, **{path: base for path in self.base}}

    @classmethod
    def of(cls, task: Task) -> FileAges | None:
        value = task.meta.get(META)
        if not isinstance(value, dict):
            return None
        return cls(tuple(value["roots"]), int(value["anchor_ns"]), int(value["built_ns"]), int(value["shift_ns"]),
                   tuple(value.get("base", ())), int(value.get("base_ns", 0)))


async def age_files(sandbox: Sandbox, task: Task, *, atimes_only: bool = False) -> None:
    """Give the task's file system the ages of its replay context, if it has one; `atimes_only`:
    put back the access times of files aged already (something read them all since)."""
    ages = FileAges.of(task)
    if ages is None:
        return
    args = json.dumps({**ages.as_meta(), "atimes_only": atimes_only})
    await checked(sandbox, ["python3", "-c", SCRIPT, args], "/", "set the recording's file ages")


async def age_repository(sandbox: Sandbox, task: Task, workdir: str) -> None:
    """A long-lived container of the original's lifecycle, made ready: its files aged, and git's
    index refreshed so that its first reset rewrites only what an episode changed.

    The refresh reads every file whose stat data the index does not hold (all of them, in a new
    container), and a read gives a file a fresh access time, which the original's containers, made
    from the very layer that was committed, never paid. So the access times are put back after it,
    and git is told not to trust ctimes, which that changes (it still compares mtimes and sizes)."""
    await age_files(sandbox, task)
    # Its exit status says whether entries needed an update: that is what it is run for.
    await sandbox.exec(["git", "update-index", "-q", "--refresh"], cwd=workdir, timeout=TIMEOUT)
    if (ages := FileAges.of(task)) is not None and ages.roots:
        await age_files(sandbox, task, atimes_only=True)
        await checked(sandbox, ["git", "config", "core.trustctime", "false"], workdir, "configure git")


async def checked(sandbox: Sandbox, argv: list[str], cwd: str, what: str) -> None:
    """`argv` run in the sandbox; SandboxError (could not WHAT) when it fails or times out."""
    result = await sandbox.exec(argv, cwd=cwd, timeout=TIMEOUT)
    if result.exit_code != 0 or result.timed_out:
        raise SandboxError(f"could not {what}: {result.output.strip()[-200:]}",
                           container_id=sandbox.container_id, image=sandbox.image)
