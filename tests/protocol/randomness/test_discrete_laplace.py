"""The exact two-sided geometric sampler against its closed form, at fixed keys.

Statistical checks use fixed keys (so each is deterministic) and tolerances that a correct
sampler misses with probability about 1e-4 or less each: two-sided binomial tails from SciPy,
a chi-square p-value above 1e-4, and means within 4.5 standard errors (the closed-form variance).
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.randomness.discrete_laplace import (KeyedBits, TwoSidedGeometric,
                                                              bernoulli_exp, discrete_laplace)

KEY = (0x0123456789ABCDEF, 0x0FEDCBA987654321)


def _draws(epsilon, n, key=KEY):
    noise = TwoSidedGeometric(epsilon)
    return np.array([noise.sample(KeyedBits(key, b"draw %d" % i)) for i in range(n)])


def _binomial_ok(successes, n, p, alpha=1e-4):
    """Whether ``successes`` is inside the central 1 - alpha of Binomial(n, p)."""
    return stats.binom.cdf(successes, n, p) > alpha / 2 and stats.binom.sf(successes - 1, n, p) > alpha / 2


def test_the_stream_is_deterministic_and_labels_separate_it():
    a, b = KeyedBits(KEY, b"x"), KeyedBits(KEY, b"x")
    assert [a.bits(13) for _ in range(50)] == [b.bits(13) for _ in range(50)]
    assert KeyedBits(KEY, b"x").bits(256) != KeyedBits(KEY, b"y").bits(256)
    assert KeyedBits(KEY, b"x").bits(256) != KeyedBits((KEY[0], KEY[1] ^ 1), b"x").bits(256)
    # Labels are length-prefixed: (b"ab", block) and (b"a", b"b"...) cannot meet.
    assert KeyedBits(KEY, b"ab").bits(512) != KeyedBits(KEY, b"a").bits(512)


def test_uniform_integers_below_n_are_uniform():
    bits = KeyedBits(KEY, b"uniform")
    n, draws = 6, 30_000
    counts = np.bincount([bits.below(n) for _ in range(draws)], minlength=n)
    assert len(counts) == n
    assert stats.chisquare(counts).pvalue > 1e-4
    with pytest.raises(ValueError):
        bits.below(0)
    assert bits.below(1) == 0


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma):
    n = 20_000
    hits = sum(bernoulli_exp(gamma, KeyedBits(KEY, b"b %d" % i)) for i in range(n))
    p = math.exp(-gamma)
    if p == 1:
        assert hits == n
    else:
        assert _binomial_ok(hits, n, p), (hits / n, p)


def test_discrete_laplace_refuses_a_non_positive_scale():
    with pytest.raises(ValueError):
        discrete_laplace(Fraction(0), KeyedBits(KEY, b""))
    with pytest.raises(ValueError):
        bernoulli_exp(Fraction(-1), KeyedBits(KEY, b""))


@pytest.mark.parametrize("epsilon", [1.0, 0.3])
def test_draws_follow_the_two_sided_geometric_distribution(epsilon):
    noise = TwoSidedGeometric(epsilon)
    n = 20_000
    z = _draws(epsilon, n)
    # Chi-square over the values with at least 20 expected draws, the rest pooled per side.
    top = max(k for k in range(200) if n * noise.pmf(k) >= 20)
    observed = [np.sum(z < -top)] + [np.sum(z == v) for v in range(-top, top + 1)] + [np.sum(z > top)]
    expected = [n * noise.tail(top) / 2] + [n * noise.pmf(v) for v in range(-top, top + 1)] + [n * noise.tail(top) / 2]
    assert math.isclose(sum(expected), n)
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    # Mean 0 (the estimates are unbiased) within 4.5 standard errors of the closed-form variance.
    assert abs(z.mean()) < 4.5 * math.sqrt(noise.variance / n)


def test_the_sample_is_symmetric_with_large_scales_and_odd_floats():
    # epsilon = 0.05: the float's exact fraction has a 2^58 denominator; the sampler's integers
    # stay exact. The share of negative draws is (1 - P(0)) / 2 exactly.
    noise = TwoSidedGeometric(0.05)
    n = 8_000
    z = _draws(0.05, n, key=(7, 11))
    assert _binomial_ok(int(np.sum(z < 0)), n, (1 - noise.pmf(0)) / 2)
    assert _binomial_ok(int(np.sum(np.abs(z) <= noise.half_width())), n, noise.coverage(noise.half_width()))


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 1.0, math.log(3), 2.0, 8.0, 50.0])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.99])
def test_the_half_width_is_the_smallest_with_the_level(epsilon, level):
    noise = TwoSidedGeometric(epsilon)
    k = noise.half_width(level)
    assert noise.coverage(k) >= level
    assert k == 0 or noise.coverage(k - 1) < level
    # The closed form of the coverage, against a direct sum of the pmf.
    direct = sum(noise.pmf(z) for z in range(-k, k + 1))
    assert math.isclose(noise.coverage(k), direct, rel_tol=1e-9)


def test_hand_computed_figures():
    # epsilon = 1: a = e^-1; P(|Z| > k) = 2 e^-(k+1) / (1 + e^-1): 0.0727 at k = 2, 0.0268 at 3.
    noise = TwoSidedGeometric(1.0)
    assert noise.half_width() == 3
    assert math.isclose(noise.coverage(3), 1 - 2 * math.exp(-4) / (1 + math.exp(-1)))
    assert math.isclose(noise.variance, 2 * math.exp(-1) / (1 - math.exp(-1)) ** 2)
    assert noise.variance < 2 / 1.0**2  # below Laplace's at the same epsilon
    # epsilon = 0.1: the interval is +-30 users, covering 95.27%.
    assert TwoSidedGeometric(0.1).half_width() == 30


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "1"])
def test_bad_epsilons_are_refused(bad):
    with pytest.raises(ValueError):
        TwoSidedGeometric(bad)
