"""`./dev bench-agents`: what bringing an agent costs, measured side by side in one run.

1. The gateway's per-call overhead: the same model (the oracle: it answers at once, so what is
   measured is the way to it) called directly, as a strategy calls it, and through the gateway over
   HTTP on the loopback (aiohttp's client, and the OpenAI SDK's), alternated, `--calls` each; p50 and
   p95, and the gateway's own overhead at p50 (`gateway_overhead_p50_ms`).
2. Installed against built-in: sweeps of the oracle over the starter Bash tasks (`--epochs` each) with
   the `tools` strategy and with mini-swe-agent installed in the containers (examples/installed-agent),
   alternated; episodes/s and the ratio (`installed_eps_ratio`). mini-swe-agent starts a Python
   process that imports litellm for every episode: that, not the gateway, is most of its time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import openai

from agents.gateway import LLMGateway
from agents.models import OracleModel
from agents.strategies.external import ModelHandle
from foundation.settings import PROJECT_ROOT
from tasks import load_tasks

EXAMPLE = PROJECT_ROOT / "examples" / "installed-agent" / "sweep.toml"
MESSAGES = [{"role": "system", "content": "You act in a Linux container."}, {"role": "user", "content": "Count the lines."}]


async def direct(handle: ModelHandle, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await handle.complete(MESSAGES)
        times.append(time.perf_counter() - start)
    return times


async def over_http(url: str, token: str, calls: int) -> list[float]:
    times = []
    async with aiohttp.ClientSession() as session:
        for _ in range(calls):
            start = time.perf_counter()
            async with session.post(f"{url}/chat/completions", json={"model": "x", "messages": MESSAGES},
                                    headers={"Authorization": f"Bearer {token}"}) as response:
                await response.json()
            times.append(time.perf_counter() - start)
    return times


async def over_sdk(url: str, token: str, calls: int) -> list[float]:
    times = []
    async with openai.AsyncOpenAI(base_url=url, api_key=token, max_retries=0) as client:
        for _ in range(calls):
            start = time.perf_counter()
            await client.chat.completions.create(model="x", messages=MESSAGES)  # type: ignore[arg-type]
            times.append(time.perf_counter() - start)
    return times


async def gateway_figures(calls: int, rounds: int) -> None:
    task = load_tasks("starter-bash")[0]
    found: dict[str, list[float]] = {"direct": [], "gateway": [], "gateway+sdk": []}
    async with LLMGateway.serve() as gateway:
        handle = ModelHandle(OracleModel(), task)
        door = gateway.open(handle)
        url, token = door.access.openai_base_url, door.access.api_key
        await over_http(url, token, 50)  # warm: connections, imports
        await over_sdk(url, token, 50)
        for _ in range(rounds):
            found["direct"] += await direct(handle, calls)
            found["gateway"] += await over_http(url, token, calls)
            found["gateway+sdk"] += await over_sdk(url, token, calls)
        door.close()
    p50 = {name: statistics.median(times) * 1000 for name, times in found.items()}
    for name, times in found.items():
        p95 = statistics.quantiles(times, n=20)[18] * 1000
        print(f"{name:<12} p50 {p50[name]:.3f} ms, p95 {p95:.3f} ms over {len(times)} calls")
    print(f"gateway_overhead_p50_ms: {p50['gateway'] - p50['direct']:.3f}")
    print(f"gateway_sdk_overhead_p50_ms: {p50['gateway+sdk'] - p50['direct']:.3f}")


def sweep_seconds(strategy: str, epochs: int, work: Path) -> tuple[float, int]:
    text = EXAMPLE.read_text().split("[[models]]")[0]
    text = text.replace('strategies = ["tools", "mini-swe-agent"]', f'strategies = ["{strategy}"]')
    if strategy != "mini-swe-agent":
        text = text.split("[[agents]]")[0]
    out = work / f"{strategy}-{time.monotonic_ns()}"
    text = text.replace('output = "runs/installed-agent"', f'output = "{out}"')
    path = work / f"{strategy}.toml"
    text = text.replace("max_turns = 6\n", f"max_turns = 6\nepochs = {epochs}\nconcurrency = 4\n")
    path.write_text(text + '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "starter-bash"\n')
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "orchestrator", "sweep", str(path), "--quiet",
                           "--no-report"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"error: the {strategy} sweep exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, 5 * epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per side and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4, help="epochs of the starter Bash tasks per sweep")
    parser.add_argument("--sweep-rounds", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(gateway_figures(args.calls, args.rounds))
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as directory:
        work = Path(directory)
        sweep_seconds("mini-swe-agent", 1, work)  # untimed: builds and copies out its layer once
        rates: dict[str, list[float]] = {"tools": [], "mini-swe-agent": []}
        for r in range(args.sweep_rounds):
            for strategy in (("tools", "mini-swe-agent") if r % 2 == 0 else ("mini-swe-agent", "tools")):
                seconds, episodes = sweep_seconds(strategy, args.epochs, work)
                rates[strategy].append(episodes / seconds)
                print(f"[{strategy}] {episodes} episodes in {seconds:.1f} s: {episodes / seconds:.2f}/s", flush=True)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"tools_eps: {medians['tools']:.2f}")
    print(f"installed_eps: {medians['mini-swe-agent']:.2f}")
    print(f"installed_eps_ratio: {medians['mini-swe-agent'] / medians['tools']:.3f}")


if __name__ == "__main__":
    main()
