"""The driver's main loop: one request frame in, one reply frame out, until stdin ends."""

import os
import subprocess
import sys
import time

from icdriver import protocol
from icdriver.capture import Capture, drain, pump
from icdriver.files import unpack
from icdriver.process import kill_group, kill_strays, list_procs
from icdriver.repl import Repl, repl_failure
from icdriver.restore import Restorer
from icdriver.session import SHELL, Session


class Driver:
    def __init__(self):
        self.session = None
        self.groups = set()  # process groups this driver started: every action runs in its own
        self.repls = {}  # name -> Repl: the persistent interpreters of op "python"
        self.repls_lost = set()  # names whose interpreter was killed or died: the next call says so
        self.keep = {proc for proc in list_procs() if proc[0] != os.getpid()}
        self.files = Restorer()

    def op_exec(self, req):
        argv, cwd = req["argv"], req.get("cwd") or "/"
        timeout, capture = float(req.get("timeout", 10)), Capture(int(req.get("cap", 65536)), int(req.get("flood", 8 << 20)))
        env, linger = dict(os.environ, **req.get("env", {})), float(req.get("linger", 0))
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            self.groups.add(proc.pid)
        except OSError as exc:
            return {"exit": 127 if isinstance(exc, FileNotFoundError) else 126, "output": "%s: %s\n" % (argv[0], exc.strerror),
                    "omitted": 0, "timed_out": False, "flooded": False, "elapsed": 0.0, "spawned": False}
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

    def op_session(self, req):
        restarted = self.session is not None and not self.session.alive()
        if self.session is None or not self.session.alive():
            self.session = Session(req.get("shell", SHELL))
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
        restored, removed = self.files.restore()
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

    def op_put(self, req):
        return {"files": unpack(req["dest"], req["tar"])}

    def forget_repl(self, name, lost):
        self.repls.pop(name).close()
        if lost:
            self.repls_lost.add(name)

    def close_repls(self):
        for name in list(self.repls):
            self.forget_repl(name, lost=False)
        self.repls_lost.clear()


def serve():
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    driver = Driver()
    roots = driver.files.roots
    protocol.write(stdout, {protocol.ID: 0, protocol.OK: True, protocol.PID: os.getpid(),
                            protocol.VERSION_KEY: protocol.VERSION, protocol.ROOTS: roots})
    ops = {protocol.HELLO: lambda req: {protocol.PID: os.getpid(), protocol.VERSION_KEY: protocol.VERSION},
           protocol.EXEC: driver.op_exec, protocol.SESSION: driver.op_session, protocol.RESET: driver.op_reset,
           protocol.PYTHON: driver.op_python, protocol.PUT: driver.op_put}
    while True:
        req = protocol.read(stdin)
        if req is None or req.get(protocol.OP) == protocol.EXIT:
            break
        try:
            result = ops[req[protocol.OP]](req)
            result.update({protocol.ID: req.get(protocol.ID), protocol.OK: True})
        except Exception as exc:  # reported to the caller, who decides; the driver stays up
            result = {protocol.ID: req.get(protocol.ID), protocol.OK: False,
                      protocol.ERROR: "%s: %s" % (type(exc).__name__, exc)}
        protocol.write(stdout, result)
