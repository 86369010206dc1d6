"""`just bench-pool`: the warm pool against plain `docker exec` and container creation, side by side.

Measures, in one run on this machine: a warm lease, the round trip of the action `true` through
the driver and through `docker exec`, a reset against creating a container, and sustained
actions per second at concurrency 1, 8 and 32. What the disk cap costs (foundation/pool/disk.py)
is measured side by side: creating and resetting a container with the cap and without, in
alternation; and what the engine's gate costs (foundation/engine_gate.py): 32 running containers
removed at once through it (one at a time) and straight (all at once), in alternation. Ends with
one `name: value` line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import aiodocker

from foundation.engine import engine
from foundation.logs import configure
from foundation.pool import ImagePoolConfig, Pool
from foundation.pool.container import create_container
from foundation.pool.driver import DriverClient
from foundation.pool.ownership import Owner, labels_for, remove_quietly

IMAGE = "intercode/nl2bash-fs1"


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def show(name: str, seconds: list[float]) -> tuple[float, float]:
    p50, p99 = statistics.median(seconds) * 1e3, p(seconds, 0.99) * 1e3
    print(f"  {name:<46} n={len(seconds):<5} p50 {p50:9.3f} ms   p99 {p99:9.3f} ms")
    return p50, p99


async def timed(n: int, fn: Callable[[], Awaitable[object]]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - start)
    return out


async def bench_lease(pool: Pool, n: int) -> list[float]:
    """Time to enter a lease while an idle container is there (resets are awaited outside the timing)."""
    out = []
    for _ in range(n):
        await pool.wait_idle(IMAGE, 4)
        lease = pool.lease(IMAGE)
        start = time.perf_counter()
        await lease.__aenter__()
        out.append(time.perf_counter() - start)
        await lease.__aexit__(None, None, None)
    return out


async def docker_exec_true(container: aiodocker.containers.DockerContainer) -> None:
    execution = await container.exec(["true"], stdout=True, stderr=True)
    async with execution.start(detach=False) as stream:
        while await stream.read_out() is not None:
            pass
    assert (await execution.inspect())["ExitCode"] == 0


async def dirty_then_reset(driver: DriverClient) -> float:
    """Time one reset after a small change of files (through that container's driver)."""
    await driver.exec(["bash", "-c", "echo x > /testbed/new.txt; rm /testbed/hello.c; echo y >> /root/z"])
    start = time.perf_counter()
    await driver.request("reset", wait=60)
    return time.perf_counter() - start


async def sustained(pool: Pool, concurrency: int, seconds: float) -> float:
    count = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal count
        async with pool.lease(IMAGE) as sandbox:
            while time.perf_counter() < stop:
                await sandbox.exec(["true"])
                count += 1

    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    return count / (time.perf_counter() - start)


async def removal_burst(docker: aiodocker.Docker, labels: dict[str, str], gated: bool, n: int = 32) -> float:
    """Seconds to remove `n` running containers at once: through the gate (remove_quietly) or
    straight to the engine."""
    made = []
    for _ in range(n):
        container = await docker.containers.create({"Image": IMAGE, "Cmd": ["sleep", "infinity"], "Labels": labels,
                                                    "HostConfig": {"NetworkMode": "none", "Init": True}})
        await container.start()
        made.append(container)
    start = time.perf_counter()
    if gated:
        await asyncio.gather(*(remove_quietly(docker, c.id) for c in made))
    else:
        await asyncio.gather(*(c.delete(force=True, v=True) for c in made))
    return time.perf_counter() - start


async def main(args: argparse.Namespace) -> None:
    async with engine() as docker:
        async with Pool(docker, {IMAGE: ImagePoolConfig(min_idle=4, max_size=32, max_uses=10_000)}) as pool:
            await pool.wait_idle(IMAGE, 4)
            print(f"pool benchmark on {IMAGE}")
            lease_p50, lease_p99 = show("warm lease", await bench_lease(pool, args.n))

            async with pool.lease(IMAGE) as sandbox:
                await timed(20, lambda: sandbox.exec(["true"]))  # warm-up
                action_p50, _ = show("action `true` through the driver", await timed(args.n, lambda: sandbox.exec(["true"])))
                show("action `bash -c true` through the driver", await timed(args.n, lambda: sandbox.run("true")))
                raw = docker.containers.container(sandbox.container_id)
                await timed(5, lambda: docker_exec_true(raw))
                exec_p50, _ = show("`docker exec true` (aiodocker)", await timed(args.n_exec, lambda: docker_exec_true(raw)))
                driver = sandbox._driver()  # noqa: SLF001 — the benchmark times the reset op itself

                labels = labels_for(Owner.me(), pool.run_id, IMAGE)
                hardening = pool._configs[IMAGE].hardening  # noqa: SLF001
                uncapped = await create_container(docker, IMAGE, hardening, labels, disk=None)
                assert uncapped.driver is not None
                resets: dict[bool, list[float]] = {True: [], False: []}
                for _ in range(args.n_create * 3):  # capped and uncapped in alternation
                    for capped, reset_driver in ((True, driver), (False, uncapped.driver)):
                        resets[capped].append(await dirty_then_reset(reset_driver))
                await uncapped.remove()
            reset_p50, _ = show(f"reset after a small change (cap: {pool.disk.mode})", resets[True])
            reset_uncapped_p50, _ = show("reset after a small change, no cap", resets[False])

            creates: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.n_create):
                for capped in (True, False):
                    start = time.perf_counter()
                    member = await create_container(docker, IMAGE, hardening, labels, pool.disk if capped else None)
                    creates[capped].append(time.perf_counter() - start)
                    await member.remove()
            create_p50, _ = show(f"create + start + driver ready (cap: {pool.disk.mode})", creates[True])
            create_uncapped_p50, _ = show("create + start + driver ready, no cap", creates[False])

            bursts: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.n_bursts):
                for gated in (True, False, False, True):
                    bursts[gated].append(await removal_burst(docker, labels, gated))
            burst_gated, _ = show("32 running containers removed, gated", bursts[True])
            burst_free, _ = show("32 running containers removed, all at once", bursts[False])

            rates = {}
            await pool.wait_idle(IMAGE, 32, timeout=300)
            for concurrency in (1, 8, 32):
                rates[concurrency] = await sustained(pool, concurrency, args.seconds)
                print(f"  sustained actions/s at concurrency {concurrency:<3}  {rates[concurrency]:9.1f}")

    print()
    print(f"lease_p99_ms: {lease_p99:.3f}")
    print(f"action_p50_ms: {action_p50:.3f}")
    print(f"docker_exec_p50_ms: {exec_p50:.3f}")
    print(f"speedup_vs_exec: {exec_p50 / action_p50:.1f}")
    print(f"actions_per_s_c32: {rates[32]:.0f}")
    print(f"reset_p50_ms: {reset_p50:.3f}")
    print(f"reset_uncapped_p50_ms: {reset_uncapped_p50:.3f}")
    print(f"create_p50_ms: {create_p50:.3f}")
    print(f"create_uncapped_p50_ms: {create_uncapped_p50:.3f}")
    print(f"disk_cap_create_cost_ms: {create_p50 - create_uncapped_p50:.1f}")
    print(f"removals_per_s_gated: {32e3 / burst_gated:.1f}")
    print(f"removals_per_s_all_at_once: {32e3 / burst_free:.1f}")


if __name__ == "__main__":
    configure(0)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=500, help="samples for lease and action timings")
    parser.add_argument("--n-exec", type=int, default=100, help="samples of docker exec")
    parser.add_argument("--n-create", type=int, default=10, help="samples of container creation")
    parser.add_argument("--n-bursts", type=int, default=2, help="rounds of removal bursts (each: gated, free, free, gated)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each sustained run")
    asyncio.run(main(parser.parse_args()))
