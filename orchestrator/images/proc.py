"""Host commands for image work (debootstrap, tar, umount, rm), run without blocking the loop.

Output is streamed line by line to the progress callback; every command has a deadline, and on
timeout or cancellation it is terminated, then killed, before the error propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence

from foundation.errors import ImageError
from orchestrator.images.engine_build import Line, Progress, no_progress

GRACE = 10.0  # seconds between SIGTERM and SIGKILL: debootstrap unmounts its chroot on exit
TAIL_LINES = 15


async def run(argv: Sequence[str], *, image: str, timeout: float, progress: Progress = no_progress) -> None:
    """Run argv to completion; raises ImageError (after showing its last lines) when it fails."""
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
    except OSError as exc:
        raise ImageError(f"cannot run {argv[0]} for {image}: {exc.strerror}") from exc
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        async with asyncio.timeout(timeout):
            assert proc.stdout is not None
            async for raw in proc.stdout:
                text = raw.decode("utf-8", "replace").rstrip()
                tail.append(text)
                progress(Line(image, text, detail=True))
            code = await proc.wait()
    except TimeoutError:
        await asyncio.shield(_stop(proc))
        raise ImageError(f"{argv[0]} for {image} did not finish within {timeout:.0f} s") from None
    except BaseException:
        await asyncio.shield(_stop(proc))
        raise
    if code != 0:
        for text in tail:
            progress(Line(image, f"| {text}"))
        raise ImageError(f"{' '.join(argv[:2])} for {image} failed with exit code {code}")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        async with asyncio.timeout(GRACE):
            await proc.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
