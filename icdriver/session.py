"""Op `session`: one persistent bash whose state lives across actions."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from typing import Literal, Optional

from icdriver.capture import Capture, Outcome, pump
from icdriver.process import kill_group
from icdriver.users import User, environment, popen_args


# The image's bash, or the driver's own where the image has none (icdriver/prepare.py links it).
SHELL = "/usr/lib/intercode/bash" if os.path.exists("/usr/lib/intercode/bash") else "/bin/bash"


class Session:
    """One persistent bash whose state (cwd, variables, functions) lives across actions."""

    def __init__(self, shell: str = SHELL, user: Optional[User] = None) -> None:
        self.user = user  # who it runs as (None: the driver's root)
        self.proc = subprocess.Popen([shell, "--noprofile", "--norc"], cwd="/", stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=environment(user, dict(os.environ)), **popen_args(user))  # type: ignore[call-overload]
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both piped, above
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, cmd: str, timeout: float, capture: Capture) -> tuple[Outcome | Literal["died"], int, str | None]:
        """Run cmd; return (outcome, exit code, cwd). The heredoc keeps cmd intact and
        </dev/null keeps our pipe ours; a marker line after it carries $? and $PWD."""
        marker = "__IC_%s__" % uuid.uuid4().hex
        script = ("eval \"$(cat <<'%s'\n%s\n%s\n)\" </dev/null\nprintf '\\n%s %%d %%s\\n' $? \"$PWD\"\n"
                  % (marker, cmd, marker, marker))
        self.stdin.write(script.encode("utf-8"))
        self.stdin.flush()
        tag = ("\n%s " % marker).encode()
        deadline = time.monotonic() + timeout
        outcome = pump(self.stdout.fileno(), None, deadline, capture, stop_at=tag)
        at = capture.buf.rfind(tag)
        while outcome == "exit" and at >= 0 and not capture.buf.endswith(b"\n"):
            outcome = pump(self.stdout.fileno(), None, deadline, capture, stop_at=b"\n")
        if outcome != "exit" or at < 0:
            return outcome if outcome != "exit" else "died", -1, None
        code, _, cwd = capture.buf[at + len(tag):].decode("utf-8", "replace").strip().partition(" ")
        del capture.buf[at:]
        return "exit", int(code), cwd

    def close(self) -> None:
        if self.alive():
            kill_group(self.proc.pid, self.proc, grace=0)
        self.proc.wait()
        self.stdin.close()
        self.stdout.close()
