"""Token buckets and adaptive concurrency, in isolation (no network)."""

from __future__ import annotations

import asyncio

import pytest

from agents.llm.limits import AdaptiveConcurrency, TokenBucket


async def test_bucket_paces_requests_without_polling() -> None:
    bucket = TokenBucket("requests", rate=20, capacity=1)
    waits: list[float] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(5):
        await bucket.acquire(1, waits.append)
    elapsed = loop.time() - started
    assert elapsed >= 0.18  # 4 refills of 50 ms each
    assert 1 <= len(waits) <= 4  # at most one sleep per deficit, no spinning (a late wake-up may cover the next)


async def test_bucket_debt_delays_the_next_caller() -> None:
    bucket = TokenBucket("tokens", rate=100, capacity=100)
    bucket.debit(120)  # a call cost far more than reserved
    loop = asyncio.get_running_loop()
    started = loop.time()
    await bucket.acquire(10)
    assert loop.time() - started >= 0.25


async def test_adaptive_concurrency_halves_and_recovers() -> None:
    slots = AdaptiveConcurrency(maximum=8, recover_after=2)
    slots.rate_limited()
    slots.rate_limited()
    assert slots.limit == 2
    for _ in range(4):
        slots.succeeded()
    assert slots.limit == 4
    for _ in range(10):
        slots.rate_limited()
    assert slots.limit == 1


async def test_adaptive_concurrency_limits_and_survives_cancellation() -> None:
    slots = AdaptiveConcurrency(maximum=2, recover_after=100)
    peak = 0

    async def worker() -> None:
        nonlocal peak
        await slots.acquire()
        try:
            peak = max(peak, slots.in_flight)
            await asyncio.sleep(0.01)
        finally:
            slots.release()

    async with asyncio.TaskGroup() as group:
        for _ in range(10):
            group.create_task(worker())
    assert peak == 2 and slots.in_flight == 0

    await slots.acquire()
    await slots.acquire()
    waiter = asyncio.ensure_future(slots.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    slots.release()
    slots.release()
    assert slots.in_flight == 0
    await asyncio.wait_for(slots.acquire(), 1)  # the cancelled waiter left no ghost behind
    slots.release()
