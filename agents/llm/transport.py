"""Where litellm runs: in this process, or in worker processes that keep its CPU off the event loop.

A chat completion through litellm and the openai SDK costs a few milliseconds of CPU (request
building, response models, cost and logging hooks). At a few hundred calls per second that alone
fills a core, and in the sweep's process it competes with the event loop that drives every
container. `WorkerTransport` runs litellm in `python -m agents.llm.worker` processes instead; the
sweep process keeps admission (slots, rpm, tpm), retries, budget and accounting, and sends each
request over a pipe. `InProcessTransport` is the same call made here.

Both return a `Reply` or raise a `ModelError`; classification happens where litellm's exception
is, and the client redacts every known key from the reason again on arrival, and from every text
of a `Reply` (`Reply.redacted`). A reply keeps no headers: only Retry-After is read, as a number.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import pickle
import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast

import structlog

from foundation.concurrency import TaskOwner, all_of
from icdriver.protocol import HEADER, framed

from .errors import ModelError, classify, redact
from .usage import price

log = structlog.get_logger(__name__)

# `litellm.acompletion` builds the provider's request coroutine (its HTTP handler's
# `async_completion`, or the openai SDK path's `acompletion`) in an executor, then awaits it. A call
# cancelled in between (Ctrl-C, a full disk, an episode's time limit) drops a coroutine that never
# started and holds nothing; Python's warning about it would only alarm the user.
warnings.filterwarnings("ignore", message=r"coroutine '\w+\.a(?:sync_)?completion' was never awaited",
                        category=RuntimeWarning)

# What litellm prints (to stdout, which a worker sends to stderr) around an error it maps: pointers
# to its issue tracker and debug switch, not part of the error. The error itself reaches the caller.
LITELLM_BANNER = re.compile(r"Give Feedback / Get Help: |LiteLLM\.Info: If you need to debug|Provider List: https://docs\.litellm")


@dataclass(frozen=True)
class Request:
    """One attempt at one chat completion: everything litellm needs, and nothing it returns."""

    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never in a log line or traceback
    timeout: float = 120.0


@dataclass(frozen=True)
class ToolCall:
    """One function call of a model's answer, as the provider sent it (OpenAI's shape, to which
    litellm converts the others): `arguments` is the raw JSON text, which may not be JSON at all."""

    id: str
    name: str
    arguments: str

    def redacted(self, secrets: Sequence[str]) -> ToolCall:
        """This call with `secrets` out of its id, name and arguments (see `Reply.redacted`)."""
        return ToolCall(id=redact(self.id, secrets), name=redact(self.name, secrets),
                        arguments=redact(self.arguments, secrets))


@dataclass(frozen=True)
class Reply:
    """What the client keeps of a response (plain data: a worker pickles it to the client)."""

    text: str
    finish_reason: str | None
    served_model: str | None
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float | None  # None: litellm's price map does not know the model
    tool_calls: tuple[ToolCall, ...] = ()
    # What else the provider sent with the answer (the response's id, the message's reasoning or
    # refusal, ...), as JSON text; "" when nothing. The transcript keeps it beside the answer.
    raw: str = ""

    def redacted(self, secrets: Sequence[str]) -> Reply:
        """This reply with `secrets` (and anything shaped like a key) out of every text the provider
        sent: a provider may echo the key it was sent into any of them."""
        return replace(self, text=redact(self.text, secrets),
                       finish_reason=None if self.finish_reason is None else redact(self.finish_reason, secrets),
                       served_model=None if self.served_model is None else redact(self.served_model, secrets),
                       tool_calls=tuple(call.redacted(secrets) for call in self.tool_calls),
                       raw=redact(self.raw, secrets) if self.raw else "")


class Transport(Protocol):
    async def start(self) -> None: ...

    async def call(self, request: Request) -> Reply: ...

    async def aclose(self) -> None: ...


class InProcessTransport:
    """litellm in this process."""

    async def start(self) -> None:
        pass

    async def call(self, request: Request) -> Reply:
        import openai  # here, not at the top: a sweep of offline models never loads litellm

        from ._litellm import litellm

        try:
            response = await litellm.acompletion(
                model=request.model, messages=request.messages, api_base=request.api_base, api_key=request.api_key,
                timeout=request.timeout, max_retries=0, num_retries=0, **request.params)  # the client owns retries
        except openai.OpenAIError as exc:  # every litellm error derives from openai's
            raise classify(exc, request.model, [request.api_key or ""]) from None  # no chain: it holds the provider's text
        if not getattr(response, "choices", None):
            raise ModelError(request.model, "malformed response: no choices", kind="malformed")
        return reply_of(request.model, response)

    async def aclose(self) -> None:
        pass


def reply_of(model: str, response: Any) -> Reply:
    counts = getattr(response, "usage", None)
    prompt = int(getattr(counts, "prompt_tokens", 0) or 0)
    completion = int(getattr(counts, "completion_tokens", 0) or 0)
    total = int(getattr(counts, "total_tokens", 0) or 0) or prompt + completion
    choice = response.choices[0]
    # litellm has priced the response already (None when its map does not know the model).
    cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
    return Reply(text=choice.message.content or "", finish_reason=choice.finish_reason,
                 served_model=getattr(response, "model", None), prompt_tokens=prompt, completion_tokens=completion,
                 total_tokens=total, tool_calls=tool_calls_of(choice.message),
                 cost_usd=float(cost) if isinstance(cost, (int, float)) else price(model, prompt, completion),
                 raw=raw_of(response, choice.message))


# The message's fields the dialogue carries already (its text and calls), or that are always empty here.
CARRIED = frozenset({"role", "content", "tool_calls", "function_call"})


def raw_of(response: Any, message: Any) -> str:
    """What the provider sent beside the answer's text and calls, as JSON text ("" when nothing):
    the response's id and any other field of the message it filled (reasoning, refusal, citations)."""
    fields: dict[str, Any] = {}
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        fields = {k: v for k, v in ((k, _filled(v)) for k, v in dump().items() if k not in CARRIED)
                  if v not in (None, "", [], {})}
    if getattr(response, "id", None):
        fields["id"] = str(response.id)
    return json.dumps(fields, default=str) if fields else ""


def _filled(value: Any) -> Any:
    """`value` without the empty fields of the mappings in it (litellm's SDK path sends
    `provider_specific_fields: {"refusal": null}` where its own handler sends nothing: the same)."""
    if isinstance(value, dict):
        return {k: v for k, v in ((k, _filled(v)) for k, v in value.items()) if v not in (None, "", [], {})}
    return value


def tool_calls_of(message: Any) -> tuple[ToolCall, ...]:
    """The function calls of a response message, as plain data (none when it made none)."""
    calls = getattr(message, "tool_calls", None) or []
    return tuple(ToolCall(id=str(call.id or ""), name=str(call.function.name or ""),
                          arguments=call.function.arguments or "")
                 for call in calls if getattr(call, "function", None) is not None)


# --- the pipe protocol: a 4-byte length, then a pickle; both ends are this module -------------------

def frame(message: Any) -> bytes:
    return framed(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next message, or None at the end of the stream."""
    try:
        (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
        return pickle.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        return None


def error_fields(error: ModelError) -> dict[str, Any]:
    return {"reason": error.reason, "kind": error.kind, "status": error.status, "retry_after": error.retry_after}


class _Worker:
    """One worker process and the calls it has in flight."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.process: asyncio.subprocess.Process | None = None
        self.ready: asyncio.Future[None] | None = None
        self._readers: TaskOwner | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agents.llm.worker", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"})
        self.ready = asyncio.get_running_loop().create_future()
        self._readers = TaskOwner(f"llm-worker-{self.index}")
        self._readers.start(self._read_replies(self.process), name="replies")
        self._readers.start(self._read_stderr(self.process), name="stderr")

    async def _read_replies(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while (message := await read_frame(process.stdout)) is not None:
            call_id, status, body = message
            if status == "ready":
                if self.ready is not None and not self.ready.done():
                    self.ready.set_result(None)
                continue
            future = self.pending.pop(call_id, None)
            if future is not None and not future.done():
                future.set_result((status, body))
        code = await process.wait()
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(None)  # the calls waiting for it find it dead, below
        lost = ("lost", f"the LLM worker process exited (code {code}) with the call in flight")
        for future in self.pending.values():
            if not future.done():
                future.set_result(lost)
        self.pending.clear()

    async def _read_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            text = line.decode(errors="replace").rstrip()
            if text and not LITELLM_BANNER.search(text):
                log.warning("llm_worker_stderr", worker=self.index, line=redact(text)[:500])

    async def close(self) -> None:
        process = self.process
        if process is None:
            return
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()  # the worker exits at the end of its input
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self._readers is not None:
            await self._readers.aclose()


class WorkerTransport:
    """litellm in `workers` child processes; each call goes to the one with the fewest in flight.

    Until a worker is up (importing litellm takes a few seconds) calls wait for it: this process
    never imports litellm, so its event loop never stalls on that import and litellm's prints (its
    "Give Feedback" and "Provider List" banners go to stdout) never reach the user's terminal. A
    worker that dies fails its calls in flight as retryable connection errors and is started again
    in the background; new calls wait for a worker that serves. Closing the transport, or this
    process dying, ends the workers: they exit when their input pipe closes.
    """

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError("WorkerTransport needs at least one worker")
        self._workers = [_Worker(i) for i in range(workers)]
        self._ids = itertools.count()
        self._starting: dict[int, asyncio.Task[None]] = {}
        self._spawner = TaskOwner("llm-workers")
        self._closed = False

    async def start(self) -> None:
        """Start every worker and wait until each has litellm imported (a few seconds)."""
        for worker in self._workers:
            self._respawn(worker)
        await all_of(self._starting.values())
        await all_of(w.ready for w in self._workers if w.ready is not None)
        if dead := [w for w in self._workers if not w.alive]:
            code = dead[0].process.returncode if dead[0].process is not None else None
            raise ModelError("llm-worker", f"the LLM worker process exited at start (code {code}); "
                             "its last words are in the sweep log", kind="connection")

    def _started(self, index: int, _: asyncio.Task[None]) -> None:
        self._starting.pop(index, None)

    def _respawn(self, worker: _Worker) -> None:
        """Start `worker` in the background unless it runs or is being started."""
        if self._closed or worker.alive or worker.index in self._starting:
            return
        if worker.process is not None:
            log.warning("llm_worker_restart", worker=worker.index, code=worker.process.returncode)
        task = self._spawner.start(self._spawn(worker), name=f"start worker {worker.index}")
        self._starting[worker.index] = task
        task.add_done_callback(functools.partial(self._started, worker.index))

    @staticmethod
    async def _spawn(worker: _Worker) -> None:
        await worker.close()
        await worker.start()

    def _serving(self) -> list[_Worker]:
        """Workers up and answering; the others are (re)started in the background."""
        serving = []
        for worker in self._workers:
            if worker.alive and worker.ready is not None and worker.ready.done():
                serving.append(worker)
            else:
                self._respawn(worker)
        return serving

    async def _wait_serving(self, model: str) -> list[_Worker]:
        """Workers that serve, once one is up; a ModelError (retryable) if none comes up at all."""
        for _ in range(2 * len(self._workers) + 1):  # a worker that dies at start is started again, boundedly
            waiting = [*self._starting.values(), *(w.ready for w in self._workers if w.ready and not w.ready.done())]
            if waiting:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if serving := self._serving():
                return serving
        raise ModelError(model, "no LLM worker process came up; its last words are in the sweep log", kind="connection")

    async def call(self, request: Request) -> Reply:
        if self._closed:
            raise ModelError(request.model, "the LLM transport is closed", kind="unknown")
        serving = self._serving() or await self._wait_serving(request.model)
        worker = min(serving, key=lambda w: len(w.pending))
        assert worker.process is not None and worker.process.stdin is not None
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        worker.pending[call_id] = future
        stdin = worker.process.stdin
        try:
            stdin.write(frame((call_id, "call", request)))
            await stdin.drain()
            status, body = await future
        except (BrokenPipeError, ConnectionResetError):
            worker.pending.pop(call_id, None)
            raise ModelError(request.model, "the LLM worker process is gone", kind="connection") from None
        except asyncio.CancelledError:
            worker.pending.pop(call_id, None)
            if worker.alive and not stdin.is_closing():
                stdin.write(frame((call_id, "cancel", None)))
            raise
        if status == "ok":
            return cast(Reply, body)
        if status == "lost":
            raise ModelError(request.model, body, kind="connection")
        return _raise(request.model, body)

    async def aclose(self) -> None:
        self._closed = True
        await self._spawner.aclose()
        await asyncio.gather(*(worker.close() for worker in self._workers))


def _raise(model: str, fields: dict[str, Any]) -> Reply:
    raise ModelError(model, fields["reason"], kind=fields["kind"], status=fields["status"],
                     retry_after=fields["retry_after"])


def transport(workers: int) -> Transport:
    """`workers` processes running litellm, or litellm in this process when 0."""
    return WorkerTransport(workers) if workers > 0 else InProcessTransport()


__all__ = ["InProcessTransport", "Reply", "Request", "ToolCall", "Transport", "WorkerTransport", "frame",
           "read_frame", "reply_of", "tool_calls_of", "transport"]
