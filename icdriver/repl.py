"""Op `python`: persistent interpreters, each a fork of the driver speaking frames over pipes."""

from __future__ import annotations

import builtins
import io
import os
import select
import sys
import time
from typing import Literal, cast

from icdriver import protocol
from icdriver.capture import CappedText
from icdriver.process import kill_group


class Repl:
    """The driver's side of one interpreter: a fork of the driver (a few ms, against ~40 ms for a
    new python3 that imports this module), in its own session and process group, speaking frames
    over two pipes. The driver is single-threaded, so forking it is safe."""

    def __init__(self) -> None:
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
        self.stdin = os.fdopen(down_w, "wb")
        self.stdout: int | None = up_r  # None once closed
        self.buf = bytearray()
        self.returncode: int | None = None

    def alive(self) -> bool:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode is None

    def run(self, code: str, fresh: bool, cap: int, timeout: float) -> protocol.CodeResult:
        start = time.monotonic()
        request: protocol.CodeRequest = {"code": code, "fresh": fresh, "cap": cap}
        try:
            protocol.write(self.stdin, request)
            assert self.stdout is not None  # close() closes stdin too: the write above raised
            outcome, frame = read_frame_until(self.stdout, self.buf, start + timeout)
        except (BrokenPipeError, ValueError):  # the child is gone; ValueError: its JSON was cut short
            outcome, frame = "died", None
        if outcome == "timeout":
            return repl_failure("Error: timed out after %g s; the interpreter was stopped and its state is lost"
                                % timeout, timed_out=True, elapsed=time.monotonic() - start)
        if outcome == "died":
            self.close()
            return repl_failure("Error: the interpreter exited (status %s); its state is lost" % self.returncode,
                                died=True, elapsed=time.monotonic() - start)
        assert frame is not None  # "ok" comes with its frame
        reply = cast("protocol.CodeReply", frame)  # the interpreter's answer: run_code's, below
        return {**reply, "elapsed": time.monotonic() - start}

    def close(self) -> None:
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


def repl_failure(error: str, timed_out: bool = False, died: bool = False,
                 elapsed: float = 0.0) -> protocol.CodeResult:
    return {"output": "", "error": error, "raised": True, "omitted": 0, "timed_out": timed_out, "died": died,
            "elapsed": elapsed}


def read_frame_until(fd: int, buf: bytearray,
                     deadline: float) -> tuple[Literal["ok", "timeout", "died"], protocol.Frame | None]:
    """("ok", frame), ("timeout", None) at the deadline, or ("died", None) when the writer is gone."""
    while True:
        frame = protocol.decode(buf)
        if frame is not None:
            return "ok", frame
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return "timeout", None
        chunk = os.read(fd, 65536)
        if not chunk:
            return "died", None
        buf += chunk


def pristine_globals() -> dict[str, object]:
    """What the original python_server's namespace started from (its module globals): the usual
    module names, and `sys` and `StringIO` usable without an import, as they were there."""
    return {"__name__": "__main__", "__doc__": None, "__package__": None, "__loader__": None, "__spec__": None,
            "__annotations__": {}, "__builtins__": builtins, "sys": sys, "StringIO": io.StringIO}


def run_code(code: str, namespace: dict[str, object], cap: int) -> protocol.CodeReply:
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


def repl(frames_in: int, frames_out: int) -> None:
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
        frame = protocol.read(proto_in)
        if frame is None:
            return
        req = cast("protocol.CodeRequest", frame)  # what Repl.run sent
        if req.get("fresh"):
            namespace = pristine_globals()
        result = run_code(req["code"], namespace, int(req.get("cap", 65536)))
        if os.getpid() != me:  # a fork in the code returned here: only the interpreter itself answers
            os._exit(0)
        protocol.write(proto_out, result)
