"""The crowding lower bound on one TrieHH round's delta (protocol.accounting.crowding), against the figures
of the privacy review, a literal enumeration of every m-subset, and every population of small n
whose prefixes an extra, lone user can crowd (counted by a generating function, not the closed
form)."""

import itertools
import random
import math
from collections import Counter
from fractions import Fraction

import pytest

from triehh_beam.protocol.accounting.crowding import crowding_bound, neighbours_bound
from triehh_beam.protocol.accounting.privacy import theorem1


@pytest.mark.parametrize("n, theta, m, expected", [
    (36, 5, 6, 0.0225),        # issue 25's counterexample; Theorem 1 claims 0.0125
    (100, 8, 10, 7.2e-4),      # the planner's plan for epsilon = 4, delta = 1e-4, L = 2
    (250, 14, 16, 2.15e-4),    # epsilon = 8, delta = 1.6e-5, L = 3
    (9999, 54, 181, 6.6e-42),  # epsilon = 8, delta = 1e-8, L = 2 (theta raised to e^4 - 1)
    (1305, 12, 100, 1.29e-8),  # theorem1(1305, 12, 1, batch_size=100) claims 2.32e-9
])
def test_the_reviews_figures(n, theta, m, expected):
    assert crowding_bound(n, theta, m).delta == pytest.approx(expected, rel=5e-3)


def test_the_first_figure_exactly_and_beyond_theorem1():
    bound = crowding_bound(36, 5, 6)
    # 35 users on one prefix, one alone: u and the lone user sampled, 4 of the 35.
    assert bound.sizes == (35,) and bound.alone == 1
    assert bound.delta == pytest.approx(float(Fraction(math.comb(35, 4), math.comb(37, 6))), rel=1e-12)
    assert bound.delta > theorem1(36, 5, 1, batch_size=6).delta
    assert crowding_bound(1305, 12, 100).delta > theorem1(1305, 12, 1, batch_size=100).delta


def _round_empty(votes, m, theta):
    """P(a round publishes nothing), every m-subset of the users enumerated."""
    empty = total = 0
    for sample in itertools.combinations(range(len(votes)), m):
        counts = Counter(votes[i] for i in sample)
        empty += all(c < theta for c in counts.values())
        total += 1
    return Fraction(empty, total)


@pytest.mark.parametrize("n, theta, m", [(12, 3, 5), (13, 3, 6), (14, 4, 7), (11, 3, 7)])
def test_the_bound_is_the_enumerated_round(n, theta, m):
    bound = crowding_bound(n, theta, m)
    assert bound.delta > 0
    votes = [f"g{i}" for i, size in enumerate(bound.sizes) for _ in range(size)]
    votes += [f"alone{i}" for i in range(bound.alone)]
    assert len(votes) == n
    assert _round_empty(votes, m, theta) == 0
    assert float(_round_empty(votes + ["u"], m, theta)) == pytest.approx(bound.delta, rel=1e-12)


def _partitions(n, largest=None):
    largest = n if largest is None else largest
    if n == 0:
        yield ()
        return
    for first in range(min(n, largest), 0, -1):
        for rest in _partitions(n - first, first):
            yield (first,) + rest


def _empty_probability(groups, m, theta):
    """P(no prefix reaches theta) when m of sum(groups) users are drawn: the coefficient of x^m
    in prod_g sum_{c < theta} C(g, c) x^c, over C(total, m)."""
    poly = [1]
    for g in groups:
        factor = [math.comb(g, c) for c in range(min(g, theta - 1) + 1)]
        poly = [sum(poly[i] * factor[j - i] for i in range(len(poly)) if 0 <= j - i < len(factor))
                for j in range(len(poly) + len(factor) - 1)]
    ways = poly[m] if m < len(poly) else 0
    return Fraction(ways, math.comb(sum(groups), m))


@pytest.mark.parametrize("n, theta, m", [(14, 3, 5), (15, 3, 7), (16, 4, 8), (13, 4, 9)])
def test_no_population_of_small_n_crowds_more(n, theta, m):
    # Every way to put n users on prefixes (a partition of n), u alone on one more: among those
    # where round 1 always publishes without u, none empties it with u more often than the bound.
    bound = crowding_bound(n, theta, m)
    best = Fraction(0)
    for groups in _partitions(n):
        if _empty_probability(groups, m, theta) == 0:
            best = max(best, _empty_probability(groups + (1,), m, theta))
    assert best > 0
    assert float(best) == pytest.approx(bound.delta, rel=1e-12)


def test_no_population_when_nothing_can_be_crowded():
    assert crowding_bound(100, 1, 10).delta == 0.0   # u's own vote reaches theta
    assert crowding_bound(100, 12, 11).delta == 0.0  # m < theta: no round publishes anything
    assert crowding_bound(5, 3, 6).delta == 0.0      # fewer users than seats


def test_the_neighbours_bound_takes_the_larger_pair():
    assert neighbours_bound(36, 5, 6).delta == max(crowding_bound(36, 5, 6).delta, crowding_bound(35, 5, 6).delta)
    assert neighbours_bound(36, 5, 6).delta > crowding_bound(36, 5, 6).delta


def test_large_populations_in_log_space():
    # A typical plan: n = 10^7, theta = 14, m = 2 * 10^5; the bound underflows to 0, never raises.
    assert crowding_bound(10**7, 14, 200_000).delta == 0.0
    assert 0 < crowding_bound(10**6, 12, 300).delta < 1e-30
    with pytest.raises(ValueError):
        crowding_bound(0, 5, 6)


def test_the_peak_search_finds_the_full_scans_maximum():
    # Above 64 groups the bound bisects for the peak of ln P(K); a full scan of every K, over
    # random plans with a fixed seed, never finds more.
    from triehh_beam.protocol.accounting import crowding

    rng = random.Random(38)
    for _ in range(300):
        theta = rng.randint(2, 40)
        m = rng.randint(65 * (theta - 1) + 1, 4000 + 65 * theta)
        n = rng.randint(m, 100 * m)
        full = max(crowding._log_probability(n, theta, m, k) for k in range(1, (m - 1) // (theta - 1) + 1))
        assert crowding_bound(n, theta, m).log_delta == pytest.approx(min(0.0, full), rel=1e-12, abs=1e-9)
