"""A long replay says what it is doing at least every EVERY seconds, also while one step (finding
4,000 episodes' tasks on a loaded machine: 18 s once) goes on without an episode to count."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from orchestrator.fidelity.replay_cli import Progress


class Quick(Progress):
    EVERY = 0.05


async def test_a_step_that_goes_on_is_said_again(tmp_path: Path, capsys) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * Progress.LARGE)  # a large input: its steps are announced
    progress = Quick([big])
    progress.step("finding their tasks and images")
    beat = asyncio.get_running_loop().create_task(progress.beat())
    lines: list[str] = []
    try:
        for _ in range(200):  # until it has said it twice more (at most 10 s)
            await asyncio.sleep(0.05)
            lines += capsys.readouterr().err.splitlines()
            if len(lines) >= 3:
                break
    finally:
        beat.cancel()
        await asyncio.gather(beat, return_exceptions=True)
    assert lines[0].endswith("] finding their tasks and images")
    assert all(re.fullmatch(r"\[\d+ s\] still finding their tasks and images", line) for line in lines[1:3]), lines


async def test_while_replaying_the_beat_counts_the_episodes(tmp_path: Path, capsys) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * Progress.LARGE)
    progress = Quick([big])
    progress.replaying(4000)
    progress.episode_done()
    beat = asyncio.get_running_loop().create_task(progress.beat())
    lines: list[str] = []
    try:
        for _ in range(200):
            await asyncio.sleep(0.05)
            lines += capsys.readouterr().err.splitlines()
            if any("still" in line or "replayed" in line for line in lines):
                break
    finally:
        beat.cancel()
        await asyncio.gather(beat, return_exceptions=True)
    said = [line for line in lines if "still" in line or "replayed" in line]
    assert said and re.fullmatch(r"\[\d+ s\] replayed 1/4,000 episodes", said[0]), lines
