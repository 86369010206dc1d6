"""Hostile actions are contained by a timeout or a cap, and the pool recovers afterwards."""

from __future__ import annotations

import pytest

from foundation.errors import DriverLost
from foundation.pool import ActionLimits, ImagePoolConfig
from foundation.pool.container_sandbox import KILLED

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ALIVE = r"for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done"


LISTING = "find /testbed -printf '%p %m %s %T@\\n' | sort | md5sum"
PRISTINE = {}


async def assert_recovered(pool, image) -> None:
    async with pool.lease(image) as sandbox:
        result = await sandbox.run(LISTING, timeout=5)
        assert result.exit_code == 0 and result.output == PRISTINE["listing"], result.output
        procs = await sandbox.run(ALIVE)
        assert "sleep 1000" not in procs.output and ":" not in procs.output.split()


@pytest.fixture
async def pool(make_pool, fs1_image):
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=1, max_size=1)},
                         limits=ActionLimits(timeout=3, output_cap=64 * 1024)) as pool:
        async with pool.lease(fs1_image) as sandbox:
            PRISTINE["listing"] = (await sandbox.run(LISTING)).output
        yield pool


async def test_sleep_is_killed_at_the_timeout(pool, fs1_image):
    async with pool.lease(fs1_image) as sandbox:
        result = await sandbox.run("echo before; sleep 1000; echo after", timeout=1)
        assert result.timed_out and not result.ok
        assert result.output.startswith("before") and "after" not in result.output
        assert result.elapsed < 10  # the timeout's 1 s, not the sleep's 1000 (a loaded machine adds seconds)
        assert "sleep 1000" not in (await sandbox.run(ALIVE)).output, "the whole process group is killed"
    await assert_recovered(pool, fs1_image)


async def test_yes_flood_is_capped(pool, fs1_image):
    async with pool.lease(fs1_image) as sandbox:
        result = await sandbox.run("yes")
        assert result.flooded and not result.ok
        assert result.omitted > 0
        assert f"[output truncated: {result.omitted} bytes omitted]" in result.output
        assert len(result.output.encode()) < 64 * 1024 + 100
        assert not result.timed_out, "a flood is stopped before the timeout"
        capped = await sandbox.run("seq 1 100000", cap=1000)
        assert capped.exit_code == 0 and capped.output.startswith("1\n2\n") and capped.omitted == len(
            "".join(f"{i}\n" for i in range(1, 100001))) - 1000
    await assert_recovered(pool, fs1_image)


async def test_fork_bomb_is_contained(pool, fs1_image):
    async with pool.lease(fs1_image) as sandbox:
        await sandbox.run(":(){ :|:& };:", timeout=3)
        # The bomb goes on in the background, capped by the pids limit; the driver still answers
        # (a spawn may fail for want of pids, and says so), and the reset then kills it all.
        for path in ("/sys/fs/cgroup/pids.current", "/sys/fs/cgroup/pids/pids.current"):  # cgroup v2, v1
            probe = await sandbox.exec(["cat", path], timeout=5)
            if "No such file" not in probe.output:
                break
        assert probe.exit_code in (0, 126), probe.output
        if probe.exit_code == 0:
            assert int(probe.output) <= 512
        else:
            assert "Resource temporarily unavailable" in probe.output
    await assert_recovered(pool, fs1_image)


async def test_rm_rf_testbed_is_restored(pool, fs1_image):
    async with pool.lease(fs1_image) as sandbox:
        assert (await sandbox.run("rm -rf /testbed && ls /")).exit_code == 0
        assert (await sandbox.run("ls /testbed")).exit_code != 0
    await assert_recovered(pool, fs1_image)


async def test_an_action_that_kills_the_driver_gets_another_and_its_container_is_not_reused(pool, fs1_image):
    async with pool.lease(fs1_image) as sandbox:
        victim = sandbox.container_id
        killed = await sandbox.run("kill -9 $PPID")  # the driver: what an agent did to its own container
        assert killed.exit_code == 137 and killed.output == KILLED
        assert (await sandbox.run("echo still here")).output == "still here\n"  # a new driver, same container
        assert sandbox.broken is not None
    async with pool.lease(fs1_image) as sandbox:
        assert sandbox.container_id != victim  # retired: what the action left is not the reset's to undo
        assert (await sandbox.run("echo fine")).output == "fine\n"


async def test_a_container_that_dies_under_an_action_is_a_lost_driver(pool, fs1_image, docker):
    with pytest.raises(DriverLost, match="driver"):
        async with pool.lease(fs1_image) as sandbox:
            await docker.containers.container(sandbox.container_id).kill()  # from outside: infrastructure
            await sandbox.run("echo never")
