"""How busy the machine's CPUs are, from /proc/stat: the pool's signal for whether a new
container is worth its cost.

Creating and starting a container costs about 0.4 s of CPU (runc, mounts, the engine, the
driver's start) and removing it 0.1 s more. When the CPUs are saturated, another container adds no
throughput, only that cost, and a lease is better served by the next container to come back.
"""

from __future__ import annotations

import collections
import time
from pathlib import Path

STAT = Path("/proc/stat")


def _read() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs since boot, or None where /proc/stat is not there."""
    try:
        fields = STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


class CpuGauge:
    """The busy share of all CPUs over the last `window` seconds, sampled by `sample()`."""

    def __init__(self, window: float = 1.0) -> None:
        self.window = window
        self._samples: collections.deque[tuple[float, int, int]] = collections.deque()

    def sample(self) -> None:
        reading = _read()
        if reading is None:
            return
        now = time.monotonic()
        self._samples.append((now, *reading))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    @property
    def busy(self) -> float | None:
        """0..1, or None before two samples (or without /proc/stat)."""
        if len(self._samples) < 2:
            return None
        (_, busy0, total0), (_, busy1, total1) = self._samples[0], self._samples[-1]
        return (busy1 - busy0) / (total1 - total0) if total1 > total0 else None

    def saturated(self, threshold: float = 0.9) -> bool:
        busy = self.busy
        return busy is not None and busy >= threshold
