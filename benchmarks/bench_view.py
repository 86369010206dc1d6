"""`./dev bench-view`: the viewer over a store of 100,000 episodes with transcripts, page latency over HTTP.

Builds the store through the sweep's own writer (`orchestrator.store.Store`: one transaction per
episode, turns, LLM calls and the transcript included): every episode a Try Again dialogue of 10
turns as the strategy builds it (its prompts, its window of the last 10 turns, observations
clipped), so the store's size per episode is a real one. Starts `python -m orchestrator view` on
it as its own process (the store twice: the second is the other side of the side-by-side pages),
waits until the full-text index is built (its time and size are printed), then requests each page
one at a time with aiohttp's client: the overview, lists (first and deep pages, filters, sorts), an
episode (its transcript), a task across the store, two episodes side by side, and searches (a
list's words, the search of every store). Prints each page's median and p95, the store's bytes
per episode, and last `view_p95_ms:` over every page but the searches and `search_p95_ms:` over the
searches. The first overview (the report's view computed, then cached until the store changes) and
the overview right after an episode is stored are printed apart.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import aiohttp

from agents.strategies.turns import DIALOGUE_LIMIT, Dialogue, clip, prompt
from foundation.settings import PROJECT_ROOT
from environments.kind import kind_spec
from orchestrator.store import EpisodeKey, EpisodeRecord, LLMCall, Store, TurnRecord
from orchestrator.store.transcript import Transcript

BASH = kind_spec("bash")  # the kind whose prompts the stored episodes use

MODELS, STRATEGIES = ("openai/gpt-4o-mini", "anthropic/claude-haiku"), ("try_again", "react")
TASK_SETS = ("nl2bash-fs1", "nl2bash-fs2", "spider", "mbpp", "ctf")
STATUSES = ("solved", "submitted", "max_turns", "model_error", "timeout", "infra_error", "budget_exhausted")
FAILURE = {"model_error": "model", "timeout": "task", "infra_error": "infra"}
WORDS = ("list find count files under directory sort unique lines print size largest recent query table "
         "permission owner modified archive compress hidden symbolic link bytes").split()
TURNS = 10
OBSERVATIONS = 4000  # distinct observations the episodes draw from (making each anew dominated the build)


def observations(rng: random.Random) -> list[str]:
    """Listings of 1-60 paths, as `find` prints them."""
    return ["\n".join(f"./dir{k % 10}/{rng.choice(WORDS)}_{j}.py" for j in range(rng.randint(1, 60)))
            for k in range(OBSERVATIONS)]


def episode(i: int, rng: random.Random, pool: list[str]) -> EpisodeRecord:
    """Episode i: a cell by i, a status at random, 10 turns of a Try Again dialogue with texts of
    realistic length, and its transcript as the sweep records it."""
    cell = i % (len(MODELS) * len(STRATEGIES) * len(TASK_SETS))
    model, rest = MODELS[cell % 2], cell // 2
    strategy, task_set = STRATEGIES[rest % 2], TASK_SETS[rest // 2]
    status = rng.choices(STATUSES, weights=(40, 25, 25, 3, 3, 2, 2))[0]
    rewards = [round(rng.random() * 0.9, 2) for _ in range(TURNS)]
    if status == "solved":
        rewards[-1] = 1.0
    query = " ".join(rng.choices(WORDS, k=rng.randint(8, 30)))
    turns, transcript = dialogue(query, rewards, rng, pool)
    calls = [LLMCall(model, model.split("/")[1], rng.randint(300, 3000), rng.randint(20, 400), rng.random() * 3, 1,
                     rng.random() / 1000) for _ in rewards]
    return EpisodeRecord(EpisodeKey(model, strategy, task_set, f"{task_set}/{i // 20}", 0), "bash", task_set, i // 20,
                         query, "find . -name '*.py'", f"intercode/{task_set}", TURNS, 1.7e9 + i, 1.7e9 + i + 2, status,
                         FAILURE.get(status), "an error" if status in FAILURE else None, 1, "sha256:" + "ab" * 32,
                         turns, calls, transcript=transcript)


def dialogue(query: str, rewards: list[float], rng: random.Random, pool: list[str]) -> tuple[list[TurnRecord], Transcript]:
    """The turns and transcript of a Try Again episode (the strategy's own prompts and window)."""
    system = prompt("system", BASH, reward_note=", with a reward between 0 and 1 that says how close you are")
    talk = Dialogue([{"role": "system", "content": system},
                     {"role": "user", "content": prompt("query", BASH, query=query)}], DIALOGUE_LIMIT)
    transcript, turns = Transcript(), []
    for k, reward in enumerate(rewards):
        word = rng.choice(WORDS)
        output = f"Thought: look for the {word} files first.\n```bash\nfind . -name '*{word}*' | head -{k + 5}\n```"
        transcript.record(talk.window(), {"role": "assistant", "content": output}, None, {"finish_reason": "stop"})
        talk.add("assistant", output)
        observation = rng.choice(pool)
        turns.append(TurnRecord(output, f"find . -name '*{word}*' | head -{k + 5}", observation, reward, True,
                                {"file_changes": 0.33, "file_contents": round(reward / 3, 2), "output_similarity": 0.1}))
        talk.add("user", prompt("observation", BASH, observation=clip(observation), reward_line=f"Reward: {reward}\n",
                                query=query))
    return turns, transcript


async def build(outdir: Path, count: int) -> float:
    """Write `count` episodes through the store's writer; returns episodes per second."""
    rng = random.Random(0)
    pool = observations(rng)
    started = time.perf_counter()
    async with Store.open(outdir, sweep="bench-view", identity="bench-view") as store:
        run = await store.start_run(sweep="bench-view", identity="bench-view", sweep_hash="0" * 64, git_sha=None,
                                    config_json="{}")
        for start in range(0, count, 500):  # the writer's thread takes them in order; 500 awaited at a time
            await asyncio.gather(*(store.add_episode(run, "bench-view", episode(i, rng, pool))
                                   for i in range(start, min(start + 500, count))))
    return count / (time.perf_counter() - started)


def pages(count: int, rng: random.Random) -> dict[str, str]:
    """The pages of one round (the episodes and tasks asked for change every round)."""
    cell = "model=openai/gpt-4o-mini&strategy=try_again&task_set=spider"
    last = -(-count // 50)
    some = rng.randint(1, count)
    deep = min(40, -(-count // 20 // 50))  # a cell's page 40 (its last, in a smaller store)
    return {
        "overview": "/s/0",
        "list: all, newest": "/s/0/episodes",
        f"list: all, page {last // 2}": f"/s/0/episodes?page={last // 2}",
        "list: all, last page by reward": f"/s/0/episodes?sort=reward&page={last}",
        "list: a cell": f"/s/0/episodes?{cell}",
        "list: a cell, unsolved, by reward": f"/s/0/episodes?{cell}&success=no&sort=reward-asc",
        f"list: a cell, page {deep} by tokens": f"/s/0/episodes?{cell}&sort=tokens&page={deep}",
        "list: infra failures": "/s/0/episodes?failure=infra",
        "list: status and reward range": "/s/0/episodes?status=submitted&min_reward=0.5&max_reward=0.8",
        f"list: all by status, page {min(1000, last)}": f"/s/0/episodes?sort=status&page={min(1000, last)}",
        f"list: all by tokens, page {min(1000, last)}": f"/s/0/episodes?sort=tokens&page={min(1000, last)}",
        "an episode (its transcript)": f"/s/0/episodes/{some}",
        "an episode, neighbours in a cell by reward": f"/s/0/episodes/{some}?{cell}&sort=reward",
        "a task in every cell and epoch": f"/s/0/task?task_id=spider/{rng.randint(0, count // 20 - 1)}",
        "two episodes side by side": f"/compare/pair?a=0&b=1&ea={some}&eb={some}&model=openai/gpt-4o-mini",
        "side by side, a cell's pairs": "/compare?a=0&b=1&model=openai/gpt-4o-mini&strategy=react&task_set=mbpp",
    }


def searches(rng: random.Random) -> dict[str, str]:
    word, other = rng.choice(WORDS), rng.choice(WORDS)
    return {
        "search: a word in every episode": "/s/0/episodes?text=find",
        "search: two words": f"/s/0/episodes?text={word}%20{other}",
        "search: a phrase, in a cell": f'/s/0/episodes?text=%22dir3/{word}%22&model=openai/gpt-4o-mini&strategy=react',
        "search: a rare path, by reward": f"/s/0/episodes?text=dir9/{word}_59&sort=reward",
        "search: every store, two words": f"/search?text={word}%20{other}",
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
    # The store twice: the second is the other side of the side-by-side pages.
    cache = Path(tempfile.mkdtemp(prefix="bench-view-cache-"))  # a fresh index: its build is timed
    server = await asyncio.create_subprocess_exec(sys.executable, "-m", "orchestrator", "view", str(outdir), str(outdir),
                                                  "--port", "0", stdout=asyncio.subprocess.PIPE, cwd=PROJECT_ROOT,
                                                  env={**os.environ, "INTERCODE_CACHE_DIR": str(cache)})
    try:
        assert server.stdout is not None
        started = time.perf_counter()
        base = re.search(r"(http://\S+)/ ", (await server.stdout.readline()).decode()).group(1)
        async with aiohttp.ClientSession(base) as client:
            print(f"  first overview (the report's view computed): {await timed(client, '/s/0'):.0f} ms")
            await indexed(client, started, cache)
            print(f"  side by side, the first time (compare's tests and the pairs computed, then kept): "
                  f"{await timed(client, '/compare?a=0&b=1'):.0f} ms")
            rng = random.Random(2)
            times: dict[str, list[float]] = {}
            found: dict[str, list[float]] = {}
            for _ in range(rounds):
                for table, targets in ((times, pages(count, rng)), (found, searches(rng))):
                    for name, path in targets.items():
                        table.setdefault(name, []).append(await timed(client, path))
            for name, values in (times | found).items():
                print(f"  {name:<44} median {statistics.median(values):7.1f} ms   p95 {p95(values):7.1f} ms")
            await after_a_change(client, outdir)
        print(f"view_p95_ms: {p95([t for values in times.values() for t in values]):.0f}")
        print(f"search_p95_ms: {p95([t for values in found.values() for t in values]):.0f}")
    finally:
        server.terminate()
        await server.wait()


async def indexed(client: aiohttp.ClientSession, started: float, cache: Path) -> None:
    """Wait until the viewer's full-text index covers the store (it is built in the background)."""
    while 'id="index-note"' in await (await client.get("/s/0/episodes?text=find")).text():
        await asyncio.sleep(0.5)
    size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
    print(f"  full-text index built {time.perf_counter() - started:.1f} s after the viewer started; "
          f"{size / 2**20:.0f} MB in the viewer's cache")


async def after_a_change(client: aiohttp.ClientSession, outdir: Path) -> None:
    """The overview right after the store changed (as while a sweep writes): the view is computed again."""
    rng = random.Random(1)
    pool = observations(rng)
    overview, token, current, search = [], [], [], []
    async with Store.open(outdir, sweep="bench-view", identity="bench-view") as store:
        run = await store.start_run(sweep="bench-view", identity="bench-view", sweep_hash="0" * 64, git_sha=None,
                                    config_json="{}")
        for i in range(5):
            await store.add_episode(run, "bench-view", episode(10_000_000 + i, rng, pool))
            stored = time.perf_counter()
            token.append(await timed(client, "/s/0/token"))
            overview.append(await timed(client, "/s/0"))
            while "id=\"behind\"" in await (await client.get("/s/0")).text():
                await asyncio.sleep(0.05)
            current.append((time.perf_counter() - stored) * 1000)
            search.append(await timed(client, "/s/0/episodes?text=find"))  # the index adds the new episode first
    print(f"  change token (polled every second by open pages): median {statistics.median(token):.1f} ms")
    print(f"  overview right after a change (progress current, statistics of the last view): "
          f"median {statistics.median(overview):.0f} ms")
    print(f"  statistics current again after:             median {statistics.median(current):.0f} ms")
    print(f"  a search right after a change (the index catches up): median {statistics.median(search):.0f} ms")


def store_size(outdir: Path) -> str:
    """The store's size per episode, and its transcripts' share (their compressed bodies)."""
    size = sum(f.stat().st_size for f in outdir.glob("results.db*"))
    with closing(sqlite3.connect(outdir / "results.db")) as db:
        count, transcripts = db.execute("SELECT (SELECT count(*) FROM episodes), "
                                        "(SELECT coalesce(sum(length(body)), 0) FROM transcripts)").fetchone()
    return (f"store: {size / 2**20:.0f} MB, {size / count:,.0f} bytes per episode ({TURNS} turns), of which the "
            f"transcript's body {transcripts / count:,.0f}")


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
        print(store_size(outdir))
        asyncio.run(measure(outdir, args.episodes, args.rounds))


if __name__ == "__main__":
    main()
