"""What every task and thread of this process waits on: for a process that seems stuck.

`kill -USR1 PID` on a running command (`orchestrator/cli.py` installs `dump_on_signal`) writes one
`stacks` log line (the sweep's log file and the console): each asyncio task with the chain of
coroutines it is suspended in, down to what it awaits, and each thread's stack. A task's own
stack (`Task.get_stack`) shows only its outermost coroutine; the chain is what says where it waits.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import traceback
from types import CoroutineType, FrameType, GeneratorType
from typing import Any

import structlog

log = structlog.get_logger(__name__)
DEPTH = 64  # coroutines followed down one task's chain at most


def task_stacks() -> str:
    """Every task of the running loop, its chain of awaits; then every thread's stack."""
    parts = [_task_chain(task) for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name())]
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, frame in sys._current_frames().items():  # noqa: SLF001 — the documented way to read threads' frames
        stack = "".join(traceback.format_stack(frame))
        parts.append(f"thread {names.get(ident, ident)}:\n{stack}")
    return "\n".join(parts)


def _task_chain(task: asyncio.Task[Any]) -> str:
    lines = [f"task {task.get_name()}{' (cancelling)' if task.cancelling() else ''}:"]
    awaited: Any = task.get_coro()
    for _ in range(DEPTH):
        frame = _frame(awaited)
        if frame is None:
            lines.append(f"  awaits {_short(awaited)}")
            break
        lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None) \
            or getattr(awaited, "ag_await", None)
        if awaited is None:
            break
    return "\n".join(lines)


def _frame(awaitable: Any) -> FrameType | None:
    if isinstance(awaitable, CoroutineType):
        return awaitable.cr_frame
    if isinstance(awaitable, GeneratorType):
        return awaitable.gi_frame
    return getattr(awaitable, "ag_frame", None)


def _short(awaitable: Any) -> str:
    if type(awaitable).__name__ == "FutureIter":  # `await future`: C's iterator, which does not show its future
        return "a future (a task, a lock, a sleep, an I/O wait)"
    text = repr(awaitable)
    return text if len(text) <= 300 else text[:300] + "…"


def dump_on_signal(loop: asyncio.AbstractEventLoop, signum: int = signal.SIGUSR1) -> None:
    """Log `task_stacks()` each time the process gets `signum`."""
    loop.add_signal_handler(signum, lambda: log.warning("stacks", stacks=task_stacks(),
                                                        hint="what each task waits on, asked by a signal"))
