"""Statistics for reports and comparisons: pure functions, no I/O, no global state.

The report needs a confidence interval on each success rate; `compare` needs paired tests
between two cells run on the same tasks. Everything is exact or seeded, so a report built twice
from the same database reads the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# scipy.stats is imported by the functions that use it: it takes about a second, which the viewer's
# start and every command that imports a report would otherwise pay.


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default), scipy's.

    Chosen over the normal (Wald) interval because sweeps often have few episodes per cell and
    rates near 0 or 1, where Wald collapses to zero width or leaves [0, 1]. With n == 0 nothing
    is known, so the whole range (0, 1) is returned.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return 0.0, 1.0
    from scipy.stats import binomtest

    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    # The ends exactly (0/n must give exactly 0, n/n exactly 1), not float noise.
    low = 0.0 if successes == 0 else max(0.0, float(ci.low))
    high = 1.0 if successes == n else min(1.0, float(ci.high))
    return low, high


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, or None for no values (a report shows "—" rather than a made-up 0)."""
    return sum(values) / len(values) if values else None


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs: scipy's exact binomial test of
    `only_a` of them going A's way, when each would with probability 1/2.

    `only_a`: tasks that A solved and B did not; `only_b`: the reverse. No discordant pairs means
    no evidence of a difference: 1.0.
    """
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be >= 0, got {only_a}, {only_b}")
    if only_a + only_b == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


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
    """Paired bootstrap of the mean difference mean(a) - mean(b) (scipy's, `paired=True`); item i
    of a pairs with item i of b.

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
    from scipy.stats import bootstrap

    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    observed = float((first - second).mean())
    result = bootstrap((first, second), _mean_difference, paired=True, vectorized=True, n_resamples=resamples,
                       confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    means = result.bootstrap_distribution
    extreme = int(np.count_nonzero(np.abs(means - observed) >= abs(observed) - 1e-12))
    p_value = (extreme + 1) / (resamples + 1)
    low, high = result.confidence_interval
    return BootstrapResult(observed, float(low), float(high), min(1.0, p_value), resamples)


def _mean_difference(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
    difference: np.ndarray = np.mean(first - second, axis=axis)
    return difference
