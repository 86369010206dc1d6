"""The engine's gate (foundation/engine_gate.py): while one holder releases a container's network,
no other holder does, in this process or another one on the same engine; another engine's holders
do not wait. Each holder writes "enter" and "leave" to one file: exclusion means the lines pair up."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import aiodocker
import pytest

from foundation.engine_gate import gate_path, releasing_network
from foundation.engine import EngineSettings, engine_settings
from foundation.errors import EngineStalled

HOLDER = """
import asyncio, os, sys
import aiodocker
from foundation.engine_gate import releasing_network

async def main(log, times):
    docker = aiodocker.Docker(url="unix:///nonexistent/gate-test.sock")
    try:
        async def hold(n):
            for _ in range(times):
                async with releasing_network(docker):
                    with open(log, "a") as out:
                        out.write(f"enter {os.getpid()}-{n}\\n")
                    await asyncio.sleep(0.003)
                    with open(log, "a") as out:
                        out.write(f"leave {os.getpid()}-{n}\\n")
        await asyncio.gather(*(hold(n) for n in range(3)))
    finally:
        await docker.close()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def _paired(lines: list[str]) -> bool:
    """Every "enter X" is followed by "leave X" before anyone else enters."""
    return all(a.split()[0] == "enter" and b == f"leave {a.split()[1]}" for a, b in zip(lines[::2], lines[1::2]))


def _holders(log: Path, host: str, count: int) -> list[subprocess.Popen[bytes]]:
    env = {"DOCKER_HOST": host, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[2])}
    return [subprocess.Popen([sys.executable, "-c", HOLDER, str(log), "8"], env=env) for _ in range(count)]


def test_holders_in_two_processes_and_three_tasks_each_never_overlap(tmp_path: Path) -> None:
    log, host = tmp_path / "log", f"unix:///nonexistent/{uuid.uuid4().hex}.sock"
    procs = _holders(log, host, 2)
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    lines = log.read_text().splitlines()
    assert len(lines) == 2 * 3 * 8 * 2
    assert _paired(lines), "two holders were inside the gate at once:\n" + "\n".join(lines[:20])
    gate_path(host).unlink(missing_ok=True)


def test_the_pairing_check_sees_an_overlap() -> None:
    assert _paired(["enter a", "leave a", "enter b", "leave b"])
    assert not _paired(["enter a", "enter b", "leave a", "leave b"])


def test_another_engine_s_holder_does_not_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process holding one engine's gate leaves another engine's free."""
    busy, free = (f"unix:///nonexistent/{uuid.uuid4().hex}.sock" for _ in range(2))

    async def main() -> None:
        docker = aiodocker.Docker(url="unix:///nonexistent/gate-test.sock")
        try:
            monkeypatch.setenv("DOCKER_HOST", busy)
            async with releasing_network(docker):
                monkeypatch.setenv("DOCKER_HOST", free)
                other = aiodocker.Docker(url="unix:///nonexistent/gate-test.sock")
                try:
                    async with asyncio.timeout(30), releasing_network(other):
                        pass
                finally:
                    await other.close()
        finally:
            await docker.close()

    asyncio.run(main())
    for host in (busy, free):
        gate_path(host).unlink(missing_ok=True)


def test_after_a_holder_s_call_stalls_its_queue_fails_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A half-hung engine answers no removal: the holder's call passes its deadline (EngineStalled),
    and the removals queued behind it fail at once (EngineLost, not tried: the engine's outage and
    the next start deal with them) instead of each waiting out a deadline of its own, one after
    another (a pool of 60 closing for an hour)."""
    monkeypatch.setenv("DOCKER_HOST", f"unix:///nonexistent/{uuid.uuid4().hex}.sock")

    async def main() -> list[str]:
        docker = aiodocker.Docker(url="unix:///nonexistent/gate-test.sock")
        try:
            async def stalls() -> None:
                async with releasing_network(docker):
                    await asyncio.sleep(0.2)
                    raise EngineStalled("the engine stopped answering (the test's removal)")

            async def queued() -> None:
                async with releasing_network(docker):
                    raise AssertionError("a removal queued behind a stalled one was tried")

            first = asyncio.create_task(stalls())
            await asyncio.sleep(0.05)  # the first holds the gate
            results = await asyncio.gather(first, *(queued() for _ in range(5)), return_exceptions=True)
            async with releasing_network(docker):  # one that comes later is tried again
                pass
            return [type(r).__name__ for r in results]
        finally:
            await docker.close()

    assert asyncio.run(main()) == ["EngineStalled"] + ["EngineLost"] * 5


def test_a_gate_held_by_another_process_past_the_deadline_fails_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process stopped while it held the gate (Ctrl-Z, SIGSTOP) never lets go: the wait ends at
    the engine call's deadline with GateHeld, and the queue behind it fails at once."""
    host = f"unix:///nonexistent/{uuid.uuid4().hex}.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_FOR_EVER, str(gate_path(host))], stdout=subprocess.PIPE,
                              text=True)

    async def main() -> list[str]:
        docker = aiodocker.Docker(url="unix:///nonexistent/gate-test.sock")
        try:
            async def waits() -> None:
                async with releasing_network(docker):
                    raise AssertionError("entered a gate another process holds")

            with engine_settings(EngineSettings(call_timeout=0.5)):
                results = await asyncio.gather(*(waits() for _ in range(4)), return_exceptions=True)
            return [type(r).__name__ for r in results]
        finally:
            await docker.close()

    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert asyncio.run(main()) == ["GateHeld"] + ["EngineLost"] * 3
    finally:
        holder.kill()
        holder.communicate()
        gate_path(host).unlink(missing_ok=True)


HOLD_FOR_EVER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""
