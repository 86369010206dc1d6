"""LLMClient: the one way agents call a model, over `litellm.acompletion`.

Per call: admission through the model's gate (slots, rpm, tpm), one request with litellm's own
retries off, failures classified into ModelError at the boundary, and the retry loop of
`retry.py` around it all. The request itself goes through a transport: litellm in this process,
or in worker processes (`transport.py`). Usage is recorded per successful call; API keys stay out of logs,
records and exception messages. What a provider returns enters the project here, and only here,
redacted of every key the client knows (`_attempt`): a provider that echoes the key it was sent
cannot put it into an agent's action, a record, a report or a page.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog
import tenacity
from pydantic import BaseModel, Field, SecretStr

from .budget import Budget
from .errors import ModelError, redact
from .limits import ModelGate, ModelLimits, ModelStats
from .retry import RetryPolicy, retrying
from .transport import InProcessTransport, Reply, Request, ToolCall, Transport
from .usage import Usage, UsageLedger

log = structlog.get_logger(__name__)
ChatMessage = dict[str, Any]


class ModelSpec(BaseModel):
    """How to reach one model and how hard it may be used."""

    name: str = Field(description="litellm model name, e.g. 'openai/gpt-4o-mini'")
    api_base: str | None = None
    api_key: SecretStr | None = None
    limits: ModelLimits = Field(default_factory=ModelLimits)
    timeout: float = Field(120.0, gt=0, description="seconds for one request")


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str | None
    usage: Usage
    tool_calls: tuple[ToolCall, ...] = ()  # the functions the model called, when it was offered tools
    raw: str = ""  # what else the provider sent with the answer, as JSON text (transport.Reply.raw)


class LLMClient:
    """Calls models by name; models not registered get default limits and litellm's own routing."""

    def __init__(self, models: Sequence[ModelSpec] = (), *, retry: RetryPolicy | None = None,
                 budget: Budget | None = None, transport: Transport | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.budget = budget
        self.transport = transport or InProcessTransport()
        self.usage = UsageLedger()
        self._specs = {spec.name: spec for spec in models}
        self._keys = tuple(s.api_key.get_secret_value() for s in self._specs.values() if s.api_key)
        self._gates: dict[str, ModelGate] = {}

    def stats(self, model: str) -> ModelStats:
        """Live counters of `model` (in flight, waiting, retries, 429s, failures)."""
        return self._gate(model).stats

    def _spec(self, model: str) -> ModelSpec:
        return self._specs.get(model) or ModelSpec(name=model)

    def _gate(self, model: str) -> ModelGate:
        if model not in self._gates:
            self._gates[model] = ModelGate(model, self._spec(model).limits)
        return self._gates[model]

    def _secrets(self) -> tuple[str, ...]:
        return self._keys

    async def complete(self, model: str, messages: Sequence[ChatMessage], *,
                       tools: Sequence[dict[str, Any]] | None = None, **params: Any) -> Completion:
        """One chat completion, retried per the policy; raises ModelError when it cannot be had.

        `tools`, in OpenAI's format (litellm converts them for other providers), lets the model
        answer with function calls: `Completion.tool_calls`. The dialogue then carries them in
        OpenAI's form too (an assistant message's `tool_calls`, a `tool` message per result)."""
        if tools:
            params = {**params, "tools": list(tools)}
        spec, gate = self._spec(model), self._gate(model)
        if self.budget is not None:
            self.budget.check(model)
        gate.stats.calls += 1
        started = asyncio.get_running_loop().time()
        try:
            reply, attempts = await self._with_retries(model, spec, gate, list(messages), params)
        except ModelError as exc:
            gate.stats.failed += 1
            log.warning("llm_failed", model=model, kind=exc.kind, attempts=exc.attempts, reason=exc.reason)
            raise
        gate.stats.succeeded += 1
        usage = Usage(model=model, served_model=reply.served_model, prompt_tokens=reply.prompt_tokens,
                      completion_tokens=reply.completion_tokens, latency_s=asyncio.get_running_loop().time() - started,
                      attempts=attempts, cost_usd=reply.cost_usd)
        self.usage.add(usage)
        if self.budget is not None:
            self.budget.spend(usage)
        return Completion(text=reply.text, finish_reason=reply.finish_reason, usage=usage, tool_calls=reply.tool_calls,
                          raw=reply.raw)

    async def _with_retries(self, model: str, spec: ModelSpec, gate: ModelGate, messages: list[ChatMessage],
                            params: dict[str, Any]) -> tuple[Reply, int]:
        """The reply and the attempts it took; a ModelError saying how many were spent, when none worked.

        The first attempt is made directly, and the tenacity loop starts only after a retryable
        failure, which it is handed as its own first outcome: waits, stops and statistics are the
        same as if it had run from the start. Entering the loop for every call cost a sixth of the
        sweep process's CPU, for calls that almost always succeed at once.
        """
        started = time.monotonic()
        try:
            return await self._attempt(spec, gate, messages, params), 1
        except ModelError as exc:
            if not exc.retryable or self.retry.max_attempts == 1:
                raise exc.after(1) from None
            first: ModelError | None = exc
        loop = retrying(self.retry, lambda state: self._before_sleep(model, gate, state), started=started)
        try:
            async for attempt in loop:
                with attempt:
                    if first is not None:
                        error, first = first, None
                        raise error
                    reply = await self._attempt(spec, gate, messages, params)
        except ModelError as exc:
            raise exc.after(loop.statistics.get("attempt_number", 1)) from None
        return reply, loop.statistics.get("attempt_number", 1)

    async def _attempt(self, spec: ModelSpec, gate: ModelGate, messages: list[ChatMessage], params: dict[str, Any]) -> Reply:
        estimate = _estimate_tokens(messages, params)
        request = Request(model=spec.name, messages=messages, params=params, api_base=spec.api_base,
                          api_key=spec.api_key.get_secret_value() if spec.api_key else None, timeout=spec.timeout)
        async with gate.admit(estimate):
            try:
                reply = await self.transport.call(request)
            except ModelError as error:
                if error.kind == "rate_limit":
                    gate.rate_limited()
                # Redacted where it was raised; again here with every key this client knows.
                raise ModelError(spec.name, redact(error.reason, self._secrets()), kind=error.kind, status=error.status,
                                 retry_after=error.retry_after) from None
        gate.succeeded()
        gate.settle(estimate, reply.total_tokens)
        # Here, not in the transport: every transport's replies pass this line, and only the client
        # knows every key of the sweep (a transport knows the one its request carries). Before the
        # agent sees it, too: a key in an action would reach the container and come back in its output.
        return reply.redacted(self._secrets())

    async def start(self) -> None:
        """Start the transport's worker processes, if it has any (calls made before wait for them)."""
        await self.transport.start()

    async def aclose(self) -> None:
        """Stop the transport's worker processes, if it has any."""
        await self.transport.aclose()

    def _before_sleep(self, model: str, gate: ModelGate, state: tenacity.RetryCallState) -> None:
        gate.stats.retries += 1
        gate.stats.backoff_s += state.upcoming_sleep
        exc = state.outcome.exception() if state.outcome else None
        log.info("llm_retry", model=model, attempt=state.attempt_number, wait=round(state.upcoming_sleep, 3),
                 kind=getattr(exc, "kind", None), reason=getattr(exc, "reason", repr(exc)))


def _estimate_tokens(messages: list[ChatMessage], params: dict[str, Any]) -> int:
    # ~4 characters per token, plus the completion budget: only a reservation, settled afterwards.
    # Plain strings are counted as they are (serializing every dialogue cost a twentieth of the
    # sweep's CPU); anything else (content parts, tool calls) by its JSON.
    chars = sum(24 + sum(len(v) if isinstance(v, str) else len(json.dumps(v, default=str)) for v in m.values())
                for m in messages)
    return chars // 4 + int(params.get("max_tokens") or 0) + 1
