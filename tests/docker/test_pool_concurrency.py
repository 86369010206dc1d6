"""Many leases at once: no container is ever held by two leases."""

from __future__ import annotations

import asyncio
import time

import pytest

from foundation.pool import ImagePoolConfig
from foundation.pool.cpu import CpuGauge

pytestmark = [pytest.mark.docker, pytest.mark.slow]


async def test_200_concurrent_leases_over_16_containers(make_pool, fs1_image):
    holders: dict[str, int] = {}
    used: set[str] = set()
    overlaps: list[str] = []

    async def episode(n: int) -> None:
        async with pool.lease(fs1_image) as sandbox:
            cid = sandbox.container_id
            if cid in holders:
                overlaps.append(f"{cid[:12]} held by {holders[cid]} and {n}")
            holders[cid] = n
            used.add(cid)
            # The previous holder's file is gone (reset), and nobody writes ours while we hold it.
            result = await sandbox.run(f"test ! -e /testbed/owner && echo {n} > /testbed/owner && sleep 0.0$((RANDOM % 5)); cat /testbed/owner")
            assert result.output.strip() == str(n), result.output
            del holders[cid]

    async with make_pool({fs1_image: ImagePoolConfig(min_idle=4, max_size=16)}) as pool:
        async with asyncio.TaskGroup() as group:
            for n in range(200):
                group.create_task(episode(n))
        assert pool.stats()[fs1_image]["leased"] == 0
    assert overlaps == []
    assert 1 < len(used) <= 16


class PinnedGauge(CpuGauge):
    """The machine's load as the test sets it (the real gauge reads /proc/stat)."""

    def __init__(self, busy: float) -> None:
        super().__init__()
        self.value = busy

    def sample(self) -> None:
        pass

    @property
    def busy(self) -> float:
        return self.value


async def test_saturated_cpus_make_a_lease_wait_for_a_container(make_pool, fs1_image):
    gauge = PinnedGauge(1.0)
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=0, max_size=8)}, cpu=gauge) as pool:
        await pool.warm(fs1_image, 2)

        async def third_lease() -> str:
            async with pool.lease(fs1_image) as sandbox:
                return sandbox.container_id

        async with pool.lease(fs1_image) as a, pool.lease(fs1_image) as b:
            waiting = asyncio.create_task(third_lease())
            await asyncio.sleep(1.0)
            assert not waiting.done() and pool.capacity(fs1_image) == 2  # no third container started
            held = {a.container_id, b.container_id}
        assert await waiting in held and pool.capacity(fs1_image) == 2

        gauge.value = 0.3  # the CPUs have room: a waiting lease gets a new container
        async with pool.lease(fs1_image), pool.lease(fs1_image):
            async with asyncio.timeout(60):
                assert await third_lease() not in held
        assert pool.capacity(fs1_image) == 3


async def test_a_lease_waiting_on_a_busy_machine_gets_a_container_once_it_has_room(make_pool, fs1_image):
    gauge = PinnedGauge(1.0)
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=0, max_size=8)}, cpu=gauge) as pool:
        await pool.warm(fs1_image, 2)
        got = asyncio.Event()

        async def third_lease() -> None:
            async with pool.lease(fs1_image):
                got.set()

        async with pool.lease(fs1_image), pool.lease(fs1_image):
            waiting = asyncio.create_task(third_lease())
            await asyncio.sleep(0.6)
            assert not got.is_set()
            gauge.value = 0.3  # the pool's sampler sees room and grows for the waiting lease
            async with asyncio.timeout(60):
                await got.wait()  # while both others are still held
            assert pool.capacity(fs1_image) == 3
        await waiting


def test_the_cpu_gauge_sees_a_busy_loop():
    gauge = CpuGauge(window=5.0)
    gauge.sample()
    assert gauge.busy is None  # one sample says nothing yet
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        pass
    gauge.sample()
    busy = gauge.busy
    assert busy is not None and 0.0 < busy <= 1.0
