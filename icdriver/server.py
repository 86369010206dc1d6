"""The driver's main loop: one request frame in, one reply frame out, until stdin ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import cast

from icdriver import protocol
from icdriver.capture import Capture, drain, pump
from icdriver.files import unpack
from icdriver.process import kill_group, kill_strays, list_procs
from icdriver.repl import Repl, repl_failure
from icdriver.restore import Restorer
from icdriver.session import SHELL, Session
from icdriver.users import environment, popen_args, resolve


class Driver:
    def __init__(self) -> None:
        self.session: Session | None = None
        self.groups: set[int] = set()  # process groups this driver started: every action runs in its own
        self.repls: dict[str, Repl] = {}  # name -> Repl: the persistent interpreters of op "python"
        self.repls_lost: set[str] = set()  # names whose interpreter was killed or died: the next call says so
        self.keep = {proc for proc in list_procs() if proc[0] != os.getpid()}
        self.files = Restorer()

    def handle(self, req: protocol.Request) -> protocol.Reply:
        """The reply to one request, without its envelope (serve adds it). An unknown op raises KeyError."""
        if req["op"] == protocol.HELLO:
            return self.op_hello()
        if req["op"] == protocol.EXEC:
            return self.op_exec(req)
        if req["op"] == protocol.SESSION:
            return self.op_session(req)
        if req["op"] == protocol.RESET:
            return self.op_reset(req)
        if req["op"] == protocol.PYTHON:
            return self.op_python(req)
        if req["op"] == protocol.PUT:
            return self.op_put(req)
        raise KeyError(req["op"])

    def op_hello(self) -> protocol.HelloReply:
        return {protocol.PID: os.getpid(), protocol.VERSION_KEY: protocol.VERSION}

    def op_exec(self, req: protocol.ExecRequest) -> protocol.ExecReply:
        argv, cwd = req["argv"], req.get("cwd") or "/"
        timeout = float(req.get("timeout", 10))
        capture = Capture(int(req.get("cap", 65536)), int(req.get("flood", 8 << 20)))
        linger = float(req.get("linger", 0))
        start = time.monotonic()
        try:
            user = resolve(req.get("user"))
        except ValueError as exc:
            return {"exit": 126, "output": "intercode: %s\n" % exc, "omitted": 0, "timed_out": False,
                    "flooded": False, "elapsed": 0.0, "spawned": False}
        env = dict(environment(user, dict(os.environ)), **req.get("env", {}))  # the user's HOME, unless the request gives one
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True, **popen_args(user))  # type: ignore[call-overload]
            self.groups.add(proc.pid)
        except OSError as exc:
            return {"exit": 127 if isinstance(exc, FileNotFoundError) else 126,
                    "output": "%s: %s\n" % (argv[0], exc.strerror), "omitted": 0, "timed_out": False,
                    "flooded": False, "elapsed": 0.0, "spawned": False}
        assert proc.stdout is not None  # piped, above
        fd = proc.stdout.fileno()
        outcome = pump(fd, proc, start + timeout, capture, linger=linger)
        if outcome != "exit":
            kill_group(proc.pid, proc)
            drain(fd, capture)
        proc.stdout.close()
        code = proc.wait()
        return {"exit": code, "output": capture.text(), "omitted": capture.omitted, "timed_out": outcome == "timeout",
                "flooded": outcome == "flood", "elapsed": time.monotonic() - start, "spawned": True,
                "utf8": capture.valid_utf8()}

    def op_session(self, req: protocol.SessionRequest) -> protocol.SessionReply:
        restarted = self.session is not None and not self.session.alive()
        user = resolve(req.get("user"))  # a user the container lacks: ValueError, the op's error
        if self.session is not None and self.session.user != user:  # another user's shell: a new one
            self.session.close()
            self.session = None
        if self.session is None or not self.session.alive():
            self.session = Session(req.get("shell", SHELL), user)
            self.groups.add(self.session.proc.pid)
        start = time.monotonic()
        capture = Capture(int(req.get("cap", 65536)), int(req.get("flood", 8 << 20)))
        outcome, code, cwd = self.session.run(req["cmd"], float(req.get("timeout", 10)), capture)
        if outcome != "exit":  # timed out, flooded or the shell exited: its state is gone
            self.session.close()
            self.session = None
        return {"exit": code, "output": capture.text(), "omitted": capture.omitted, "timed_out": outcome == "timeout",
                "flooded": outcome == "flood", "elapsed": time.monotonic() - start, "cwd": cwd, "restarted": restarted}

    def op_reset(self, req: protocol.ResetRequest) -> protocol.ResetReply:
        """Kill every process the episode left, then bring each restorable path back to pristine."""
        if self.session is not None:
            self.session.close()
            self.session = None
        self.close_repls()
        killed = kill_strays(self.keep, self.groups)
        self.groups.clear()
        restored, removed = self.files.restore()
        return {"killed": killed, "restored": restored, "removed": removed}

    def op_python(self, req: protocol.PythonRequest) -> protocol.PythonReply:
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
        results: list[protocol.CodeResult] = []
        fresh = bool(req.get("fresh"))
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

    def op_put(self, req: protocol.PutRequest) -> protocol.PutReply:
        return {"files": unpack(req["dest"], req["tar"])}

    def forget_repl(self, name: str, lost: bool) -> None:
        self.repls.pop(name).close()
        if lost:
            self.repls_lost.add(name)

    def close_repls(self) -> None:
        for name in list(self.repls):
            self.forget_repl(name, lost=False)
        self.repls_lost.clear()


def serve() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    driver = Driver()
    hello: protocol.HelloReply = {protocol.ID: 0, protocol.OK: True, protocol.PID: os.getpid(),
                                  protocol.VERSION_KEY: protocol.VERSION, protocol.ROOTS: driver.files.roots}
    protocol.write(stdout, hello)
    while True:
        frame = protocol.read(stdin)
        if frame is None or frame.get(protocol.OP) == protocol.EXIT:
            break
        req = cast("protocol.Request", frame)  # what the host's client sent (foundation/driver_client.py)
        reply: protocol.Reply
        try:
            reply = driver.handle(req)
            reply.update({protocol.ID: req.get(protocol.ID), protocol.OK: True})
        except Exception as exc:  # reported to the caller, who decides; the driver stays up
            reply = {protocol.ID: req.get(protocol.ID), protocol.OK: False,
                     protocol.ERROR: "%s: %s" % (type(exc).__name__, exc)}
        protocol.write(stdout, reply)
