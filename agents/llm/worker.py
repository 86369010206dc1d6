"""`python -m agents.llm.worker`: litellm calls for a parent process, over its stdin and stdout.

Frames (see `transport.frame`) arrive as `(id, "call", Request)` or `(id, "cancel", None)`;
replies go back as `(id, "ok", Reply)` or `(id, "error", fields of the ModelError)`. The first
frame out is `(-1, "ready", None)`, once litellm is imported. Calls run concurrently. The worker
exits when its input ends, which is also what happens when the parent dies, however it dies.
Anything printed goes to stderr: stdout carries frames only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import gc
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from foundation.concurrency import TaskOwner

from .errors import ModelError

# Providers whose litellm `completion()` only builds a coroutine when called for acompletion: it
# does no I/O of its own, so it may run on the event loop instead of in a thread (see _Inline).
NATIVE_ASYNC = frozenset({"openai"})
_INLINE: contextvars.ContextVar[bool] = contextvars.ContextVar("inline", default=False)


class _Inline(concurrent.futures.ThreadPoolExecutor):
    """The worker loop's default executor: runs a call at once, on the loop, when its task says so.

    `litellm.acompletion` hands the synchronous `completion()` to the loop's default executor.
    For an openai/* model that function returns the request's coroutine without any I/O, and a
    thread round trip (submit, GIL hand-offs, call_soon_threadsafe) cost more CPU than the work: a
    third of litellm's time per call here. Calls of other providers, which may block (credential
    refreshes, sync-only providers), and everything else still go to threads.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        if not _INLINE.get():
            return super().submit(fn, *args, **kwargs)
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 — delivered to the awaiting call, as a thread would
            future.set_exception(exc)
        return future


async def serve(protocol_out: int) -> None:
    from ._litellm import litellm  # noqa: F401 — imported before "ready": the first calls must not wait on it
    from .transport import (
        InProcessTransport,
        error_fields,
        frame,
        read_frame,
    )

    loop = asyncio.get_running_loop()
    loop.set_default_executor(_Inline())
    reader = asyncio.StreamReader(limit=2**26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport_, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(protocol_out, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport_, protocol, None, loop)
    litellm_side = InProcessTransport()
    running: dict[int, asyncio.Task[None]] = {}
    calls = TaskOwner("llm-worker")

    async def answer(call_id: int, request: Any) -> None:
        _INLINE.set(request.model.split("/", 1)[0] in NATIVE_ASYNC)  # this task's context only
        try:
            reply: tuple[int, str, Any] = (call_id, "ok", await litellm_side.call(request))
        except ModelError as error:
            reply = (call_id, "error", error_fields(error))
        except Exception as exc:  # noqa: BLE001 — anything else still answers the call
            reply = (call_id, "error", {"reason": f"{type(exc).__name__}: {exc}", "kind": "unknown", "status": None,
                                        "retry_after": None})
        finally:
            running.pop(call_id, None)
        writer.write(frame(reply))

    # What the imports made is frozen out of collections, and the young generation collected less
    # often: a worker with hundreds of calls in flight otherwise spends a tenth of its time there.
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 20)
    writer.write(frame((-1, "ready", None)))
    while (message := await read_frame(reader)) is not None:
        call_id, kind, request = message
        if kind == "call":
            running[call_id] = calls.start(answer(call_id, request), name=f"call {call_id}")
        elif kind == "cancel" and (task := running.pop(call_id, None)) is not None:
            task.cancel()
    # The parent is gone or done: calls in flight have no one to answer to.
    await calls.aclose()


def main() -> None:
    from foundation.logs import configure

    configure(0)  # warnings and errors only, as lines the parent logs as llm_worker_stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes our input
    protocol_out = os.dup(1)
    os.dup2(2, 1)  # a stray print cannot corrupt the frames
    asyncio.run(serve(protocol_out))
    os._exit(0)  # skip the interpreter's teardown of litellm's modules and threads: a second or more


if __name__ == "__main__":
    main()
