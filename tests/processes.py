"""Commands a test runs as processes, ended when the test's time for them runs out.

Past its time a command is first asked where it waits (SIGUSR1: the command logs every task's chain
of awaits, foundation/stacks.py), then killed, and the test fails saying so, with the end of its
stderr and the stacks from its log. A stuck command never outlives its test: a sweep left alive
once held nine containers for an hour after its test had given up on it (a SIGKILLed one's
containers are reaped by the next pool's start).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

GRACE = 5.0  # seconds a stuck command has to log its stacks before it is killed


def ended(process: subprocess.Popen[str], timeout: float, *, log: Path | None = None) -> tuple[str, str]:
    """`process.communicate()` within `timeout` s: (stdout, stderr). Past it, AssertionError
    (the command asked for its stacks, then killed once they are in `log`, its JSON log file, or
    after GRACE s)."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)
        end = time.monotonic() + GRACE
        while time.monotonic() < end and process.poll() is None and not _stacks_in(log):
            time.sleep(0.05)
        process.kill()
        _, err = process.communicate()
        raise AssertionError(_stuck(process.args, timeout, err or "", log)) from None
    finally:
        if process.poll() is None:  # the test itself was interrupted
            process.kill()
            process.communicate()


async def ended_async(process: asyncio.subprocess.Process, timeout: float, *,
                      log: Path | None = None) -> tuple[bytes, bytes]:
    """The same for an asyncio subprocess."""
    reading = asyncio.ensure_future(process.communicate())
    try:
        done, _ = await asyncio.wait({reading}, timeout=timeout)
        if done:
            return reading.result()
        process.send_signal(signal.SIGUSR1)
        end = time.monotonic() + GRACE
        while time.monotonic() < end and not reading.done() and not _stacks_in(log):
            await asyncio.sleep(0.05)
        if process.returncode is None:
            process.kill()
        _, err = await reading
        raise AssertionError(_stuck("the command", timeout, (err or b"").decode(errors="replace"), log))
    finally:
        if process.returncode is None:  # the test itself was cancelled
            process.kill()
            await process.wait()
        reading.cancel()


def _stuck(what: object, timeout: float, err: str, log: Path | None) -> str:
    return (f"{what} did not finish within {timeout:g} s: asked for its stacks and killed\n"
            f"--- the end of its stderr ---\n{err[-3000:]}\n--- its stacks ---\n{_stacks(log)}")


def _stacks(log: Path | None) -> str:
    if log is None:
        return "(no log file given: see its stderr)"
    found = _stacks_in(log)
    return found[-1] if found else f"(none in {log}: the command did not answer SIGUSR1 within {GRACE:g} s)"


def _stacks_in(log: Path | None) -> list[str]:
    """The stacks the command logged (JSON lines with event "stacks")."""
    if log is None or not log.exists():
        return []
    return [event.get("stacks", "") for event in _events(log) if event.get("event") == "stacks"]


def _events(log: Path) -> list[dict]:
    events = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events
