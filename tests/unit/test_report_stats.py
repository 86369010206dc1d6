"""The report's statistics against hand-computed values and scipy's implementations."""

from __future__ import annotations

import pytest

from orchestrator.report.stats import (
    BootstrapResult,
    mcnemar_exact,
    mean,
    paired_bootstrap,
    wilson_interval,
)
from tests.lazy import lazy

scipy_stats = lazy("scipy.stats")


@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    (0, 10, 0.0, 0.27753),
    (10, 10, 0.72247, 1.0),
    (5, 10, 0.23659, 0.76341),
    (2, 4, 0.15004, 0.84996),
    (1, 1, 0.20654, 1.0),
    (81, 263, 0.25529, 0.36621),
])
def test_wilson_known_values(successes, n, low, high):
    got = wilson_interval(successes, n)
    assert got == pytest.approx((low, high), abs=1e-5)


@pytest.mark.parametrize(("successes", "n"), [(0, 3), (1, 3), (7, 20), (19, 20), (50, 100), (3, 1000)])
def test_wilson_matches_scipy(successes, n):
    ci = scipy_stats.binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(successes, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_wilson_edges_are_exact_and_empty_is_everything():
    assert wilson_interval(0, 7)[0] == 0.0
    assert wilson_interval(7, 7)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5
    assert mean([]) is None


@pytest.mark.parametrize(("only_a", "only_b", "p"), [
    (0, 0, 1.0),
    (5, 0, 0.0625),
    (0, 5, 0.0625),
    (1, 9, 22 / 1024),
    (3, 3, 1.0),
    (10, 2, 0.0385742),
])
def test_mcnemar_known_values(only_a, only_b, p):
    assert mcnemar_exact(only_a, only_b) == pytest.approx(p, abs=1e-6)


@pytest.mark.parametrize(("only_a", "only_b"), [(4, 11), (20, 13), (1, 30), (7, 8)])
def test_mcnemar_matches_scipy_binomial(only_a, only_b):
    expected = scipy_stats.binomtest(only_a, only_a + only_b, 0.5).pvalue
    assert mcnemar_exact(only_a, only_b) == pytest.approx(expected, rel=1e-9)


def test_bootstrap_no_difference():
    scores = [0.0, 1.0, 0.5, 1.0, 0.0]
    result = paired_bootstrap(scores, scores, resamples=500, seed=1)
    assert (result.difference, result.low, result.high, result.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_bootstrap_constant_difference_is_certain():
    result = paired_bootstrap([1.0] * 30, [0.0] * 30, resamples=999, seed=3)
    assert result == BootstrapResult(1.0, 1.0, 1.0, 1 / 1000, 999)


def test_bootstrap_is_seeded_and_brackets_the_observed_difference():
    a = [1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1]
    b = [0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1]
    first = paired_bootstrap(a, b, resamples=2000, seed=7)
    assert first == paired_bootstrap(a, b, resamples=2000, seed=7)
    assert first.difference == pytest.approx(4 / 12)
    assert 0.0 < first.low < first.difference < first.high <= 0.75
    assert first.p_value < 0.05  # A wins 4 discordant pairs to 0
    other = paired_bootstrap(a, b, resamples=2000, seed=8)
    assert other.low != first.low or other.p_value != first.p_value


def test_bootstrap_noise_is_not_significant():
    a = [1, 0, 1, 0, 1, 0, 1, 0]
    b = [0, 1, 0, 1, 1, 0, 1, 0]
    result = paired_bootstrap(a, b, resamples=2000, seed=0)
    assert result.difference == 0.0 and result.low < 0 < result.high
    assert result.p_value > 0.5


def test_bootstrap_rejects_unpaired_input():
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap([1.0, 0.0], [1.0])
    with pytest.raises(ValueError):
        paired_bootstrap([], [])


def test_scipys_statistics_give_todays_results():
    """Pinned: the figures of the hand-written Wilson, McNemar and bootstrap these replaced."""
    a, b = [1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 1], [0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1]
    assert paired_bootstrap(a, b, seed=0) == pytest.approx(
        BootstrapResult(1 / 3, 1 / 12, 7 / 12, 0.025097490250974904, 10_000))
    assert wilson_interval(81, 263) == pytest.approx((0.2552885198782742, 0.36620957698280004), rel=1e-12)
    assert mcnemar_exact(10, 2) == pytest.approx(0.03857421875, rel=1e-12)
