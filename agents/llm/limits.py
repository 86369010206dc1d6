"""Per-model admission: an adaptive concurrency limit and request/token buckets.

A call first takes a concurrency slot, then its request and token allowance, so the buckets are
spent right before the request leaves. Waiting sleeps for exactly the computed deficit (no polling),
and each wait is logged and counted in `ModelStats`, which a progress display reads.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog
from pydantic import BaseModel, Field

log = structlog.get_logger(__name__)


class ModelLimits(BaseModel):
    """What one model (or provider deployment) may be sent."""

    max_concurrency: int = Field(16, ge=1, description="requests in flight at once, before any 429 cut")
    rpm: float | None = Field(None, gt=0, description="requests per minute; None = unlimited")
    tpm: float | None = Field(None, gt=0, description="prompt+completion tokens per minute; None = unlimited")
    burst: float | None = Field(None, ge=1, description="requests allowed back to back; default rpm/60, at least 1")
    recover_after: int = Field(10, ge=1, description="successes after which a 429 cut regains one slot")


@dataclass
class ModelStats:
    """Live counters of one model; read them, never write them from outside this package."""

    in_flight: int = 0
    waiting: int = 0
    calls: int = 0
    succeeded: int = 0
    failed: int = 0
    retries: int = 0
    backoff_s: float = 0.0  # the waits chosen before retries (Retry-After or the policy's backoff), summed
    rate_limited: int = 0  # 429s seen
    concurrency_limit: int = 0


class TokenBucket:
    """Refills `rate` units per second up to `capacity`; waiters are served first come, first served."""

    def __init__(self, name: str, rate: float, capacity: float) -> None:
        self.name, self.rate, self.capacity = name, rate, capacity
        self._level = capacity
        self._stamp: float | None = None
        self._lock = asyncio.Lock()  # FIFO: only the head of the queue sleeps on the bucket

    def _refill(self) -> None:
        now = asyncio.get_running_loop().time()
        if self._stamp is not None:
            self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float = 1.0, on_wait: Callable[[float], None] | None = None) -> float:
        """Take `amount` (capped at capacity), sleeping for the deficit; returns seconds waited."""
        amount = min(amount, self.capacity)
        waited = 0.0
        async with self._lock:
            while True:
                self._refill()
                if self._level >= amount:
                    self._level -= amount
                    return waited
                wait = (amount - self._level) / self.rate
                if on_wait:
                    on_wait(wait)
                await asyncio.sleep(wait)
                waited += wait

    def debit(self, amount: float) -> None:
        """Charge (or refund, if negative) after the fact; a debt makes the next callers wait."""
        self._refill()
        self._level = min(self.capacity, self._level - amount)


class AdaptiveConcurrency:
    """A semaphore whose limit halves on each 429 and regains one slot per `recover_after` successes."""

    def __init__(self, maximum: int, recover_after: int) -> None:
        self.maximum, self.limit, self.recover_after = maximum, maximum, recover_after
        self.in_flight = 0
        self._streak = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self) -> None:
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future  # the releaser counted us in before waking us
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted and cancelled at once: hand the slot on
            else:
                self._waiters.remove(future)
            raise

    def release(self) -> None:
        # Synchronous on purpose: a release in a `finally` must not be interruptible by cancellation.
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            future = self._waiters.popleft()
            if not future.done():
                self.in_flight += 1
                future.set_result(None)

    def rate_limited(self) -> None:
        self.limit = max(1, self.limit // 2)
        self._streak = 0

    def succeeded(self) -> None:
        self._streak += 1
        if self._streak >= self.recover_after and self.limit < self.maximum:
            self.limit += 1
            self._streak = 0
            self._wake()


class ModelGate:
    """Everything that stands between a caller and one model: slots, request and token buckets."""

    def __init__(self, model: str, limits: ModelLimits) -> None:
        self.model = model
        self.stats = ModelStats(concurrency_limit=limits.max_concurrency)
        self.slots = AdaptiveConcurrency(limits.max_concurrency, limits.recover_after)
        burst = limits.burst or max(1.0, (limits.rpm or 0) / 60)
        self.requests = TokenBucket("requests", limits.rpm / 60, burst) if limits.rpm else None
        self.tokens = TokenBucket("tokens", limits.tpm / 60, limits.tpm) if limits.tpm else None

    @asynccontextmanager
    async def admit(self, estimated_tokens: int) -> AsyncIterator[None]:
        """Hold a slot and this request's allowance for the duration of one attempt."""
        self.stats.waiting += 1
        try:
            if self.slots.in_flight >= self.slots.limit:
                log.info("llm_wait", model=self.model, reason="concurrency", limit=self.slots.limit,
                         in_flight=self.slots.in_flight)
            await self.slots.acquire()
        except BaseException:
            self.stats.waiting -= 1
            raise
        try:
            for bucket, amount in ((self.requests, 1), (self.tokens, estimated_tokens)):
                if bucket is not None:
                    await bucket.acquire(amount, self._logger(bucket.name))
        except BaseException:
            self.stats.waiting -= 1
            self.slots.release()
            raise
        self.stats.waiting -= 1
        self.stats.in_flight += 1
        try:
            yield
        finally:
            self.stats.in_flight -= 1
            self.slots.release()

    def _logger(self, reason: str) -> Callable[[float], None]:
        def on_wait(seconds: float) -> None:
            log.info("llm_wait", model=self.model, reason=f"{reason}_per_minute", wait=round(seconds, 3))
        return on_wait

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token bucket once the provider has said what the call really cost."""
        if self.tokens is not None:
            self.tokens.debit(actual_tokens - min(estimated_tokens, self.tokens.capacity))

    def rate_limited(self) -> None:
        self.stats.rate_limited += 1
        before = self.slots.limit
        self.slots.rate_limited()
        self.stats.concurrency_limit = self.slots.limit
        if self.slots.limit != before:
            log.warning("llm_concurrency_cut", model=self.model, limit=self.slots.limit, was=before)

    def succeeded(self) -> None:
        self.slots.succeeded()
        self.stats.concurrency_limit = self.slots.limit
