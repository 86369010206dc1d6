"""The retry policy, in one place: which failures are retried, how long to wait, when to give up.

Classification lives in `errors.classify`; this module only turns a `ModelError` into a decision.
Waits honour the provider's Retry-After, otherwise back off exponentially with full jitter.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import tenacity
import tenacity.stop
from pydantic import BaseModel, Field

from .errors import ModelError


class RetryPolicy(BaseModel):
    """Budget of one call across all its attempts."""

    max_attempts: int = Field(6, ge=1, description="attempts per call, the first included")
    max_total_wait: float = Field(120.0, gt=0, description="give up rather than sleep past this many seconds since the first attempt")
    initial_backoff: float = Field(0.5, gt=0, description="scale of the first exponential backoff, seconds")
    max_backoff: float = Field(30.0, gt=0, description="cap of one exponential backoff, seconds")
    retry_after_jitter: float = Field(0.25, ge=0, description="random seconds added to a provider's Retry-After")


class _OutOfTime(tenacity.stop.stop_base):
    """tenacity's stop_before_delay, counted from the first attempt (`since`) rather than from the loop."""

    def __init__(self, since: float, max_total_wait: float) -> None:
        self.since = since
        self.max_total_wait = max_total_wait

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return time.monotonic() - self.since + (retry_state.upcoming_sleep or 0.0) >= self.max_total_wait


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ModelError) and exc.retryable


def retrying(policy: RetryPolicy, before_sleep: Callable[[tenacity.RetryCallState], None],
             started: float | None = None) -> tenacity.AsyncRetrying:
    """A tenacity loop for one call; the last ModelError is re-raised when the budget is spent.

    `started` (time.monotonic()) is when the call's first attempt began, if before the loop.
    """
    since = time.monotonic() if started is None else started

    out_of_time = _OutOfTime(since, policy.max_total_wait)

    backoff = tenacity.wait_random_exponential(multiplier=policy.initial_backoff, max=policy.max_backoff)

    def wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ModelError) and exc.retry_after is not None:
            # The provider knows when it will take us again; jitter keeps callers from returning in a herd.
            return exc.retry_after + random.uniform(0, policy.retry_after_jitter)
        return backoff(state)

    return tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(_retryable),
        wait=wait,
        stop=tenacity.stop_any(tenacity.stop_after_attempt(policy.max_attempts), out_of_time),
        before_sleep=before_sleep,
        reraise=True,
    )
