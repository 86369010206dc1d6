"""How many episodes the sweep that writes a store planned, from OUTDIR/sweep.log.

Each run of `sweep` logs a `sweep_start` line with `planned` (every episode of the plan, stored
ones included), so the last such line gives the denominator of the sweep's progress. The log is
read from where the last read stopped, so a long one is read once; a half-written last line waits
for the next read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

LOG_NAME = "sweep.log"


@dataclass
class PlannedEpisodes:
    path: Path
    offset: int = 0
    planned: int | None = None

    @classmethod
    def of(cls, outdir: Path) -> PlannedEpisodes:
        return cls(outdir / LOG_NAME)

    def read(self) -> int | None:
        """The planned count of the latest run; None before any run logged one (or without a log)."""
        try:
            size = self.path.stat().st_size
            if size < self.offset:  # the log was replaced: read it again
                self.offset, self.planned = 0, None
            with self.path.open("rb") as log:
                log.seek(self.offset)
                chunk = log.read(size - self.offset)
        except FileNotFoundError:
            return None
        complete = chunk.rfind(b"\n") + 1
        for line in chunk[:complete].splitlines():
            if b'"sweep_start"' in line:
                self.planned = _planned(line, self.planned)
        self.offset += complete
        return self.planned


def _planned(line: bytes, previous: int | None) -> int | None:
    """The line's `planned`, or the previous count when the line isn't the sweep's own event (a
    line that merely mentions it, e.g. in an error message, has no integer `planned`)."""
    try:
        event = json.loads(line)
    except ValueError:
        return previous
    value = event.get("planned") if isinstance(event, dict) and event.get("event") == "sweep_start" else None
    return value if isinstance(value, int) else previous
