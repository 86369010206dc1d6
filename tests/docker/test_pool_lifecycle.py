"""No container outlives its owner: normal exit, exception, SIGINT, SIGTERM, SIGKILL."""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import structlog

from foundation.concurrency import all_of
from foundation.engine import engine_host
from foundation.engine_gate import gate_path
from foundation.errors import DriverExited
from foundation.logs import configured
from foundation.pool import ImagePoolConfig, Pool
from foundation.pool.container import ContainerState
from foundation.pool.ownership import MANAGED, OWNER, Owner
from tests.conftest import PROJECT, containers_of_run, require_image
from tests.processes import ended_async

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HOLDER = """
import asyncio, sys
from foundation.pool import Pool, ImagePoolConfig
from foundation.engine import engine
async def main():
    async with engine() as docker:
        async with Pool(docker, {sys.argv[1]: ImagePoolConfig(min_idle=3, max_size=3)}, run_id=sys.argv[2]) as pool:
            await pool.wait_idle(sys.argv[1], 3)
            async with pool.lease(sys.argv[1]) as sandbox:
                await sandbox.run("touch /testbed/x")
                print("holding", flush=True)
                await asyncio.sleep(600)
asyncio.run(main())
"""


async def start_holder(*argv: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(sys.executable, *argv, cwd=PROJECT, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    async with asyncio.timeout(120):
        while b"holding" not in (line := await proc.stdout.readline()):
            if not line:
                raise AssertionError((await proc.stderr.read()).decode())  # type: ignore[union-attr]
    return proc


async def owned_by(docker, pid: int) -> list:
    found = await docker.containers.list(all=True, filters={"label": [MANAGED]})
    return [c for c in found if (o := Owner.parse(c["Labels"].get(OWNER, ""))) and o.pid == pid]


@pytest.mark.alone  # another process's pool start would reap what this test counts
async def test_sigkilled_owner_is_reaped_by_the_next_pool(docker, fs1_image):
    run_id = f"test-kill-{os.getpid()}"
    proc = await start_holder("-c", HOLDER, fs1_image, run_id)
    assert len(await containers_of_run(docker, run_id)) == 3
    proc.kill()
    await proc.wait()
    assert len(await containers_of_run(docker, run_id)) == 3, "SIGKILL leaves them; the next start reaps them"
    async with Pool(docker, {}) as _:
        assert await containers_of_run(docker, run_id) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_signal_removes_every_container(docker, fs1_image, sig):
    proc = await start_holder("-m", "orchestrator", "pool", "demo", "--size", "2", "--episodes", "2", "--hold", "600")
    assert len(await owned_by(docker, proc.pid)) == 2
    proc.send_signal(sig)
    _, err = await ended_async(proc, 60)
    assert proc.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()
    assert await owned_by(docker, proc.pid) == []


async def test_exception_inside_a_lease_removes_every_container(docker, fs1_image):
    run_id = f"test-exc-{os.getpid()}"
    with pytest.raises(ZeroDivisionError):
        async with Pool(docker, {fs1_image: ImagePoolConfig(min_idle=2, max_size=2)}, run_id=run_id) as pool:
            async with pool.lease(fs1_image) as sandbox:
                await sandbox.run("true")
                1 / 0
    assert await containers_of_run(docker, run_id) == []


async def test_cancelled_while_waiting_for_a_container(make_pool, fs1_image):
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=0, max_size=1)}) as pool:
        async with pool.lease(fs1_image):
            waiter = asyncio.create_task(pool.lease(fs1_image).__aenter__())
            await asyncio.sleep(0.05)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        async with pool.lease(fs1_image) as sandbox:  # the slot was not lost
            assert (await sandbox.run("echo hi")).output == "hi\n"


async def test_a_lease_that_ends_while_the_pool_forgets_its_container_retires_it(make_pool, fs1_image, docker):
    """The engine went away and came back while an episode held its container: the pool forgets
    every container (each marked broken, its removal under way), and the lease ends in the middle
    of that. The container is retired with the others, never reset, and the lease's end raises
    nothing (found by CI: `IllegalTransition: broken -> resetting`, stored as the episode's task
    error)."""
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=0, max_size=2)}) as pool:
        async with asyncio.TaskGroup() as group:
            async with pool.lease(fs1_image) as sandbox:
                member = sandbox._member
                pool.suspend("the test's outage")
                recovering = group.create_task(pool.recover())
                for _ in range(1000):  # until forget() has marked it broken (its removal then under way)
                    if member.state is ContainerState.BROKEN:
                        break
                    await asyncio.sleep(0)
                assert member.state is ContainerState.BROKEN
            # the lease ended here, while the pool was removing its container
        assert recovering.done() and member.state is ContainerState.REMOVED
        async with pool.lease(fs1_image) as sandbox:  # served again, by a new container
            assert sandbox.container_id != member.id
            assert (await sandbox.run("echo hi")).output == "hi\n"
        run_id = pool.run_id
    assert await containers_of_run(docker, run_id) == []


async def test_an_action_whose_container_the_pool_takes_back_is_lost_not_the_agent_s_doing(make_pool, fs1_image):
    """The engine came back from an outage while an action ran: the pool forgets its container,
    which closes the driver's stream under the action, and the container's removal waits its turn
    at the engine's gate (here held by the test, as another process's removal would). The action
    is the infrastructure's loss (DriverExited: the episode is run again), never the agent's
    KILLED observation, which a check of "does the container still run?" gave while the removal
    waited (found by tests/docker/test_engine_restart.py's frozen engine: a solved starter task
    stored as 0.67)."""
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=0, max_size=1)}) as pool:
        with held_gate():
            async with pool.lease(fs1_image) as sandbox:
                action = asyncio.create_task(sandbox.run("sleep 30", timeout=60))
                await asyncio.sleep(0.5)  # the action runs
                pool.suspend("the test's outage")
                recovering = asyncio.create_task(pool.recover())
                try:
                    with pytest.raises(DriverExited):
                        await asyncio.wait_for(action, 20)
                finally:
                    action.cancel()
            assert not recovering.done()  # the removal still waits at the gate
        await asyncio.wait_for(recovering, 60)


@contextmanager
def held_gate() -> Iterator[None]:
    """The engine's gate held as another process would hold it (a `flock` of its own)."""
    fd = os.open(gate_path(engine_host()), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


async def test_a_normal_shutdown_logs_removals_and_only_a_broken_container_as_broken(make_pool, fs1_image):
    """Closing the pool removes its containers as ordinary cleanup: each removal a debug event
    (`pool.container_removed`), none a `pool.container_broken`, which stays for a container that
    went bad (here a lease that marked its container broken). Issue 37: a shutdown logged
    `pool.container_broken reason='removed by pool'` for every container."""
    with configured(2), structlog.testing.capture_logs() as events:  # debug events too
        async with make_pool({fs1_image: ImagePoolConfig(min_idle=2, max_size=2)}) as pool:
            await pool.wait_idle(fs1_image, 2)
            async with pool.lease(fs1_image) as sandbox:  # an ordinary lease: reset after, then closed
                assert (await sandbox.run("touch /testbed/x")).ok
            async with pool.lease(fs1_image) as sandbox:
                sandbox.mark_broken("the test's service died")
                broken = sandbox.container_id[:12]
    found = [(e["event"], e["log_level"], e.get("container"), e.get("reason")) for e in events
             if e["event"] in ("pool.container_broken", "pool.container_removed")]
    assert [f for f in found if f[0] == "pool.container_broken"] == [
        ("pool.container_broken", "info", broken, "the test's service died")]
    removed = {container: (level, reason) for event, level, container, reason in found
               if event == "pool.container_removed"}
    assert removed.pop(broken) == ("debug", "the test's service died")
    assert removed and all(level == "debug" for level, _ in removed.values()), found  # those the shutdown removed
    assert not [e for e in events if e["log_level"] in ("warning", "error") and "removed by pool" in str(e)]


async def test_warming_pools_that_share_a_config_leaves_the_config_as_it_was(make_pool, fs1_image, docker):
    """A sweep's pools of plain images share one config object (environments/runtime.py's
    PLAIN_POOL) and are warmed at once. How many containers a pool keeps idle while it warms is the
    pool's own: the shared config is never changed, or the warm-up's minimum outlives it and every
    later pool of that config keeps that many containers idle (a one-episode sweep started 15 for
    nothing in a process whose earlier sweep had warmed 16)."""
    starter = await require_image(docker, "intercode/starter")
    shared = ImagePoolConfig(min_idle=0, max_size=4)
    async with make_pool({fs1_image: shared, starter: shared}) as pool:
        await all_of([pool.warm(fs1_image, 1), pool.warm(starter, 4)])  # fs1's warm ends first
        assert shared.min_idle == 0
        assert (pool.capacity(fs1_image), pool.capacity(starter)) == (1, 4)
