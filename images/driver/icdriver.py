#!/usr/bin/env python3
"""In-container driver: one long-lived process per container, started once through `docker exec`.

It reads requests from stdin and writes responses to stdout, each a frame: a 4-byte big-endian
length, then a UTF-8 JSON object. Requests carry an "id" and an "op"; every response echoes the id.
Only the Python standard library is used, so any image with python3 can carry it.

Ops:
  hello                      -> pid, version
  exec     argv cwd timeout cap flood env
                             -> exit, output, omitted, timed_out, flooded, elapsed
  session  cmd timeout cap   -> same as exec, plus cwd and restarted (one persistent bash)
  reset                      -> killed, restored, removed (processes and files back to pristine;
                                the processes that ran before the driver started are kept)
  python   codes timeout cap name fresh close
                             -> results (output, error, raised, omitted, timed_out, died, elapsed
                                per code), restarted (one persistent interpreter per name)

`icdriver.py snapshot` runs once at image build time: it archives the restorable top-level paths
into PRISTINE (a tar) so that `reset` can restore them, whatever the agent did to them.
The interpreter behind `python` is a fork of the driver that speaks the same framing over pipes.
"""

import builtins
import io
import codecs
import json
import os
import re
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import time
import uuid

VERSION = 1
CONFIG = "/etc/intercode/reset.json"
STATE = "/etc/intercode/pristine.json"
PRISTINE = "/usr/lib/intercode/pristine.tar"  # one file in a system dir: invisible to `find /testbed`, `ls /`
# Top-level paths that are never restored by copying: the system, kernel mounts, the pristine copy.
ALWAYS_SYSTEM = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run",
                 "sbin", "sys", "usr", "var", ".dockerenv"}
HEADER = struct.Struct(">I")


# ----------------------------------------------------------------------------- framing

def read_frame(stream):
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    return json.loads(stream.read(size).decode("utf-8"))


def write_frame(stream, obj):
    body = json.dumps(obj).encode("utf-8")
    stream.write(HEADER.pack(len(body)) + body)
    stream.flush()


# ----------------------------------------------------------------------------- processes

def kill_group(pgid, proc=None, grace=0.2):
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


def group_members(pgid):
    """Live (non-zombie) processes of a process group."""
    return [pid for pid, fields in proc_stats() if fields[0] != b"Z" and int(fields[2]) == pgid]


def proc_stats():
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


class Capture:
    """Collects a process's output up to `cap` bytes and counts what it had to leave out."""

    def __init__(self, cap, flood):
        self.cap, self.flood = cap, flood
        self.buf = bytearray()
        self.omitted = 0

    def add(self, chunk):
        room = max(self.cap - len(self.buf), 0)
        self.buf += chunk[:room]
        self.omitted += max(len(chunk) - room, 0)

    @property
    def flooded(self):
        return self.omitted > self.flood

    def valid_utf8(self):
        """Whether the output decodes strictly (a character cut by the cap doesn't count)."""
        try:
            codecs.getincrementaldecoder("utf-8")().decode(bytes(self.buf), final=not self.omitted)
            return True
        except UnicodeDecodeError:
            return False

    def text(self):
        out = self.buf.decode("utf-8", errors="replace")
        if self.omitted:
            out += "\n[output truncated: %d bytes omitted]" % self.omitted
        return out


def pump(fd, proc, deadline, capture, stop_at=None):
    """Read fd into capture until the process exits (then drain), the deadline, or a flood.

    Returns "exit", "timeout" or "flood". Background children that keep the pipe open do not
    hold the call: once the main process has exited, only what is already buffered is read.
    stop_at, if given, is a bytes marker that ends reading as soon as it is seen.
    """
    pidfd = os.pidfd_open(proc.pid) if proc is not None else None
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            watch = [fd] + ([pidfd] if pidfd is not None else [])
            ready, _, _ = select.select(watch, [], [], remaining)
            if fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return "exit"
                capture.add(chunk)
                if capture.flooded:
                    return "flood"
                if stop_at is not None and stop_at in capture.buf[-(len(chunk) + len(stop_at)):]:
                    return "exit"
            elif pidfd is not None and pidfd in ready:
                drain(fd, capture)
                return "exit"
    finally:
        if pidfd is not None:
            os.close(pidfd)


def drain(fd, capture):
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        capture.add(chunk)


class Session:
    """One persistent bash whose state (cwd, variables, functions) lives across actions."""

    def __init__(self, shell="/bin/bash"):
        self.proc = subprocess.Popen([shell, "--noprofile", "--norc"], cwd="/", stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self):
        return self.proc.poll() is None

    def run(self, cmd, timeout, capture):
        """Run cmd; return (outcome, exit code, cwd). The heredoc keeps cmd intact and
        </dev/null keeps our pipe ours; a marker line after it carries $? and $PWD."""
        marker = "__IC_%s__" % uuid.uuid4().hex
        script = ("eval \"$(cat <<'%s'\n%s\n%s\n)\" </dev/null\nprintf '\\n%s %%d %%s\\n' $? \"$PWD\"\n"
                  % (marker, cmd, marker, marker))
        self.proc.stdin.write(script.encode("utf-8"))
        self.proc.stdin.flush()
        tag = ("\n%s " % marker).encode()
        deadline = time.monotonic() + timeout
        outcome = pump(self.proc.stdout.fileno(), None, deadline, capture, stop_at=tag)
        at = capture.buf.rfind(tag)
        while outcome == "exit" and at >= 0 and not capture.buf.endswith(b"\n"):
            outcome = pump(self.proc.stdout.fileno(), None, deadline, capture, stop_at=b"\n")
        if outcome != "exit" or at < 0:
            return outcome if outcome != "exit" else "died", -1, None
        code, _, cwd = capture.buf[at + len(tag):].decode("utf-8", "replace").strip().partition(" ")
        del capture.buf[at:]
        return "exit", int(code), cwd

    def close(self):
        if self.alive():
            kill_group(self.proc.pid, self.proc, grace=0)
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


class Driver:
    def __init__(self):
        self.session = None
        self.groups = set()  # process groups this driver started: every action runs in its own
        self.repls = {}  # name -> Repl: the persistent interpreters of op "python"
        self.repls_lost = set()  # names whose interpreter was killed or died: the next call says so
        self.keep = {proc for proc in list_procs() if proc[0] != os.getpid()}
        self.state = load_json(STATE, None)
        self.pristine = None  # the archive's index, read on the first restore
        if self.state:
            copy_up_directories(self.state["roots"])
            pin_root_mtime(self.state)
        # root -> {path: (ino, ctime_ns, type)}, recorded while the files are pristine; and root ->
        # {file: atime_ns}, to give files that were only read their atime back
        self.atimes = {root: {} for root in self.state["roots"]} if self.state else {}
        self.baseline = {root: walk(root, {}, self.atimes[root]) for root in self.atimes}

    def op_exec(self, req):
        argv, cwd = req["argv"], req.get("cwd") or "/"
        timeout, capture = float(req.get("timeout", 10)), Capture(int(req.get("cap", 65536)), int(req.get("flood", 8 << 20)))
        env = dict(os.environ, **req.get("env", {}))
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            self.groups.add(proc.pid)
        except OSError as exc:
            return {"exit": 127 if isinstance(exc, FileNotFoundError) else 126, "output": "%s: %s\n" % (argv[0], exc.strerror),
                    "omitted": 0, "timed_out": False, "flooded": False, "elapsed": 0.0, "spawned": False}
        fd = proc.stdout.fileno()
        outcome = pump(fd, proc, start + timeout, capture)
        if outcome != "exit":
            kill_group(proc.pid, proc)
            drain(fd, capture)
        proc.stdout.close()
        code = proc.wait()
        return {"exit": code, "output": capture.text(), "omitted": capture.omitted, "timed_out": outcome == "timeout",
                "flooded": outcome == "flood", "elapsed": time.monotonic() - start, "spawned": True,
                "utf8": capture.valid_utf8()}

    def op_session(self, req):
        restarted = self.session is not None and not self.session.alive()
        if self.session is None or not self.session.alive():
            self.session = Session(req.get("shell", "/bin/bash"))
            self.groups.add(self.session.proc.pid)
        start = time.monotonic()
        capture = Capture(int(req.get("cap", 65536)), int(req.get("flood", 8 << 20)))
        outcome, code, cwd = self.session.run(req["cmd"], float(req.get("timeout", 10)), capture)
        if outcome != "exit":  # timed out, flooded or the shell exited: its state is gone
            self.session.close()
            self.session = None
        return {"exit": code, "output": capture.text(), "omitted": capture.omitted, "timed_out": outcome == "timeout",
                "flooded": outcome == "flood", "elapsed": time.monotonic() - start, "cwd": cwd, "restarted": restarted}

    def op_reset(self, req):
        """Kill every process the episode left, then bring each restorable path back to pristine."""
        if self.session is not None:
            self.session.close()
            self.session = None
        self.close_repls()
        killed = kill_strays(self.keep, self.groups)
        self.groups.clear()
        restored = removed = 0
        if self.state is not None:
            removed += remove_new_toplevel(self.state["toplevel"])
            for root, before in self.baseline.items():
                atimes = {}
                now = walk(root, {}, atimes)
                read = restore_atimes(before, now, self.atimes[root], atimes)
                if now != before:
                    self.pristine = self.pristine or Pristine()
                    r, d = restore_root(root, before, now, self.pristine)
                    restored, removed = restored + r, removed + d
                if read or now != before:
                    self.atimes[root] = {}
                    self.baseline[root] = walk(root, {}, self.atimes[root])
            pin_root_mtime(self.state)
        return {"killed": killed, "restored": restored, "removed": removed}

    def op_python(self, req):
        """Run each of `codes` in the persistent interpreter `name`, started on first use. A code that
        times out or kills the interpreter ends it: the rest of `codes` is not run, and the next call
        starts a fresh interpreter and reports restarted. `fresh` empties the namespace first."""
        name, cap, timeout = req.get("name", "main"), int(req.get("cap", 65536)), float(req.get("timeout", 10))
        repl = self.repls.get(name)
        if repl is not None and not repl.alive():
            self.forget_repl(name, lost=True)
            repl = None
        restarted = name in self.repls_lost
        if repl is None:
            repl = self.repls[name] = Repl()
            self.groups.add(repl.pid)
            self.repls_lost.discard(name)
        results, fresh = [], bool(req.get("fresh"))
        for code in req["codes"]:
            if repl is None:
                results.append(repl_failure("Error: not run: the interpreter was stopped by an earlier code"))
                continue
            results.append(repl.run(code, fresh, cap, timeout))
            fresh = False
            if results[-1].get("timed_out") or results[-1].get("died"):
                self.forget_repl(name, lost=True)
                repl = None
        if req.get("close") and name in self.repls:
            self.forget_repl(name, lost=False)
        return {"results": results, "restarted": restarted}

    def forget_repl(self, name, lost):
        self.repls.pop(name).close()
        if lost:
            self.repls_lost.add(name)

    def close_repls(self):
        for name in list(self.repls):
            self.forget_repl(name, lost=False)
        self.repls_lost.clear()


# ----------------------------------------------------------------------------- python interpreter

class Repl:
    """The driver's side of one interpreter: a fork of the driver (a few ms, against ~40 ms for a
    new python3 that imports this module), in its own session and process group, speaking frames
    over two pipes. The driver is single-threaded, so forking it is safe."""

    def __init__(self):
        down_r, down_w = os.pipe()  # driver -> interpreter
        up_r, up_w = os.pipe()  # interpreter -> driver
        self.pid = os.fork()
        if self.pid == 0:  # the interpreter: never returns into the driver's code
            try:
                os.setsid()
                repl(down_r, up_w)
            finally:
                os._exit(0)
        os.close(down_r)
        os.close(up_w)
        self.stdin, self.stdout = os.fdopen(down_w, "wb"), up_r
        self.buf = bytearray()
        self.returncode = None

    def alive(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode is None

    def run(self, code, fresh, cap, timeout):
        start = time.monotonic()
        try:
            write_frame(self.stdin, {"code": code, "fresh": fresh, "cap": cap})
            outcome, reply = read_frame_until(self.stdout, self.buf, start + timeout)
        except (BrokenPipeError, ValueError):  # the child is gone; ValueError: its JSON was cut short
            outcome, reply = "died", None
        if outcome == "timeout":
            return repl_failure("Error: timed out after %g s; the interpreter was stopped and its state is lost"
                                % timeout, timed_out=True, elapsed=time.monotonic() - start)
        if outcome == "died":
            self.close()
            return repl_failure("Error: the interpreter exited (status %s); its state is lost" % self.returncode,
                                died=True, elapsed=time.monotonic() - start)
        reply["elapsed"] = time.monotonic() - start
        return reply

    def close(self):
        """Kill its process group (what it started too) and reap it; idempotent."""
        if self.returncode is None:
            kill_group(self.pid, grace=0)
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        if self.stdout is not None:
            fd, self.stdout = self.stdout, None
            try:
                self.stdin.close()
            except BrokenPipeError:  # what was left unsent has nobody to read it
                pass
            finally:
                os.close(fd)


def repl_failure(error, timed_out=False, died=False, elapsed=0.0):
    return {"output": "", "error": error, "raised": True, "omitted": 0, "timed_out": timed_out, "died": died,
            "elapsed": elapsed}


def read_frame_until(fd, buf, deadline):
    """("ok", frame), ("timeout", None) at the deadline, or ("died", None) when the writer is gone."""
    while True:
        if len(buf) >= HEADER.size:
            (size,) = HEADER.unpack_from(buf)
            if len(buf) >= HEADER.size + size:
                body = bytes(buf[HEADER.size:HEADER.size + size])
                del buf[:HEADER.size + size]
                return "ok", json.loads(body.decode("utf-8"))
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return "timeout", None
        chunk = os.read(fd, 65536)
        if not chunk:
            return "died", None
        buf += chunk


class CappedText(io.StringIO):
    """sys.stdout/sys.stderr during one code: keeps the first `cap` characters, counts the rest."""

    def __init__(self, cap):
        super().__init__()
        self.room, self.omitted = cap, 0

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        kept = text[:max(self.room, 0)]
        super().write(kept)
        self.room -= len(kept)
        self.omitted += len(text) - len(kept)
        return len(text)

    def text(self):
        kept = self.getvalue().strip()
        return kept + "\n[output truncated: %d characters omitted]" % self.omitted if self.omitted else kept


def pristine_globals():
    """What the original python_server's namespace started from (its module globals): the usual
    module names, and `sys` and `StringIO` usable without an import, as they were there."""
    return {"__name__": "__main__", "__doc__": None, "__package__": None, "__loader__": None, "__spec__": None,
            "__annotations__": {}, "__builtins__": builtins, "sys": sys, "StringIO": io.StringIO}


def run_code(code, namespace, cap):
    """exec `code` like the original python_server: stdout and stderr captured and stripped; on an
    exception its error is "Error: <exception>" (what was printed before it is kept apart, in
    `output`, with raised set: the original dropped it)."""
    out, err = CappedText(cap), CappedText(cap)
    sys.stdout, sys.stderr = out, err
    raised, message = False, ""
    try:
        exec(code, namespace)
    except BaseException as exc:  # SystemExit too: the code must not end the interpreter
        raised = True
        try:
            message = "Error: %s" % (exc,)
        except BaseException:  # an exception whose str() fails
            message = "Error: <unprintable %s>" % type(exc).__name__
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    error = message[:cap] if raised else err.text()
    return {"output": out.text(), "error": error, "raised": raised, "omitted": out.omitted + err.omitted,
            "timed_out": False, "died": False}


def repl(frames_in, frames_out):
    """The interpreter (a fork of the driver): one persistent namespace, one frame in and one out
    per code. Its fds 0-2 become /dev/null and every other inherited fd is closed (the driver's
    stream among them), so that what a subprocess or os.write prints, which the original did not
    capture either, can't corrupt the framing. (The driver's stdin reader has nothing buffered at
    the fork: the host sends a request only after the previous answer.)"""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    keep = sorted((frames_in, frames_out))
    os.closerange(3, keep[0])
    os.closerange(keep[0] + 1, keep[1])
    os.closerange(keep[1] + 1, 65536)
    proto_in, proto_out = os.fdopen(frames_in, "rb"), os.fdopen(frames_out, "wb")
    me, namespace = os.getpid(), pristine_globals()
    while True:
        req = read_frame(proto_in)
        if req is None:
            return
        if req.get("fresh"):
            namespace = pristine_globals()
        result = run_code(req["code"], namespace, int(req.get("cap", 65536)))
        if os.getpid() != me:  # a fork in the code returned here: only the interpreter itself answers
            os._exit(0)
        write_frame(proto_out, result)


def load_json(path, default):
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return default


def kill_strays(keep, groups=()):
    """SIGKILL every process but this driver and those in `keep` ((pid, start time) pairs of the
    container's own processes, taken when the driver started), until none is left, zombies
    included: a zombie still holds its pid, and a fork bomb's zombies would exhaust the pids limit
    for the next episode. Raises when they won't go, so that the pool replaces the container."""
    me, killed = os.getpid(), set()
    # First the groups our actions ran in: killpg is atomic with respect to fork (a parent with a
    # pending SIGKILL can't fork), so a fork bomb that did not leave its group dies in one call.
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(400):
        strays = [(pid, zombie) for pid, start, zombie in list_procs(zombies=True)
                  if pid != me and (pid, start) not in keep]
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


def list_procs(zombies=False):
    """(pid, start time) of every live process, or (pid, start time, is_zombie) of every process.
    The start time tells a reused pid apart."""
    for pid, fields in proc_stats():
        if zombies:
            yield pid, fields[19], fields[0] == b"Z"
        elif fields[0] != b"Z":
            yield pid, fields[19]


def reap_children():
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


# ----------------------------------------------------------------------------- files

def walk(path, found, atimes=None):
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


def restore_atimes(before, now, atimes_before, atimes_now):
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


def pin_root_mtime(state):
    """Give `/` its build-time mtime back. The engine touches `/` when it creates a container, so
    `ls -ld /` (or `ls -al` with an empty `$(which tool)`) would otherwise print the container's
    creation minute: the gold's container and the agent's would disagree. An episode that added
    or removed a top-level entry changed it too; the reset removes the entry, this the date."""
    ns = state.get("root_mtime_ns")
    if ns is not None:
        os.utime("/", ns=(ns, ns))


def copy_up_directories(roots):
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

    def __init__(self, path=PRISTINE):
        self.tar = tarfile.open(path, "r:")
        self.members = {"/" + m.name.lstrip("/"): m for m in self.tar.getmembers()}

    def get(self, path):
        return self.members.get(path)

    def restore(self, path):
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

    def _create(self, path, member):
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

    def _write(self, path, member):
        with self.tar.extractfile(member) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)

    def set_meta(self, path, member=None):
        member = member or self.members[path]
        os.chown(path, member.uid, member.gid, follow_symlinks=False)
        if not member.issym():
            os.chmod(path, member.mode)
        mtime_ns = int(round(float(member.pax_headers.get("mtime", member.mtime)) * 1e9))
        os.utime(path, ns=(mtime_ns, mtime_ns), follow_symlinks=False)


def restore_root(root, before, now, pristine):
    """Bring one top-level path back to its archived state, touching only what changed."""
    changed = sorted(p for p in set(now) | set(before) if now.get(p) != before.get(p))
    restored = removed = 0
    rebuilt, dirs = [], set()
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


def is_under(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def remove(path):
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


def remove_new_toplevel(pristine_names):
    keep = set(pristine_names) | ALWAYS_SYSTEM
    mounted = mount_points()
    removed = 0
    for name in os.listdir("/"):
        path = "/" + name
        if name not in keep and path not in mounted:
            remove(path)
            removed += 1
    return removed


def mount_points():
    """Where something is mounted, from the mount table. Not by st_dev (os.path.ismount): when the
    container's writable layer has a file system of its own (its disk cap), a file in it has that
    file system's device, unlike `/`, without being a mount point."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as table:
        return {re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split(" ", 5)[4])
                for line in table}


def snapshot():
    """Build-time: record the top level and archive every restorable root into PRISTINE."""
    config = load_json(CONFIG, {})
    system = ALWAYS_SYSTEM | set(config.get("system", []))
    toplevel = sorted(os.listdir("/"))
    roots = ["/" + n for n in toplevel if n not in system]
    os.makedirs(os.path.dirname(PRISTINE), exist_ok=True)
    # PAX keeps sub-second mtimes; no compression, so a restore reads members directly.
    with tarfile.open(PRISTINE, "w:", format=tarfile.PAX_FORMAT) as tar:
        for root in roots:
            tar.add(root, arcname=root.lstrip("/"), recursive=True)
    os.chmod(PRISTINE, 0o600)
    os.makedirs(os.path.dirname(STATE), exist_ok=True)
    with open(STATE, "w") as fh:
        json.dump({"roots": roots, "toplevel": toplevel, "root_mtime_ns": os.stat("/").st_mtime_ns}, fh)
    print("pristine snapshot of %s" % " ".join(roots))


# ----------------------------------------------------------------------------- main loop

def serve():
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    driver = Driver()
    roots = driver.state["roots"] if driver.state else []
    write_frame(stdout, {"id": 0, "ok": True, "pid": os.getpid(), "version": VERSION, "roots": roots})
    ops = {"hello": lambda req: {"pid": os.getpid(), "version": VERSION}, "exec": driver.op_exec,
           "session": driver.op_session, "reset": driver.op_reset, "python": driver.op_python}
    while True:
        req = read_frame(stdin)
        if req is None or req.get("op") == "exit":
            break
        try:
            result = ops[req["op"]](req)
            result.update(id=req.get("id"), ok=True)
        except Exception as exc:  # reported to the caller, who decides; the driver stays up
            result = {"id": req.get("id"), "ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
        write_frame(stdout, result)


if __name__ == "__main__":
    if sys.argv[1:] == ["snapshot"]:
        snapshot()
    else:
        serve()
