"""A process that seems stuck says where: SIGUSR1 to a command logs every task's chain of awaits
(down to the line it waits on) and every thread's stack (foundation/stacks.py)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import structlog

from orchestrator.cli import _run_cancellable


async def _inner(event: asyncio.Event) -> None:
    await event.wait()  # the line the dump must name


async def _outer(event: asyncio.Event) -> None:
    await _inner(event)


async def test_sigusr1_logs_where_each_task_waits() -> None:
    event = asyncio.Event()
    stuck = asyncio.create_task(_outer(event), name="stuck-one")

    async def handler(args: argparse.Namespace) -> int:
        await asyncio.sleep(0.05)
        with structlog.testing.capture_logs() as events:
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(100):
                if events:
                    break
                await asyncio.sleep(0.01)
        handler.events = events  # type: ignore[attr-defined]
        return 0

    assert await _run_cancellable(handler, argparse.Namespace()) == 0
    event.set()
    await stuck
    [dump] = [e for e in handler.events if e["event"] == "stacks"]  # type: ignore[attr-defined]
    text = dump["stacks"]
    chain = text.split("task stuck-one:\n", 1)[1].split("\ntask ", 1)[0].splitlines()
    assert "in _outer" in chain[0] and "in _inner" in chain[1], chain
    assert "asyncio/locks.py" in chain[2] and chain[3] == "  awaits a future (a task, a lock, a sleep, an I/O wait)", chain  # Event.wait's
    assert "thread MainThread:" in text
    # the handler is gone with the command: the default action again
    assert signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, None)
