"""`python -m orchestrator pool ...`: a demo of the warm pool, its status, and reaping by hand."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from foundation.concurrency import all_of
from foundation.engine import engine
from foundation.errors import ConfigError
from foundation.pool.config import ImagePoolConfig
from foundation.pool.ownership import MANAGED, OWNER, RUN, reap_orphans
from foundation.pool.pool import Pool

DEMO_IMAGE = "intercode/nl2bash-fs1"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("pool", help="warm container pool: demo, status, reap")
    cmds = parser.add_subparsers(dest="pool_command", metavar="ACTION", required=True)
    demo = cmds.add_parser("demo", help="warm a pool, run actions in parallel leases, show timings")
    demo.add_argument("--image", default=DEMO_IMAGE)
    demo.add_argument("--size", type=int, default=4, help="containers kept warm")
    demo.add_argument("--episodes", type=int, default=16)
    demo.add_argument("--hold", type=float, default=0.0, help="keep the pool open this many seconds at the end")
    demo.set_defaults(handler=_demo)
    status = cmds.add_parser("status", help="list the containers that pools on this engine own")
    status.set_defaults(handler=_status)
    reap = cmds.add_parser("reap", help="remove containers whose owner process is gone")
    reap.set_defaults(handler=_reap)


def _check_demo(args: argparse.Namespace) -> None:
    """ConfigError for a count the demo cannot run with (checked before the engine is reached)."""
    for flag, value, least in (("--size", args.size, 1), ("--episodes", args.episodes, 1), ("--hold", args.hold, 0)):
        if value < least:
            raise ConfigError(f"{flag} must be {least} or more, not {value:g}")


async def _demo(args: argparse.Namespace) -> int:
    _check_demo(args)
    async with engine() as docker:
        config = ImagePoolConfig(min_idle=args.size, max_size=args.size)
        async with Pool(docker, {args.image: config}) as pool:
            start = time.perf_counter()
            await pool.wait_idle(args.image, args.size)
            print(f"{args.size} containers of {args.image} warm in {time.perf_counter() - start:.2f} s")
            timings = await all_of(_episode(pool, args.image, i) for i in range(args.episodes))
            leases, actions = zip(*timings)
            print(f"{args.episodes} episodes, {args.size} at a time: lease median {statistics.median(leases) * 1e3:.2f} ms"
                  f" (waits included), action median {statistics.median(a for al in actions for a in al) * 1e3:.2f} ms")
            if args.hold:
                print(f"holding the pool for {args.hold:.0f} s (Ctrl-C removes its containers)", flush=True)
                await asyncio.sleep(args.hold)
    print("pool closed: every container removed")
    return 0


async def _episode(pool: Pool, image: str, n: int) -> tuple[float, list[float]]:
    start = time.perf_counter()
    async with pool.lease(image) as sandbox:
        leased = time.perf_counter() - start
        timings = []
        for action in ("cd /testbed", "ls | head -3", f"echo episode {n} > note.txt", "cat note.txt"):
            t0 = time.perf_counter()
            await sandbox.run(action)
            timings.append(time.perf_counter() - t0)
    return leased, timings


async def _status(args: argparse.Namespace) -> int:
    async with engine() as docker:
        found = await docker.containers.list(all=True, filters={"label": [MANAGED]})
        for c in found:
            print(f"{c.id[:12]}  run={c['Labels'].get(RUN)}  owner={c['Labels'].get(OWNER)}  {c['State']}")
        print(f"{len(found)} pool containers")
    return 0


async def _reap(args: argparse.Namespace) -> int:
    async with engine() as docker:
        print(f"removed {await reap_orphans(docker)} orphaned containers")
    return 0
