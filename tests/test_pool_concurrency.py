"""Many leases at once: no container is ever held by two leases."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.pool import ImagePoolConfig

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
