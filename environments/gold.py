"""Gold results, computed once per task and image, shared by every episode that needs them.

Most gold outcomes are deterministic for a given image (and reward mode), so the key is
(image digest, task id, mode). Concurrent episodes of one task wait for one computation instead
of paying a container each. With a directory, results also persist across runs as JSON.

Some are not: a gold that prints the date or the free disk space, or finds files by age
(`-mmin -60`, `-mtime +31`), gives another result an hour or a month later. Those are kept for
`ttl` seconds, in memory only, and computed again after.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

import structlog

from foundation.concurrency import SharedWork

log = structlog.get_logger(__name__)

class GoldKey(NamedTuple):
    """Which gold result: of a task (its fingerprint) on an image (its digest), as `variant` says
    (a reward mode, or a kind's versioned name for its result); a tuple, saved as JSON by parts."""

    image_digest: str
    task: str
    variant: str


Key = GoldKey


class GoldCache:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._values: dict[Key, Any] = {}
        self._expires: dict[Key, float] = {}  # keys computed with a ttl: never saved
        self._work: SharedWork[Key, Any] = SharedWork("gold")
        self._loaded: set[str] = set()
        self._dirty: set[str] = set()
        self._writing: set[str] = set()
        self.computed = 0  # how many gold results this process had to compute

    async def get(self, key: Key, compute: Callable[[], Awaitable[Any]], ttl: float | None = None) -> Any:
        await self._load(key[0])
        if key in self._expires and self._expires[key] <= time.monotonic():
            del self._values[key], self._expires[key]
        if key in self._values:
            return self._values[key]
        # Computed in a task of the cache's own, which every episode needing this gold awaits: an
        # episode cancelled meanwhile (its deadline passed) stops only its own wait.
        return await self._work.get(key, lambda: self._compute(key, compute, ttl))

    async def _compute(self, key: Key, compute: Callable[[], Awaitable[Any]], ttl: float | None) -> Any:
        value = await compute()
        self.computed += 1
        self._values[key] = value
        if ttl is not None:
            self._expires[key] = time.monotonic() + ttl
        else:
            await self._save(key[0])
        return value

    async def aclose(self) -> None:
        """Stop the computations still running (the runtime that served them is closing)."""
        await self._work.aclose()

    def _file(self, digest: str) -> Path | None:
        return self.directory / f"{digest.replace(':', '-')}.json" if self.directory else None

    async def _load(self, digest: str) -> None:
        if digest in self._loaded:
            return
        path = self._file(digest)
        if path is None:
            return
        self._loaded.add(digest)
        if path.is_file():
            stored = json.loads(await asyncio.to_thread(path.read_text))
            for entry in stored:
                self._values[GoldKey(digest, entry["task"], entry["mode"])] = entry["value"]

    async def _save(self, digest: str) -> None:
        """Write the digest's file; saves asked for while one is writing coalesce into one more
        write. A failed write only costs a recomputation in a later run: logged, not raised."""
        path = self._file(digest)
        if path is None:
            return
        self._dirty.add(digest)
        if digest in self._writing:
            return
        self._writing.add(digest)
        try:
            while digest in self._dirty:
                self._dirty.discard(digest)
                entries = [{"task": k[1], "mode": k[2], "value": v} for k, v in self._values.items()
                           if k[0] == digest and k not in self._expires]
                await asyncio.to_thread(_write_atomically, path, json.dumps(entries))
        except OSError as exc:
            log.warning("gold_cache_write_failed", path=str(path), error=str(exc))
        finally:
            self._writing.discard(digest)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
