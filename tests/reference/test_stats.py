"""The audit's statistics: Clopper-Pearson intervals against textbook numbers and closed forms,
their coverage, and the epsilon lower bound an event's frequencies imply."""

import math

import numpy as np
import pytest
from scipy import stats

from triehh_beam.reference.stats import clopper_pearson


@pytest.mark.parametrize("k, n, lo, hi", [
    # Textbook exact 95% intervals (e.g. Newcombe 1998, Table II; any binomial CI table).
    (0, 10, 0.0, 0.3085),
    (5, 10, 0.1871, 0.8129),
    (10, 10, 0.6915, 1.0),
    (50, 100, 0.3983, 0.6017),
    (1, 29, 0.0009, 0.1776),
])
def test_clopper_pearson_matches_textbook_intervals(k, n, lo, hi):
    got = clopper_pearson(k, n)
    assert got[0] == pytest.approx(lo, abs=5e-5)
    assert got[1] == pytest.approx(hi, abs=5e-5)


def test_clopper_pearson_ends_at_zero_and_n_are_closed_forms():
    # No success in n: the upper end solves (1 - p)^n = 0.025; all successes: p^n = 0.025.
    for n in (1, 7, 500, 1000):
        assert clopper_pearson(0, n)[1] == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)
        assert clopper_pearson(n, n)[0] == pytest.approx(0.025 ** (1 / n), rel=1e-9)
    # 99%: the tails are 0.005 each.
    assert clopper_pearson(0, 100, confidence=0.99)[1] == pytest.approx(1 - 0.005 ** (1 / 100), rel=1e-9)


def test_clopper_pearson_ends_are_where_the_binomial_tails_reach_2_5_percent():
    # The defining property: P[X >= k | lo] = 0.025 and P[X <= k | hi] = 0.025.
    for k, n in ((3, 40), (17, 200), (120, 250)):
        lo, hi = clopper_pearson(k, n)
        assert stats.binom.sf(k - 1, n, lo) == pytest.approx(0.025, rel=1e-6)
        assert stats.binom.cdf(k, n, hi) == pytest.approx(0.025, rel=1e-6)


def test_clopper_pearson_covers_at_least_95_percent():
    # Exact coverage over every outcome (no sampling): never below 95% for these p and n.
    for n in (20, 100):
        intervals = [clopper_pearson(k, n) for k in range(n + 1)]
        for p in (0.01, 0.05, 0.2, 0.5, 0.9):
            covered = sum(stats.binom.pmf(k, n, p) for k, (lo, hi) in enumerate(intervals) if lo <= p <= hi)
            assert covered >= 0.95


@pytest.mark.parametrize("k, n", [(-1, 10), (11, 10), (0, 0)])
def test_clopper_pearson_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError):
        clopper_pearson(k, n)
