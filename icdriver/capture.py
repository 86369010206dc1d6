"""Capturing what an action prints: bytes from a pipe, or text from a code's sys.stdout, capped."""

from __future__ import annotations

import codecs
import io
import os
import select
import subprocess
import time
from typing import Literal

Outcome = Literal["exit", "timeout", "flood"]  # how reading an action's output ended


class Capture:
    """Collects a process's output up to `cap` bytes and counts what it had to leave out."""

    def __init__(self, cap: int, flood: int) -> None:
        self.cap, self.flood = cap, flood
        self.buf = bytearray()
        self.omitted = 0

    def add(self, chunk: bytes) -> None:
        room = max(self.cap - len(self.buf), 0)
        self.buf += chunk[:room]
        self.omitted += max(len(chunk) - room, 0)

    @property
    def flooded(self) -> bool:
        return self.omitted > self.flood

    def valid_utf8(self) -> bool:
        """Whether the output decodes strictly (a character cut by the cap doesn't count)."""
        try:
            codecs.getincrementaldecoder("utf-8")().decode(bytes(self.buf), final=not self.omitted)
            return True
        except UnicodeDecodeError:
            return False

    def text(self) -> str:
        out = self.buf.decode("utf-8", errors="replace")
        if self.omitted:
            out += "\n[output truncated: %d bytes omitted]" % self.omitted
        return out


def pump(fd: int, proc: subprocess.Popen[bytes] | None, deadline: float, capture: Capture,
         stop_at: bytes | None = None, linger: float = 0.0) -> Outcome:
    """Read fd into capture until the process exits (then drain), the deadline, or a flood.

    Returns "exit", "timeout" or "flood". Background children that keep the pipe open do not
    hold the call: once the main process has exited, only what is already buffered is read, or,
    with `linger`, what comes until the pipe closes or `linger` seconds after the exit, whichever
    is first (as docker's exec answered). The deadline holds throughout.
    stop_at, if given, is a bytes marker that ends reading as soon as it is seen.
    """
    pidfd = os.pidfd_open(proc.pid) if proc is not None else None
    until: float | None = None  # when lingering: the end of the wait for the pipe to close
    try:
        while True:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                return "timeout"
            if until is not None:
                if now >= until:
                    drain(fd, capture)
                    return "exit"
                remaining = min(remaining, until - now)
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
                if linger <= 0:
                    drain(fd, capture)
                    return "exit"
                os.close(pidfd)
                pidfd, until = None, time.monotonic() + linger
    finally:
        if pidfd is not None:
            os.close(pidfd)


def drain(fd: int, capture: Capture) -> None:
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        capture.add(chunk)


class CappedText(io.StringIO):
    """sys.stdout/sys.stderr during one code: keeps the first `cap` characters, counts the rest."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.room, self.omitted = cap, 0

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        kept = text[:max(self.room, 0)]
        super().write(kept)
        self.room -= len(kept)
        self.omitted += len(text) - len(kept)
        return len(text)

    def text(self) -> str:
        kept = self.getvalue().strip()
        return kept + "\n[output truncated: %d characters omitted]" % self.omitted if self.omitted else kept
