"""The folders a sweep copies out of an image (the driver's runtime, an installed agent's layer) are
made once and whole: sweeps copying the same one at once each get it complete, and a half-copied
folder left by a kill is made again."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT

from orchestrator.images.agent_layer import RUNTIME_DIR, extract
from orchestrator.images.specs import RUNTIME, get
from tests.conftest import require_image
from tests.processes import ended_async

pytestmark = pytest.mark.docker


async def test_copies_of_one_image_made_at_once_are_each_whole(docker, tmp_path):
    image = await require_image(docker, get(RUNTIME).tag)
    copies = await asyncio.gather(*(extract(docker, image, RUNTIME_DIR, tmp_path) for _ in range(4)))
    assert len(set(copies)) == 1 and (copies[0] / "bin" / "tmux").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [copies[0].parent.name]  # nothing half-made left beside it
    files = sorted(str(p.relative_to(copies[0])) for p in copies[0].rglob("*"))
    again = await extract(docker, image, RUNTIME_DIR, tmp_path)  # made already: the same folder, untouched
    assert again == copies[0] and sorted(str(p.relative_to(again)) for p in again.rglob("*")) == files


async def test_a_half_copied_folder_is_made_again(docker, tmp_path):
    image = await require_image(docker, get(RUNTIME).tag)
    whole = await extract(docker, image, RUNTIME_DIR, tmp_path / "first")
    half = tmp_path / "second" / whole.parent.name
    (half / "runtime").mkdir(parents=True)  # a copy killed before it finished: no `.complete`
    (half / "runtime" / "partial").write_text("")
    copy = await extract(docker, image, RUNTIME_DIR, tmp_path / "second")
    assert copy == half / "runtime" and not (copy / "partial").exists() and (copy / "bin" / "tmux").is_file()


COPY = """
import asyncio, sys
from pathlib import Path
from foundation.engine import engine
from orchestrator.images.agent_layer import RUNTIME_DIR, extract
from orchestrator.images.specs import RUNTIME, get

async def main():
    async with engine() as docker:
        print(await extract(docker, get(RUNTIME).tag, RUNTIME_DIR, Path(sys.argv[1])))

asyncio.run(main())
"""


async def test_sweeps_copying_one_image_at_once_each_get_it_whole(docker, tmp_path):
    """Four processes (two sweeps, or test processes sharing a cache) copy the same folder at once."""
    image = await require_image(docker, get(RUNTIME).tag)
    reference = await extract(docker, image, RUNTIME_DIR, tmp_path / "reference")
    files = sorted(str(p.relative_to(reference)) for p in reference.rglob("*"))
    shared = tmp_path / "shared"
    processes = [await asyncio.create_subprocess_exec(sys.executable, "-c", COPY, str(shared), cwd=PROJECT_ROOT,
                                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                 for _ in range(4)]
    outputs = [await ended_async(process, 300) for process in processes]
    assert [process.returncode for process in processes] == [0] * 4, [err.decode()[-500:] for _, err in outputs]
    copy = Path(outputs[0][0].decode().strip())
    assert {Path(out.decode().strip()) for out, _ in outputs} == {copy}
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*")) == files
    assert [p.name for p in shared.iterdir()] == [copy.parent.name]
