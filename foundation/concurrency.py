"""Owned tasks: nothing is fire-and-forget, and no cancellation reaches a task it was not meant for.

Outside `asyncio.TaskGroup` blocks (structured: the block awaits its children), this module is the
one place the project starts a task (tests/unit/test_task_ownership.py holds every other module to it):

- `TaskOwner`: `start()` a task and get it back to await; `spawn()` background work whose failure
  is logged, never raised; `aclose()` (or leaving `async with`) cancels what is left and waits for
  it, so no task outlives the object that started it.
- `SharedWork`: work computed once for many callers (a gold result, a service's start). It runs in
  a task the SharedWork owns, not in the first caller's: a caller that is cancelled (its episode's
  deadline passed) stops waiting, and only it; the work goes on for the others, and when the work
  fails, every waiter gets that failure.
- `stop(task)`: cancel a task and wait until it has ended, without swallowing a cancellation of
  the caller itself.
- `all_of(awaitables)`: their results in order, as `asyncio.gather` gives them, but in a TaskGroup:
  the first failure cancels the rest and is raised as itself.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable
from typing import Any, Generic, TypeVar

import structlog

log = structlog.get_logger(__name__)
T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class TaskOwner:
    """Owns the tasks it starts; they end, at the latest, when it closes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def __aenter__(self) -> TaskOwner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def start(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """A task for `coro`; its result or failure is its awaiter's. A failure nobody retrieved
        is logged when the task ends."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self.name} is closed")
        task = asyncio.create_task(coro, name=f"{self.name}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Background work: its failure is logged with its name and never raised."""
        return self.start(self._guard(coro, name), name=name)

    async def _guard(self, coro: Coroutine[Any, Any, Any], name: str) -> Any:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # logged with context; the owner decides through its own state
            log.error("background_task_failed", owner=self.name, task=name, error=repr(exc))
            return None

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            # Its awaiters have it; read here, it also reaches the log when nobody awaited it.
            log.debug("task_failed", owner=self.name, task=task.get_name(), error=repr(error))

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait until every task started so far (and any they start) has finished."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self) -> None:
        """Cancel every task left and wait for them all."""
        self._closed = True
        while self._tasks:
            tasks = set(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)


class SharedWork(Generic[K, T]):
    """Work computed once for many callers, each keyed; see the module's docstring."""

    def __init__(self, name: str) -> None:
        self._owner = TaskOwner(name)
        self._running: dict[K, asyncio.Task[T]] = {}

    def running(self, key: K) -> bool:
        return key in self._running

    async def get(self, key: K, compute: Callable[[], Awaitable[T]]) -> T:
        """The result of `compute()` for `key`: started by the first caller, in a task of ours,
        and awaited by every caller until it ends; a caller's cancellation ends only its wait."""
        task = self._running.get(key)
        if task is None:
            task = self._owner.start(_run(compute), name=str(key))
            self._running[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        return await asyncio.shield(task)

    def _forget(self, key: K, task: asyncio.Task[T]) -> None:
        if self._running.get(key) is task:
            del self._running[key]

    async def aclose(self) -> None:
        await self._owner.aclose()


async def _run(compute: Callable[[], Awaitable[T]]) -> T:
    return await compute()


async def stop(task: asyncio.Future[Any] | None) -> None:
    """Cancel `task` and wait until it has ended (its error, if any, is dropped: it was stopped).
    A cancellation of the caller while it waits goes through, as it should."""
    if task is None:
        return
    if not task.done():
        task.cancel()
        await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # read: it was stopped, its error is nobody's


async def in_context(context: contextvars.Context, call: Coroutine[Any, Any, T]) -> T:
    """`call` run in `context` (the ContextVars of another task: an episode's, for a call that
    arrived in a server's task), awaited here: a cancellation of the caller reaches it."""
    return await asyncio.create_task(call, context=context)


async def all_of(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Each awaitable's result, in order; the first to fail cancels the others (their ends are
    awaited) and is raised as itself, not in an ExceptionGroup, so callers catch it by its type."""
    async def run(awaitable: Awaitable[T]) -> T:
        return await awaitable

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(run(awaitable)) for awaitable in awaitables]
    except BaseExceptionGroup as failed:
        raise _first_leaf(failed) from None
    return [task.result() for task in tasks]


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
