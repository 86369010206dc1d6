"""Processes of the container: their groups, killing them, the strays a reset removes, reaping."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Collection, Iterable, Iterator


def kill_group(pgid: int, proc: subprocess.Popen[bytes] | None = None, grace: float = 0.2) -> None:
    """SIGTERM the group, then SIGKILL until no live member is left (a fork bomb keeps forking).
    Our own child is reaped as we go: a zombie still counts as a group member for killpg."""
    signals = [signal.SIGTERM] + [signal.SIGKILL] * 400
    deadline = time.monotonic() + grace
    for sig in signals:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        if proc is not None:
            proc.poll()
        if not group_members(pgid):
            break
        time.sleep(0.005)
        if sig == signal.SIGTERM:
            while time.monotonic() < deadline and group_members(pgid):
                time.sleep(0.01)
                if proc is not None:
                    proc.poll()
    if proc is not None:
        proc.poll()


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    return [pid for pid, fields in proc_stats() if fields[0] != b"Z" and int(fields[2]) == pgid]


def proc_stats() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every process; fields[0] is
    the state, fields[2] the process group, fields[19] the start time."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            yield int(entry), data[data.rfind(b")") + 2:].split()


def kill_strays(keep: Collection[tuple[int, bytes]], groups: Iterable[int] = ()) -> int:
    """SIGKILL every process but this driver and those in `keep` ((pid, start time) pairs of the
    container's own processes, taken when the driver started), until none is left, zombies
    included: a zombie still holds its pid, and a fork bomb's zombies would exhaust the pids limit
    for the next episode. Raises when they won't go, so that the pool replaces the container."""
    me = os.getpid()
    killed: set[int] = set()
    # First the groups our actions ran in: killpg is atomic with respect to fork (a parent with a
    # pending SIGKILL can't fork), so a fork bomb that did not leave its group dies in one call.
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(400):
        strays = [(pid, fields[0] == b"Z") for pid, fields in proc_stats()
                  if pid != me and (pid, fields[19]) not in keep]
        if not strays:
            return len(killed)
        for pid, zombie in strays:
            if not zombie:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    pass
        reap_children()
        time.sleep(0.005)
    raise RuntimeError("%d processes survived the reset" % len(strays))


def list_procs() -> Iterator[tuple[int, bytes]]:
    """(pid, start time) of every live process. The start time tells a reused pid apart."""
    for pid, fields in proc_stats():
        if fields[0] != b"Z":
            yield pid, fields[19]


def reap_children() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
