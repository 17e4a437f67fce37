"""``protocol.planning.distributions`` gives bit for bit what ``scipy.stats`` gives (it calls the same
ufuncs without importing ``scipy.stats``): hypergeometric survival and mass, binomial survival,
on random arguments from tiny to 10^9 populations and at and beyond the supports' ends."""

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.planning import distributions


def _cases(seed, count):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(1, int(rng.choice([5, 50, 1000, 10**6, 10**9])) + 1))
        successes, draws = int(rng.integers(0, n + 1)), int(rng.integers(0, n + 1))
        yield n, successes, draws, int(rng.integers(-2, min(successes, draws) + 3))


@pytest.mark.parametrize("seed", [1, 2])
def test_hypergeometric_tails_equal_scipy_stats(seed):
    for n, successes, draws, k in _cases(seed, 1500):
        assert distributions.hypergeom_sf(k, n, successes, draws) == float(stats.hypergeom.sf(k, n, successes, draws))
        ks = np.arange(k - 4, k + 5)
        assert np.array_equal(distributions.hypergeom_pmf(ks, n, successes, draws),
                              stats.hypergeom.pmf(ks, n, successes, draws))


@pytest.mark.parametrize("p", [1.0, 0.5, 0.37, 1e-3])
def test_binomial_tails_equal_scipy_stats(p):
    trials = np.arange(0, 60)
    for k in range(-2, 62):
        assert np.array_equal(distributions.binom_sf(k, trials, p), stats.binom.sf(k, trials, p)), k


def test_the_ends_of_the_support():
    # Every draw is a success (k below the smallest value: certain), and beyond the largest: never.
    assert distributions.hypergeom_sf(2, 10, 9, 5) == 1.0 == float(stats.hypergeom.sf(2, 10, 9, 5))
    assert distributions.hypergeom_sf(5, 10, 9, 5) == 0.0 == float(stats.hypergeom.sf(5, 10, 9, 5))
    assert distributions.hypergeom_sf(4, 10, 9, 5) == pytest.approx(0.5)  # P(all 5 drawn succeed) = 5/10
