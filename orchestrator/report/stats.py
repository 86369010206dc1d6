"""Statistics for reports and comparisons: pure functions, no I/O, no global state.

The report needs a confidence interval on each success rate; `compare` needs paired tests
between two cells run on the same tasks. Everything is exact or seeded, so a report built twice
from the same database reads the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Z_95 = 1.959963984540054  # the standard normal's 97.5th percentile


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default).

    Chosen over the normal (Wald) interval because sweeps often have few episodes per cell and
    rates near 0 or 1, where Wald collapses to zero width or leaves [0, 1]. With n == 0 nothing
    is known, so the whole range (0, 1) is returned.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # Clamp the float noise at the ends (0/n must give exactly 0, n/n exactly 1).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, or None for no values (a report shows "—" rather than a made-up 0)."""
    return sum(values) / len(values) if values else None


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs.

    `only_a`: tasks that A solved and B did not; `only_b`: the reverse. Under the null each
    discordant pair goes either way with probability 1/2, so the p-value is twice the smaller
    binomial tail (capped at 1). No discordant pairs means no evidence of a difference: 1.0.
    """
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be >= 0, got {only_a}, {only_b}")
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class BootstrapResult:
    """Mean of (a - b) over paired items, its percentile CI and a two-sided p-value."""

    difference: float
    low: float
    high: float
    p_value: float
    resamples: int


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0,
                     confidence: float = 0.95) -> BootstrapResult:
    """Paired bootstrap of the mean difference mean(a) - mean(b); item i of a pairs with item i of b.

    Tasks are resampled with replacement (seeded, so results repeat). The CI is the percentile
    interval of the resampled differences. The p-value tests "no difference" by centring the
    resampled differences on zero and counting those at least as far from zero as the observed
    one, with the +1 correction so it is never exactly 0.
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    if not a:
        raise ValueError("paired bootstrap needs at least one pair")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError("need resamples >= 1 and 0 < confidence < 1")
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    observed = float(diffs.mean())
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(diffs), size=(resamples, len(diffs)))
    means = diffs[picks].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    extreme = int(np.count_nonzero(np.abs(means - observed) >= abs(observed) - 1e-12))
    p_value = (extreme + 1) / (resamples + 1)
    return BootstrapResult(observed, float(low), float(high), min(1.0, p_value), resamples)
