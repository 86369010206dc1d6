"""`./dev bench-view`: the viewer over a store of 100,000 episodes, page latency over HTTP.

Builds the store through the sweep's own writer (`orchestrator.store.Store`: one transaction per
episode, turns and LLM calls included), starts `python -m orchestrator view` on it as its own
process, and requests the overview and list pages one at a time with aiohttp's client: first
pages, deep pages, filters, sorts, text search. Prints each page's median and p95 and, last,
`view_p95_ms:` over every overview and list request. The first overview (the report's view
computed from the whole store, then cached until the store changes) and the overview right after
an episode is stored are printed apart.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from foundation.settings import PROJECT_ROOT
from orchestrator.store import EpisodeKey, EpisodeRecord, LLMCall, Store, TurnRecord

MODELS, STRATEGIES = ("openai/gpt-4o-mini", "anthropic/claude-haiku"), ("try_again", "react")
TASK_SETS = ("nl2bash-fs1", "nl2bash-fs2", "spider", "mbpp", "ctf")
STATUSES = ("solved", "submitted", "max_turns", "model_error", "timeout", "infra_error", "budget_exhausted")
FAILURE = {"model_error": "model", "timeout": "task", "infra_error": "infra"}
WORDS = "list find count files under directory sort unique lines print size largest recent query table".split()


def episode(i: int, rng: random.Random) -> EpisodeRecord:
    """Episode i: a cell by i, a status and 1-5 turns at random, texts of realistic length."""
    cell = i % (len(MODELS) * len(STRATEGIES) * len(TASK_SETS))
    model, rest = MODELS[cell % 2], cell // 2
    strategy, task_set = STRATEGIES[rest % 2], TASK_SETS[rest // 2]
    status = rng.choices(STATUSES, weights=(40, 25, 25, 3, 3, 2, 2))[0]
    n = rng.randint(1, 5)
    rewards = [rng.random() * 0.9 for _ in range(n)]
    if status == "solved":
        rewards[-1] = 1.0
    query = " ".join(rng.choices(WORDS, k=rng.randint(8, 30)))
    turns = [TurnRecord(f"Thought: {query[:80]}\n```bash\nfind . -name '*.py' | head -{k}\n```", f"find . | head -{k}",
                        "\n".join(f"./dir{k}/file{j}.py" for j in range(rng.randint(1, 40))), r, True)
             for k, r in enumerate(rewards)]
    calls = [LLMCall(model, model.split("/")[1], rng.randint(300, 3000), rng.randint(20, 400), rng.random() * 3, 1,
                     rng.random() / 1000) for _ in rewards]
    return EpisodeRecord(EpisodeKey(model, strategy, task_set, f"{task_set}/{i // 20}", 0), "bash", task_set, i // 20,
                         query, "find . -name '*.py'", f"intercode/{task_set}", 5, 1.7e9 + i, 1.7e9 + i + 2, status,
                         FAILURE.get(status), "an error" if status in FAILURE else None, 1, "sha256:" + "ab" * 32,
                         turns, calls)


async def build(outdir: Path, count: int) -> float:
    """Write `count` episodes through the store's writer; returns episodes per second."""
    rng = random.Random(0)
    started = time.perf_counter()
    async with Store.open(outdir, sweep="bench-view", identity="bench-view") as store:
        run = await store.start_run(sweep="bench-view", identity="bench-view", sweep_hash="0" * 64, git_sha=None,
                                    config_json="{}")
        for start in range(0, count, 500):  # the writer's thread takes them in order; 500 awaited at a time
            await asyncio.gather(*(store.add_episode(run, "bench-view", episode(i, rng))
                                   for i in range(start, min(start + 500, count))))
    return count / (time.perf_counter() - started)


def pages(count: int) -> dict[str, str]:
    cell = "model=openai/gpt-4o-mini&strategy=try_again&task_set=spider"
    last = -(-count // 50)
    return {
        "overview": "/s/0",
        "list: all, newest": "/s/0/episodes",
        f"list: all, page {last // 2}": f"/s/0/episodes?page={last // 2}",
        "list: all, last page by reward": f"/s/0/episodes?sort=reward&page={last}",
        "list: a cell": f"/s/0/episodes?{cell}",
        "list: a cell, unsolved, by reward": f"/s/0/episodes?{cell}&success=no&sort=reward-asc",
        "list: a cell, page 40 by tokens": f"/s/0/episodes?{cell}&sort=tokens&page=40",
        "list: infra failures": "/s/0/episodes?failure=infra",
        "list: status and reward range": "/s/0/episodes?status=submitted&min_reward=0.5&max_reward=0.8",
        "list: text in the query": "/s/0/episodes?text=largest%20recent",
        "list: all by tokens, page 1000": "/s/0/episodes?sort=tokens&page=1000",
    }


async def timed(client: aiohttp.ClientSession, path: str) -> float:
    started = time.perf_counter()
    async with client.get(path) as response:
        await response.read()
        assert response.status == 200, (path, response.status)
    return (time.perf_counter() - started) * 1000


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(int(0.95 * len(ordered)), len(ordered) - 1)]


async def measure(outdir: Path, count: int, rounds: int) -> None:
    # The store twice: the second is the other side of the side-by-side page (timed apart).
    server = await asyncio.create_subprocess_exec(sys.executable, "-m", "orchestrator", "view", str(outdir), str(outdir),
                                                  "--port", "0", stdout=asyncio.subprocess.PIPE, cwd=PROJECT_ROOT)
    try:
        assert server.stdout is not None
        base = re.search(r"(http://\S+)/ ", (await server.stdout.readline()).decode()).group(1)
        async with aiohttp.ClientSession(base) as client:
            print(f"  first overview (the report's view computed): {await timed(client, '/s/0'):.0f} ms")
            targets = pages(count)
            times: dict[str, list[float]] = {name: [] for name in targets}
            for _ in range(rounds):
                for name, path in targets.items():
                    times[name].append(await timed(client, path))
            for name, values in times.items():
                print(f"  {name:<40} median {statistics.median(values):7.1f} ms   p95 {p95(values):7.1f} ms")
            episode = [await timed(client, f"/s/0/episodes/{n}") for n in range(1, count, max(1, count // rounds))]
            print(f"  {'an episode (not in the p95 below)':<40} median {statistics.median(episode):7.1f} ms")
            for name, path in (("side by side, every task (first time)", "/compare?a=0&b=1"),
                               ("side by side, every task", "/compare?a=0&b=1"),
                               ("side by side, one cell", "/compare?a=0&b=1&model=openai/gpt-4o-mini&strategy=react"
                                                          "&task_set=mbpp")):
                print(f"  {name + ' (not in the p95)':<40} {await timed(client, path):7.0f} ms")
            await after_a_change(client, outdir)
        print(f"view_p95_ms: {p95([t for values in times.values() for t in values]):.0f}")
    finally:
        server.terminate()
        await server.wait()


async def after_a_change(client: aiohttp.ClientSession, outdir: Path) -> None:
    """The overview right after the store changed (as while a sweep writes): the view is computed again."""
    rng = random.Random(1)
    overview, token, current = [], [], []
    async with Store.open(outdir, sweep="bench-view", identity="bench-view") as store:
        run = await store.start_run(sweep="bench-view", identity="bench-view", sweep_hash="0" * 64, git_sha=None,
                                    config_json="{}")
        for i in range(5):
            await store.add_episode(run, "bench-view", episode(10_000_000 + i, rng))
            stored = time.perf_counter()
            token.append(await timed(client, "/s/0/token"))
            overview.append(await timed(client, "/s/0"))
            while "id=\"behind\"" in await (await client.get("/s/0")).text():
                await asyncio.sleep(0.05)
            current.append((time.perf_counter() - stored) * 1000)
    print(f"  change token (polled every second by open pages): median {statistics.median(token):.1f} ms")
    print(f"  overview right after a change (progress current, statistics of the last view): "
          f"median {statistics.median(overview):.0f} ms")
    print(f"  statistics current again after:             median {statistics.median(current):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20, help="requests of each page")
    parser.add_argument("--store", type=Path, help="keep the store in DIR (built when DIR has none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-view-") as scratch:
        outdir = args.store or Path(scratch) / "out"
        if not (outdir / "results.db").is_file():
            rate = asyncio.run(build(outdir, args.episodes))
            print(f"built {args.episodes:,} episodes through the store's writer ({rate:,.0f}/s)")
        asyncio.run(measure(outdir, args.episodes, args.rounds))


if __name__ == "__main__":
    main()
