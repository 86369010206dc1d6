"""The LLM worker processes: a worker that dies mid-call, a cancelled call, closing, and a parent
killed with SIGKILL. Real processes, real litellm, the scripted server over real HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.llm import LLMClient, ModelError, ModelSpec, RetryPolicy
from agents.llm.server import ScriptedLLMServer, ServerConfig
from agents.llm.transport import Request, WorkerTransport
from tests.conftest import Lent

MODEL = "openai/worker-test"
USER = [{"role": "user", "content": "hello"}]
FAST = RetryPolicy(initial_backoff=0.05, max_backoff=0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its entry is left for its parent to collect.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _pids(transport: WorkerTransport) -> list[int]:
    return [w.process.pid for w in transport._workers if w.process is not None]  # noqa: SLF001


async def test_calls_spread_over_the_workers_and_close_ends_them() -> None:
    async with ScriptedLLMServer(ServerConfig(latency=0.3)) as server:
        transport = WorkerTransport(2)
        client = LLMClient([ModelSpec(name=MODEL, api_base=f"{server.base_url}/v1", api_key="k")], transport=transport)
        await transport.start()
        pids = _pids(transport)
        results = await asyncio.gather(*(client.complete(MODEL, USER) for _ in range(20)))
        await client.aclose()
    assert [r.text for r in results] == ["OK"] * 20 and len(server.requests) == 20
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert not any(_alive(pid) for pid in pids)


async def test_a_worker_killed_mid_call_is_a_retried_connection_error() -> None:
    async with ScriptedLLMServer(ServerConfig(latency=0.5)) as server:
        transport = WorkerTransport(1)
        client = LLMClient([ModelSpec(name=MODEL, api_base=f"{server.base_url}/v1", api_key="k")],
                           retry=FAST, transport=transport)
        await transport.start()
        first = _pids(transport)[0]
        call = asyncio.create_task(client.complete(MODEL, USER))
        while not server.arrived:  # at the provider, which answers after 0.5 s
            await asyncio.sleep(0.02)
        os.kill(first, signal.SIGKILL)
        result = await call
        second = _pids(transport)[0]
        await client.aclose()
    assert result.text == "OK" and result.usage.attempts == 2
    assert second != first and client.stats(MODEL).retries == 1 and len(server.requests) == 2


async def test_a_cancelled_call_leaves_the_worker_serving(llm_worker: WorkerTransport) -> None:
    async with ScriptedLLMServer(ServerConfig(latency=1.0)) as server:
        client = LLMClient([ModelSpec(name=MODEL, api_base=f"{server.base_url}/v1", api_key="k")],
                           transport=Lent(llm_worker))
        slow = asyncio.create_task(client.complete(MODEL, USER))
        while not server.arrived:  # at the provider
            await asyncio.sleep(0.02)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert llm_worker._workers[0].pending == {}  # noqa: SLF001
        server.config.latency = 0.0
        assert (await client.complete(MODEL, USER)).text == "OK"
        await client.aclose()


async def test_errors_keep_their_kind_and_lose_the_key(llm_worker: WorkerTransport) -> None:
    key = "sk-worker-SECRET-77aa11"
    async with ScriptedLLMServer(ServerConfig(rejected_keys={key})) as server:
        client = LLMClient([ModelSpec(name=MODEL, api_base=f"{server.base_url}/v1", api_key=key)],
                           transport=Lent(llm_worker))
        with pytest.raises(ModelError) as caught:
            await client.complete(MODEL, USER)
        await client.aclose()
    assert caught.value.kind == "auth" and caught.value.status == 401 and caught.value.model == MODEL
    assert key not in str(caught.value) and key not in repr(caught.value.__dict__)
    assert key not in repr(Request(model=MODEL, messages=USER, params={}, api_key=key))


PARENT = """
import asyncio, sys
from agents.llm.transport import Request, WorkerTransport

async def main():
    transport = WorkerTransport(2)
    await transport.start()
    print(" ".join(str(w.process.pid) for w in transport._workers), flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_workers_exit_when_their_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(pid) for pid in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


EARLY_CALLER = """
import asyncio, sys
from agents.llm import LLMClient, ModelSpec
from agents.llm.server import ScriptedLLMServer
from agents.llm.transport import WorkerTransport

async def main():
    async with ScriptedLLMServer() as server:
        transport = WorkerTransport(1)
        client = LLMClient([ModelSpec(name="openai/early", api_base=f"{server.base_url}/v1", api_key="k")],
                           transport=transport)
        answer = (await client.complete("openai/early", [{"role": "user", "content": "hi"}])).text
        up = transport._workers[0].ready.done()
        await client.aclose()
    print(answer, up, "litellm" in sys.modules, "openai" in sys.modules)

asyncio.run(main())
"""


def test_calls_before_the_workers_are_up_wait_for_them_and_this_process_never_imports_litellm() -> None:
    run = subprocess.run([sys.executable, "-c", EARLY_CALLER], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["OK", "True", "False", "False"]  # answered by the worker, once it was up


CANCELLER = """
import asyncio, gc
from agents.llm.server import ScriptedLLMServer, ServerConfig
from agents.llm.transport import InProcessTransport, Request
import agents.llm._litellm  # the project's one import of litellm, before the freeze
gc.freeze()  # litellm's import kept out of each gc.collect() below (0.15 s apiece), which still sees every call's objects

async def main():
    async with ScriptedLLMServer(ServerConfig(latency=0.2)) as server:
        transport = InProcessTransport()
        for i in range(24):
            call = asyncio.create_task(transport.call(Request(
                model="openai/cancelled", messages=[{"role": "user", "content": "hi"}], params={},
                api_base=f"{server.base_url}/v1", api_key="k")))
            for _ in range(i % 4):  # cancelled at each point of litellm's hand-off to its thread
                await asyncio.sleep(0)
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            await asyncio.sleep(0.02)
            gc.collect()
    print("requests", len(server.requests), flush=True)

asyncio.run(main())
"""


def test_cancelled_in_process_calls_print_no_warning() -> None:
    """Ctrl-C or a full disk cancels calls mid-way: the user sees our one line, not Python's warnings."""
    done = subprocess.run([sys.executable, "-c", CANCELLER], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "default"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("requests ")  # the calls got as far as the provider
    assert "never awaited" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
