"""Owned background tasks: nothing is fire-and-forget.

`BackgroundTasks` is the owner of the pool's resets, warm-ups and health checks. A task's failure
is logged with its name and never tears the owner down; `aclose()` cancels what is left and waits
for it, so no task outlives the object that started it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class BackgroundTasks:
    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self.name} is closed")
        task = asyncio.create_task(self._guard(coro, name), name=f"{self.name}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _guard(self, coro: Coroutine[Any, Any, Any], name: str) -> Any:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # logged with context; the owner decides through its own state
            log.error("background_task_failed", owner=self.name, task=name, error=repr(exc))
            return None

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait until every task spawned so far (and any they spawn) has finished."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
