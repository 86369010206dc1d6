"""`just bench-llm`: 200 concurrent Try Again episodes against a rate-limited scripted provider.

The local server accepts 600 requests per sliding minute and answers each in 200 ms; the client
is told the same limit, so it should pace itself instead of collecting 429s. Every answer is a
wrong SQL query, so each episode spends all its turns. Measured: accepted requests per minute
over the steady middle of the run as a share of 600, the share of requests answered 429, and
episodes that ended in an error. Ends with one `name: value` line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections import Counter

from pydantic import SecretStr

from agents.base import EpisodeOutcome, Model, Strategy, get_strategy
from agents.llm import LLMClient, ModelLimits, ModelSpec
from agents.llm.server import ScriptedLLMServer, ServerConfig
from agents.models import LLMModel
from environments import make_environment
from environments.runtime import Runtime
from foundation.logs import configure
from tasks import Task, load_tasks

MODEL = "openai/scripted-bench"
WRONG = "I will look at the data first.\n```sql\nSELECT 1\n```"  # never the answer: every turn is spent


async def episode(runtime: Runtime, strat: Strategy, task: Task, model: Model, max_turns: int) -> EpisodeOutcome:
    try:
        async with make_environment(task.kind, runtime) as env:
            return await strat.run(env, task, model, max_turns=max_turns)
    except Exception as exc:  # noqa: BLE001 — a lost episode is what we count, with its reason
        return EpisodeOutcome(task.id, status="model_error", error=f"{type(exc).__name__}: {exc}")


def steady_rpm(stamps: list[float], trim: float = 0.1) -> float:
    """Accepted requests per minute between the 10th and 90th percentile of their arrival times."""
    stamps = sorted(stamps)
    lo, hi = int(len(stamps) * trim), int(len(stamps) * (1 - trim)) - 1
    if hi <= lo or stamps[hi] == stamps[lo]:
        return 0.0
    return (hi - lo) / (stamps[hi] - stamps[lo]) * 60


async def main(args: argparse.Namespace) -> None:
    tasks = list(itertools.islice(itertools.cycle(load_tasks("starter-sql")), args.episodes))
    config = ServerConfig(rpm=args.rpm, latency=args.latency, default_answer=WRONG)
    async with ScriptedLLMServer(config) as server, Runtime.open() as runtime:
        # burst 1: a full bucket at the start would put rpm + rpm/60 requests into the server's first minute
        limits = ModelLimits(rpm=args.rpm, burst=1, max_concurrency=32)
        client = LLMClient([ModelSpec(name=MODEL, api_base=f"{server.base_url}/v1", api_key=SecretStr("local-bench"),
                                      limits=limits)])
        model, strat = LLMModel(client, MODEL), get_strategy("try_again")
        print(f"LLM benchmark: {args.episodes} episodes x {args.max_turns} turns, strategy {strat.name}, "
              f"server {args.rpm} rpm / {args.latency * 1e3:.0f} ms")
        start = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            jobs = [group.create_task(episode(runtime, strat, t, model, args.max_turns)) for t in tasks]
        elapsed = time.perf_counter() - start
    report([job.result() for job in jobs], server, client, elapsed, args.rpm)


def report(outcomes: list[EpisodeOutcome], server: ScriptedLLMServer, client: LLMClient, elapsed: float,
           rpm: int) -> None:
    statuses = Counter(o.status for o in outcomes)
    accepted = [r.at for r in server.requests if r.status == 200]
    limited = sum(r.status == 429 for r in server.requests)
    achieved = steady_rpm(accepted)
    stats = client.stats(MODEL)
    lost = [o for o in outcomes if o.error is not None or o.status == "model_error"]
    print(f"  {'requests seen by the server':<34} {len(server.requests)}")
    print(f"  {'answered 200 / 429':<34} {len(accepted)} / {limited}")
    print(f"  {'client retries / failures':<34} {stats.retries} / {stats.failed}")
    print(f"  {'episodes by status':<34} {dict(statuses)}")
    print(f"  {'wall time':<34} {elapsed:.1f} s")
    print(f"  {'steady accepted rpm':<34} {achieved:.1f} of {rpm}")
    for o in lost[:5]:
        print(f"  lost {o.task_id}: {o.error}")
    print()
    print(f"rpm_share: {achieved / rpm:.3f}")
    print(f"share_429: {limited / max(1, len(server.requests)):.4f}")
    print(f"episodes_lost: {len(lost)}")


if __name__ == "__main__":
    configure(0)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--rpm", type=int, default=600, help="the server's limit, and the client's")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per answered request")
    asyncio.run(main(parser.parse_args()))
