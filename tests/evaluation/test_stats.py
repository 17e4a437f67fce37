"""The audit's statistics: Clopper-Pearson intervals against textbook numbers and closed forms,
their coverage, and the epsilon lower bound an event's frequencies imply."""

import math

import numpy as np
import pytest
from scipy import stats

from triehh_beam.evaluation.stats import clopper_pearson, epsilon_lower_bound


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


def test_epsilon_bound_is_the_log_ratio_of_the_two_ends_minus_delta():
    bound = epsilon_lower_bound(500, 500, 0, 500, delta=1e-10)
    lo, hi = 0.025 ** (1 / 500), 1 - 0.025 ** (1 / 500)
    assert bound.p_numerator_lower == pytest.approx(lo)
    assert bound.p_denominator_upper == pytest.approx(hi)
    assert bound.epsilon == pytest.approx(math.log((lo - 1e-10) / hi))
    # delta is subtracted from the numerator's bound: a large one lowers the bound.
    assert epsilon_lower_bound(500, 500, 0, 500, delta=0.5).epsilon == pytest.approx(math.log((lo - 0.5) / hi))


def test_epsilon_bound_is_zero_when_nothing_distinguishes():
    assert epsilon_lower_bound(0, 1000, 0, 1000, delta=1e-6).epsilon == 0.0
    assert epsilon_lower_bound(500, 1000, 500, 1000, delta=1e-6).epsilon == 0.0
    # A numerator bound below delta proves nothing either.
    assert epsilon_lower_bound(1, 1000, 0, 1000, delta=0.01).epsilon == 0.0


def test_epsilon_bound_holds_for_a_mechanism_with_known_epsilon():
    # Randomized response with e^eps / (1 + e^eps): P[S|D1] / P[S|D0] = e^eps exactly. Over 400
    # audits of 2,000 trials each, the 95% bound may exceed eps in at most 5% of them (it needs
    # one of the two one-sided ends to fail, each at most 2.5%); at this seed 5 of 400 did.
    eps = 1.0
    p1 = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(2024)
    above = 0
    for _ in range(400):
        k1, k0 = rng.binomial(2000, p1), rng.binomial(2000, 1 - p1)
        above += epsilon_lower_bound(int(k1), 2000, int(k0), 2000, delta=0.0).epsilon > eps
    assert above <= 20  # 5% of 400
    # ... and it is informative: at the true probabilities the bound is well above 0.
    assert epsilon_lower_bound(int(2000 * p1), 2000, int(2000 * (1 - p1)), 2000, delta=0.0).epsilon > 0.8
