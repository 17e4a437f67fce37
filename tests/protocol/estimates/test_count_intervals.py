"""The published 95% intervals of the estimates (``protocol.estimates.count_intervals``): their endpoints
against independent scipy computations of the tails they invert, and their coverage of the
weighted users ``f = sum over users of p_u`` in an independent numpy simulation of users who
hold one or several items, choose one by local frequency (after a Bernoulli sample, for
sample-and-threshold) and get two-sided geometric noise (for ``--estimate-frequencies``).

Coverage tolerance: each interval's empirical coverage over R independent draws must be at least
0.95 - 3 sqrt(0.95 x 0.05 / R) (three binomial standard errors below the level). The intervals
cover 0.97 or more of these populations' draws, and at least 0.953 of any binomial population's
computed exactly (docs/protocol.md §2, §5), so a correct interval fails a check with probability
below 1e-3; the seeds are fixed, so each test is deterministic.
The same check fails the noise-only interval with several items per user, and an interval that
ignores the threshold for an item near it.
"""

import math

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.estimates import count_intervals
from triehh_beam.protocol.estimates.count_intervals import (LEVEL, noisy_count_intervals,
                                                            sampled_count_interval)
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric

TAIL = (1 - LEVEL) / 2


def _coverage_floor(runs):
    """The lowest empirical coverage a 95% interval passes with over ``runs`` draws."""
    return LEVEL - 3 * math.sqrt(LEVEL * (1 - LEVEL) / runs)


# ---- the endpoints, against independent computations ---------------------------------------


def _noisy_cdf(x, mean, epsilon):
    """``P(Poisson(mean) + Z <= x)`` by a direct double sum (scipy's Poisson, the noise's pmf)."""
    a = math.exp(-epsilon)
    z = np.arange(-int(60 / epsilon) - 60, int(60 / epsilon) + 61)
    noise = (1 - a) / (1 + a) * a ** np.abs(z)
    return float(np.sum(noise * stats.poisson.cdf(x - z, mean)))


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("estimate", [-40, -2, 0, 1, 7, 60, 900, 25_000])
def test_noisy_endpoints_invert_the_poisson_plus_noise_tails(epsilon, estimate):
    [(low, high)] = noisy_count_intervals([estimate], epsilon)
    assert 0 <= low <= high
    # high: the smallest f with P(Poisson(f) + Z <= e) <= 2.5%, rounded up.
    assert _noisy_cdf(estimate, high, epsilon) <= TAIL + 1e-8
    if high >= 1:
        assert _noisy_cdf(estimate, high - 1.01, epsilon) > TAIL
    # low: the largest f with P(Poisson(f) + Z >= e) <= 2.5%, rounded down (0 when none).
    assert 1 - _noisy_cdf(estimate - 1, low, epsilon) <= TAIL + 1e-8 or low == 0
    assert 1 - _noisy_cdf(estimate - 1, low + 1.01, epsilon) > TAIL


def test_noisy_intervals_are_monotone_and_contain_a_nonnegative_estimate():
    estimates = list(range(-30, 400, 7))
    intervals = noisy_count_intervals(estimates, 0.5)
    for (e, (low, high)), (_, (next_low, next_high)) in zip(zip(estimates, intervals), zip(estimates[1:], intervals[1:])):
        assert next_low >= low and next_high >= high
        if e >= 0:
            assert low <= e <= high
    # The order of the estimates does not change anyone's interval.
    assert noisy_count_intervals(estimates[::-1], 0.5) == intervals[::-1]


def test_the_union_bound_for_very_wide_sums_contains_the_exact_interval(monkeypatch):
    estimates = [0, 5, 300, 4_000, 90_000]
    exact = noisy_count_intervals(estimates, 0.01)
    monkeypatch.setattr(count_intervals, "_MAX_TERMS", 0)  # every estimate by the union bound
    union = noisy_count_intervals(estimates, 0.01)
    for (low, high), (u_low, u_high) in zip(exact, union):
        assert u_low <= low and high <= u_high
        assert u_high - u_low < 2 * (high - low)  # wider, not useless


def test_a_tiny_epsilon_takes_the_union_bound_and_finishes():
    [(low, high)] = noisy_count_intervals([5_000_000], 1e-5)
    k = TwoSidedGeometric(1e-5).half_width(1 - TAIL)
    assert low < 5_000_000 - k and high > 5_000_000 + k


@pytest.mark.parametrize("count", [0, 1, 5, 50, 1_000])
@pytest.mark.parametrize("probability", [1.0, 0.12])
def test_without_a_threshold_the_sampled_interval_is_garwoods(count, probability):
    low = stats.chi2.ppf(TAIL, 2 * count) / 2 if count else 0.0
    high = stats.chi2.ppf(1 - TAIL, 2 * count + 2) / 2
    got = sampled_count_interval(count, probability)
    assert got[0] in (math.floor(low / probability), math.floor(low / probability) - 1)
    assert got[1] in (math.ceil(high / probability), math.ceil(high / probability) + 1)


@pytest.mark.parametrize("count", [20, 21, 26, 40, 300])
def test_the_sampled_interval_inverts_the_tails_given_the_release(count):
    probability, tau = 0.12, 20

    def below(mu):  # P(X <= count | X >= tau)
        return (stats.poisson.cdf(count, mu) - stats.poisson.cdf(tau - 1, mu)) / stats.poisson.sf(tau - 1, mu)

    def above(mu):  # P(X >= count | X >= tau)
        return stats.poisson.sf(count - 1, mu) / stats.poisson.sf(tau - 1, mu)

    low, high = sampled_count_interval(count, probability, tau)
    assert below(high * probability) <= TAIL + 1e-9 < below((high - 1.01) * probability)
    if count == tau:
        assert low == 0  # a count at the threshold comes from arbitrarily rare items
    else:
        assert above(low * probability) <= TAIL + 1e-9 < above((low + 1.01) * probability)
    # The release conditions the count: the conditional interval lies below Garwood's.
    garwood = sampled_count_interval(count, probability)
    assert low <= garwood[0] and high <= garwood[1]


@pytest.mark.parametrize("call", [
    lambda: noisy_count_intervals([1], 0.0),
    lambda: noisy_count_intervals([1], float("inf")),
    lambda: noisy_count_intervals([1], 1.0, level=1.0),
    lambda: sampled_count_interval(19, 0.1, 20),
    lambda: sampled_count_interval(-1, 0.1),
    lambda: sampled_count_interval(5, 0.0),
    lambda: sampled_count_interval(5, 1.5),
    lambda: sampled_count_interval(5, 0.5, tau=-1),
    lambda: sampled_count_interval(5, 0.5, level=0),
])
def test_bad_arguments_are_refused(call):
    with pytest.raises(ValueError):
        call()


# ---- coverage, by an independent simulation --------------------------------------------------


def _choices(shares, rng):
    """One draw per user (rows: the user's probabilities over the targets, summing to 1 or 0 for
    a user holding none): the target each chooses, -1 for none."""
    cumulative = np.cumsum(shares, axis=1)
    u = rng.random(len(shares))
    chosen = np.minimum((u[:, None] >= cumulative).sum(axis=1), shares.shape[1] - 1)
    return np.where(shares.sum(axis=1) > 0, chosen, -1)


def _simulate_noisy(weights, epsilon, runs, seed):
    """``runs`` independent estimate releases of users with local counts ``weights`` (users x
    targets): each user draws one target by its share of its records on them, the counts get
    two-sided geometric noise. Returns (the weighted users f per target, estimates runs x targets)."""
    rng = np.random.default_rng(seed)
    totals = weights.sum(axis=1, keepdims=True)
    shares = np.divide(weights, totals, out=np.zeros_like(weights, dtype=float), where=totals > 0)
    a = math.exp(-epsilon)
    estimates = np.empty((runs, weights.shape[1]), dtype=np.int64)
    for r in range(runs):
        chosen = _choices(shares, rng)
        counts = np.bincount(chosen[chosen >= 0], minlength=weights.shape[1])
        noise = rng.geometric(1 - a, size=len(counts)) - rng.geometric(1 - a, size=len(counts))
        estimates[r] = counts + noise
    return shares.sum(axis=0), estimates


def _covered(estimates, f, epsilon):
    """Per target, the share of the runs whose published interval holds f."""
    values, where = np.unique(estimates, return_inverse=True)
    intervals = np.array(noisy_count_intervals(values.tolist(), epsilon))[where.reshape(estimates.shape)]
    return ((intervals[..., 0] <= f) & (f <= intervals[..., 1])).mean(axis=0)


@pytest.mark.parametrize("epsilon", [0.25, 1.0])
def test_noisy_intervals_cover_one_item_users(epsilon):
    # Each user holds one target (any number of records): f is the holders, and only the noise varies.
    holders = [0, 3, 40, 1_000]
    weights = np.zeros((sum(holders) + 50, len(holders)))
    start = 0
    for i, h in enumerate(holders):
        weights[start:start + h, i] = 1 + np.arange(h) % 4
        start += h  # the last 50 users hold no target
    runs = 2_000
    f, estimates = _simulate_noisy(weights, epsilon, runs, seed=[1, int(epsilon * 100)])
    assert f.tolist() == holders
    coverage = _covered(estimates, f, epsilon)
    assert np.all(coverage >= _coverage_floor(runs)), coverage


def _several_items_population(rng):
    """The issue's shape: 7,610 users hold "typing" (target 0) among 2 to 5 of targets 0-4 with
    local counts 1 to 6, so its weighted users are about a third of its holders; 500 users hold
    target 1 alone; 40 users split their records evenly between targets 5 and 6 (f = 20 each,
    their draws' variance 10 against the noise's 1.85 at epsilon 1)."""
    targets = 7
    typing = np.zeros((7_610, targets))
    for row in typing:
        held = np.concatenate([[0], rng.choice(np.arange(1, 5), size=rng.integers(1, 5), replace=False)])
        row[held] = rng.integers(1, 7, size=len(held))
    alone = np.zeros((500, targets))
    alone[:, 1] = 1
    pairs = np.zeros((40, targets))
    pairs[:, 5] = pairs[:, 6] = 2
    return np.vstack([typing, alone, pairs])


def test_noisy_intervals_cover_the_weighted_users_of_multi_item_users_and_the_noise_interval_does_not():
    weights = _several_items_population(np.random.default_rng(7))
    epsilon, runs = 1.0, 2_000
    f, estimates = _simulate_noisy(weights, epsilon, runs, seed=11)
    holders = (weights > 0).sum(axis=0)
    assert holders[0] == 7_610 and 2_000 < f[0] < 3_500  # weighted users, not holders
    coverage = _covered(estimates, f, epsilon)
    assert np.all(coverage >= _coverage_floor(runs)), coverage
    assert f[5] == f[6] == 20
    # The old published interval, estimate +- k, covers the noise only: it fails the same check
    # wherever users spread their records (every target here), the small ones too.
    k = TwoSidedGeometric(epsilon).half_width(LEVEL)
    noise_only = (np.abs(estimates - f) <= k).mean(axis=0)
    assert np.all(noise_only < _coverage_floor(runs)), noise_only
    # And the holders, what it was labelled with, are nowhere near the estimates of "typing".
    intervals = noisy_count_intervals(estimates[:, 0].tolist(), epsilon)
    assert all(high < holders[0] / 2 for _, high in intervals)


def _simulate_sampled(weights, probability, tau, runs, seed, item=0):
    """``runs`` independent whole-item releases: each user is kept with ``probability`` and then
    reports one of its items (columns of ``weights``) by local frequency; returns the weighted
    users of ``item`` and its count in each run where it reached ``tau``."""
    rng = np.random.default_rng(seed)
    shares = weights / weights.sum(axis=1, keepdims=True)
    released = []
    for _ in range(runs):
        kept = rng.random(len(weights)) < probability
        chosen = _choices(shares[kept], rng)
        count = int(np.sum(chosen == item))
        if count >= tau:
            released.append(count)
    return shares[:, item].sum(), released


def _share_covered(counts, f, probability, tau):
    """The share of the released counts whose interval (given the release at ``tau``; 0: Garwood's,
    ignoring it) holds f."""
    intervals = {c: sampled_count_interval(c, probability, tau) for c in set(counts)}
    return float(np.mean([intervals[c][0] <= f <= intervals[c][1] for c in counts]))


def _several(users, share, other_items=9):
    """``users`` users, each reporting item 0 with probability ``share`` and otherwise one of
    ``other_items`` items of their own mix."""
    weights = np.zeros((users, 1 + other_items))
    weights[:, 0] = share
    weights[:, 1:] = (1 - share) / other_items
    return weights


@pytest.mark.parametrize("weights", [
    pytest.param(np.ones((140, 1)), id="140 one-item users, near tau"),
    pytest.param(np.ones((400, 1)), id="400 one-item users, far above tau"),
    pytest.param(_several(1_300, 0.1), id="1,300 users choosing it 1 time in 10, near tau"),
    pytest.param(np.vstack([_several(800, 0.75, 1), _several(400, 1.0, 1)]), id="3/4 and 1 shares"),
])
def test_sampled_intervals_cover_the_weighted_users_given_the_release(weights):
    probability, tau, runs = 0.12, 20, 4_000
    f, counts = _simulate_sampled(weights, probability, tau, runs, seed=[3, len(weights)])
    assert len(counts) > 500  # enough releases to measure coverage given the release
    covered = _share_covered(counts, f, probability, tau)
    assert covered >= _coverage_floor(len(counts)), (covered, len(counts))


def test_an_interval_that_ignores_the_threshold_fails_near_it():
    # 120 one-item holders, expected count 14.4 < tau = 20: released in about 8% of runs, and
    # then only when its count ran high. Garwood's interval (no threshold) misses f in about a
    # fifth of the releases; the interval given the release covers.
    probability, tau, runs = 0.12, 20, 20_000
    f, counts = _simulate_sampled(np.ones((120, 1)), probability, tau, runs, seed=5)
    assert 1_000 < len(counts) < 2_400
    floor = _coverage_floor(len(counts))
    given = _share_covered(counts, f, probability, tau)
    ignoring = _share_covered(counts, f, probability, 0)
    assert given >= floor and ignoring < floor, (given, ignoring)
