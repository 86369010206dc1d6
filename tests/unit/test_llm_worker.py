"""The LLM worker processes: calls spread over them, a worker that dies mid-call, a cancelled call,
closing, calls made before they are up, and a parent killed with SIGKILL. Real processes, real
litellm, the scripted server over real HTTP."""

from __future__ import annotations

import asyncio
import os
import select
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


async def test_calls_spread_a_killed_workers_call_is_retried_and_close_ends_every_worker() -> None:
    """One transport of two workers through its life: calls spread over both; a worker killed with a
    call in flight costs that call one retry (a connection error, never the model's), and the worker
    is started again; closing ends every worker, the new one too."""
    async with ScriptedLLMServer(ServerConfig(latency=0.3)) as server:
        transport = WorkerTransport(2)
        client = LLMClient([ModelSpec(name=MODEL, api_base=f"{server.base_url}/v1", api_key="k")],
                           retry=FAST, transport=transport)
        await transport.start()
        pids = _pids(transport)
        results = await asyncio.gather(*(client.complete(MODEL, USER) for _ in range(20)))
        assert [r.text for r in results] == ["OK"] * 20 and len(server.requests) == 20
        assert len(set(pids)) == 2 and os.getpid() not in pids

        server.config.latency = 0.5
        before = server.arrived
        call = asyncio.create_task(client.complete(MODEL, USER))
        while server.arrived == before:  # at the provider, which answers after 0.5 s
            await asyncio.sleep(0.02)
        killed = next(w for w in transport._workers if w.pending)  # noqa: SLF001
        assert killed.process is not None
        os.kill(killed.process.pid, signal.SIGKILL)
        result = await call
        assert result.text == "OK" and result.usage.attempts == 2
        assert client.stats(MODEL).retries == 1 and len(server.requests) == 22
        deadline = time.monotonic() + 60
        while not (killed.alive and killed.ready is not None and killed.ready.done()):  # started again
            assert time.monotonic() < deadline, "the killed worker was not started again"
            await asyncio.sleep(0.05)
        again = _pids(transport)
        assert len(set(again)) == 2 and set(again) != set(pids)
        await client.aclose()
    assert not any(_alive(pid) for pid in {*pids, *again})


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
from agents.llm import LLMClient, ModelSpec
from agents.llm.server import ScriptedLLMServer
from agents.llm.transport import WorkerTransport

async def main():
    async with ScriptedLLMServer() as server:
        transport = WorkerTransport(2)
        client = LLMClient([ModelSpec(name="openai/early", api_base=f"{server.base_url}/v1", api_key="k")],
                           transport=transport)
        answer = (await client.complete("openai/early", [{"role": "user", "content": "hi"}])).text
        up = any(w.ready.done() for w in transport._workers)
        print(answer, up, "litellm" in sys.modules, "openai" in sys.modules, flush=True)
        print(" ".join(str(w.process.pid) for w in transport._workers), flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


def _lines(process: subprocess.Popen[bytes], count: int, timeout: float) -> list[str]:
    """The first `count` lines `process` prints, within `timeout` s (AssertionError past it, or when
    it exits first, with the end of its stderr)."""
    assert process.stdout is not None and process.stderr is not None
    out, deadline = b"", time.monotonic() + timeout
    while out.count(b"\n") < count:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([process.stdout], [], [], max(left, 0))
        chunk = os.read(process.stdout.fileno(), 4096) if ready else b""
        if not chunk:
            process.kill()
            process.wait()
            why = "exited" if ready else f"printed nothing more within {timeout:g} s"
            raise AssertionError(f"the parent {why}: {out!r}\n{process.stderr.read().decode()[-2000:]}")
        out += chunk
    return out.decode().splitlines()[:count]


def test_an_early_call_waits_for_the_workers_the_parent_never_imports_litellm_and_its_workers_die_with_it() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        answer, line = _lines(parent, 2, timeout=120)
        # answered by a worker, once it was up; litellm and openai only ever in the workers
        assert answer.split() == ["OK", "True", "False", "False"], answer
        pids = [int(pid) for pid in line.split()]
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
        for stream in (parent.stdout, parent.stderr):
            if stream is not None:
                stream.close()


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
