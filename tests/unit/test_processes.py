"""A command past its test's time is asked where it waits, then killed, and the test says where
(tests/processes.py over foundation/stacks.py, for real: a process of its own)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from foundation.settings import PROJECT_ROOT
from tests.processes import ended

STUCK = """
import argparse, asyncio, sys
from pathlib import Path
from foundation.logs import logging_to_file
from orchestrator.cli import _run_cancellable

async def waits_for_ever(args):
    print("ready", flush=True)
    await asyncio.Event().wait()

with logging_to_file(Path(sys.argv[1]), console=False):
    asyncio.run(_run_cancellable(waits_for_ever, argparse.Namespace()))
"""


def test_a_command_past_its_time_is_asked_for_its_stacks_and_killed(tmp_path):
    log = tmp_path / "stuck.log"
    process = subprocess.Popen([sys.executable, "-c", STUCK, str(log)], cwd=PROJECT_ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    with pytest.raises(AssertionError) as failed:
        ended(process, 0.2, log=log)
    assert process.returncode == -9  # killed, not left behind
    message = str(failed.value)
    assert "did not finish within 0.2 s" in message
    assert "in waits_for_ever" in message.split("--- its stacks ---", 1)[1], message
