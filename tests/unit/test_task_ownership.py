"""Every task has an owner, and no cancellation is swallowed: the code is scanned for both.

Outside `async with asyncio.TaskGroup() as group:` blocks (whose `group.create_task` is owned by
the block), a task is started only in foundation/concurrency.py (TaskOwner, SharedWork). An
`except` that catches CancelledError re-raises it; `contextlib.suppress` never swallows it. The
one place a cancellation may end is marked on its line with `# cancellation ends here: <why>`
(the command line's top: Ctrl-C or SIGTERM ends the program there). The product's packages are
scanned; tests and benchmarks await each task in place.
"""

from __future__ import annotations

import ast
import asyncio
import textwrap
from pathlib import Path

import pytest

from foundation.concurrency import SharedWork, TaskOwner, stop
from foundation.settings import PROJECT_ROOT

PACKAGES = ("agents", "environments", "foundation", "orchestrator", "tasks", "icdriver")
HELPER = PROJECT_ROOT / "foundation" / "concurrency.py"
STARTERS = {"create_task", "ensure_future"}
MARK = "# cancellation ends here:"


def findings(source: str, name: str = "<code>") -> list[str]:
    """Where `source` starts a task outside a TaskGroup block, or swallows a cancellation."""
    tree = ast.parse(source)
    lines = source.splitlines()
    groups = {item.optional_vars.id for node in ast.walk(tree) if isinstance(node, ast.AsyncWith)
              for item in node.items if _is_task_group(item.context_expr) and isinstance(item.optional_vars, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) in STARTERS:
            owner = node.func.value.id if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) else None
            if owner not in groups:
                found.append(f"{name}:{node.lineno}: starts a task without an owner")
        elif isinstance(node, ast.Try):
            waits = any(isinstance(inner, ast.Await | ast.AsyncFor | ast.AsyncWith) for part in node.body
                        for inner in ast.walk(part))
            for handler in node.handlers:
                if _catches_cancel(handler.type, waits) and not _raises(handler) and MARK not in lines[handler.lineno - 1]:
                    found.append(f"{name}:{handler.lineno}: catches CancelledError and does not raise it")
        elif isinstance(node, ast.Call) and _called(node) == "suppress" and any(_catches_cancel(a) for a in node.args):
            if MARK not in lines[node.lineno - 1]:
                found.append(f"{name}:{node.lineno}: suppresses CancelledError")
    return sorted(found, key=lambda line: int(line.split(":")[-2]))


def _called(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(call.func, ast.Name) else ""


def _is_task_group(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and _called(expr) == "TaskGroup"


def _catches_cancel(expr: ast.expr | None, waits: bool = True) -> bool:
    """Whether an `except` of `expr` catches a cancellation: CancelledError by name, or
    BaseException around code that awaits (only an await can raise a cancellation)."""
    if expr is None:
        return waits  # a bare `except:` is BaseException's
    if isinstance(expr, ast.Tuple):
        return any(_catches_cancel(e, waits) for e in expr.elts)
    name = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
    return name == "CancelledError" or (name == "BaseException" and waits)


def _raises(handler: ast.ExceptHandler) -> bool:
    return any(isinstance(node, ast.Raise) for node in ast.walk(handler))


def test_every_task_has_an_owner_and_no_cancellation_is_swallowed():
    problems = []
    for package in PACKAGES:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            if path != HELPER:
                problems += findings(path.read_text(), str(path.relative_to(PROJECT_ROOT)))
    assert problems == [], "\n".join(problems)


def test_the_scan_finds_each_kind_of_mistake():
    bad = textwrap.dedent("""
        import asyncio, contextlib
        async def f(coro):
            task = asyncio.create_task(coro)
            other = asyncio.ensure_future(coro)
            try:
                await task
            except asyncio.CancelledError:
                pass
            with contextlib.suppress(asyncio.CancelledError):
                await other
            async with asyncio.TaskGroup() as group:
                group.create_task(coro)          # owned by the block: fine
            try:
                await task
            except (ValueError, asyncio.CancelledError):
                raise                            # re-raised: fine
            try:
                await task
            except BaseException:
                pass
            try:
                task.result()
            except BaseException:                # no await here: no cancellation to swallow
                pass
    """)
    assert [line.split(": ", 1)[1] for line in findings(bad)] == [
        "starts a task without an owner", "starts a task without an owner",
        "catches CancelledError and does not raise it", "suppresses CancelledError",
        "catches CancelledError and does not raise it"]


async def test_a_cancelled_caller_of_shared_work_stops_only_its_own_wait():
    shared: SharedWork[str, int] = SharedWork("test")
    release = asyncio.Event()
    runs = 0

    async def compute() -> int:
        nonlocal runs
        runs += 1
        await release.wait()
        return 42

    first = asyncio.ensure_future(shared.get("k", compute))  # noqa: owned by this test, awaited below
    second = asyncio.ensure_future(shared.get("k", compute))
    await asyncio.sleep(0)
    first.cancel()  # the caller that started the work gives up
    await asyncio.sleep(0)
    release.set()
    assert await second == 42 and runs == 1 and first.cancelled()
    await shared.aclose()


async def test_shared_work_that_fails_fails_every_waiter_and_a_stop_does_not_swallow_our_cancel():
    shared: SharedWork[str, int] = SharedWork("test")

    async def broken() -> int:
        await asyncio.sleep(0.01)
        raise ValueError("the gold's container died")

    results = await asyncio.gather(shared.get("k", broken), shared.get("k", broken), return_exceptions=True)
    assert [type(r) for r in results] == [ValueError, ValueError]
    async with TaskOwner("test") as owner:
        sleeper = owner.start(asyncio.sleep(30), name="sleeper")
        stopper = owner.start(stop(sleeper), name="stopper")
        await asyncio.sleep(0)
        stopper.cancel()  # a cancellation of the one who stops goes through
        with pytest.raises(asyncio.CancelledError):
            await stopper
