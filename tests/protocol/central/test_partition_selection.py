"""Optimal partition selection: the keep probability against an independent computation (the
linear program whose optimum the PETS 2022 recurrence claims to be, and Google's DP library
through python-dp where installed), and the keyed coins, contributions and noise against it.

Statistical checks use fixed keys (each is deterministic) and tolerances a correct
implementation misses with probability about 1e-4 or less each: two-sided binomial tails from
SciPy, means within 4.5 standard errors of the closed-form variance.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize, stats

from triehh_beam.protocol.central.partition_release import (PartitionCounter, SelectionKeys,
                                                            contributions, count_contributions,
                                                            item_label, keyed_coin, more_uniforms)
from triehh_beam.protocol.central.partition_selection import (PartitionSelectionPlan, holders_for,
                                                              keep_probabilities, keep_probability,
                                                              plan_partition_selection)
from triehh_beam.protocol.randomness.discrete_laplace import KeyedBits, TwoSidedGeometric
from triehh_beam.protocol.rounds import columnar

SEED = bytes(range(32))


def _binomial_ok(successes, n, p, alpha=1e-4):
    return stats.binom.cdf(successes, n, p) > alpha / 2 and stats.binom.sf(successes - 1, n, p) > alpha / 2


def _lp_optimum(epsilon, delta, n_max):
    """The largest keep probabilities pi(1..n_max) of any (epsilon, delta)-DP keep-or-drop decision
    with pi(0) = 0, found by a linear program over the DP constraints between neighbours (both
    outputs, both directions): maximise sum pi(n). The recurrence's pi is optimal pointwise
    (PETS 2022, Theorem 1), so it must be this LP's unique optimum."""
    e = math.exp(epsilon)
    rows, bounds = [], []
    size = n_max + 1  # pi(0..n_max)

    def add(coefficients, bound):
        row = np.zeros(size)
        for index, value in coefficients:
            row[index] += value
        rows.append(row)
        bounds.append(bound)

    for n in range(1, size):
        a, b = n, n - 1
        for x, y in ((a, b), (b, a)):
            add([(x, 1), (y, -e)], delta)  # P(keep | x) <= e^eps P(keep | y) + delta
            add([(x, -1), (y, e)], delta + e - 1)  # P(drop | x) <= e^eps P(drop | y) + delta
    result = optimize.linprog(-np.ones(size), A_ub=np.array(rows), b_ub=np.array(bounds),
                              bounds=[(0, 0)] + [(0, 1)] * n_max, method="highs")
    assert result.status == 0
    return result.x[1:]


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-3), (0.3, 0.01), (2.0, 1e-5)])
def test_the_keep_probability_is_the_linear_programs_optimum(epsilon, delta):
    n_max = 60
    lp = _lp_optimum(epsilon, delta, n_max)
    ours = np.array([keep_probability(n, epsilon, delta) for n in range(1, n_max + 1)])
    assert np.allclose(ours, lp, rtol=1e-6, atol=1e-9), np.max(np.abs(ours - lp))


@pytest.mark.parametrize("epsilon, delta, k", [(1.0, 1e-8, 1), (0.5, 1e-8, 1), (2.0, 1e-6, 1), (1.0, 1e-8, 3)])
def test_the_keep_probability_matches_googles_library(epsilon, delta, k):
    selection = pytest.importorskip("pydp.algorithms.partition_selection")
    theirs = selection.create_partition_strategy("truncated_geometric", epsilon, delta, k)
    plan = PartitionSelectionPlan(epsilon, delta, k, 1.0)
    for n in range(1, 400):
        expected = theirs.probability_of_keep(n)
        # k > 1: the library splits delta as 1 - (1 - delta)^(1/k), we as delta / k (a hair smaller).
        assert plan.keep_probability(n) == pytest.approx(expected, rel=1e-9 if k == 1 else 1e-7, abs=1e-300)
        assert plan.keep_probability(n) <= expected * (1 + 1e-12)


def test_the_recurrence_satisfies_dp_between_neighbours_and_reaches_one():
    for epsilon, delta in [(1.0, 1e-8), (0.1, 1e-10), (3.0, 0.2)]:
        table = (0.0,) + keep_probabilities(epsilon, delta)
        assert table[-1] == 1.0 and all(p < 1 for p in table[:-1])
        e = math.exp(epsilon)
        for a, b in zip(table, table[1:]):
            assert b <= (e * a + delta) * (1 + 1e-12)  # (tight: equal but for rounding)
            assert 1 - a <= (e * (1 - b) + delta) * (1 + 1e-12) + 1e-15
            assert a <= b


def test_holders_for_the_issues_targets():
    # Issue 41: the central optimum needs 38 / 20 / 11 holders for a 90% release at delta = 1e-8.
    assert [holders_for(0.9, e, 1e-8) for e in (0.5, 1.0, 2.0)] == [38, 20, 11]
    plan = plan_partition_selection(2.0, 1e-8, max_items=1, selection_share=0.5)
    assert plan.selection_epsilon == 1.0 and plan.count_epsilon == 1.0 and plan.holders_for(0.9) == 20
    two = plan_partition_selection(2.0, 1e-8, max_items=2, selection_share=1.0)
    assert two.item_epsilon == 1.0 and two.item_delta == 5e-9 and two.count_noise_epsilon is None
    assert keep_probability(0, 1.0, 1e-8) == 0.0 and keep_probability(10**9, 1.0, 1e-8) == 1.0


@pytest.mark.parametrize("kwargs", [dict(epsilon=0.0), dict(delta=1.0), dict(max_items=0),
                                    dict(selection_share=0.0), dict(selection_share=1.5), dict(epsilon=float("nan"))])
def test_bad_plans_are_refused(kwargs):
    with pytest.raises(ValueError):
        PartitionSelectionPlan(**{**dict(epsilon=1.0, delta=1e-8), **kwargs})


class _Bits:
    """A stand-in stream returning given 64-bit words."""

    def __init__(self, words):
        self.words = list(words)

    def bits(self, count):
        assert count == 64
        return self.words.pop(0)


def test_the_coin_compares_the_uniform_with_p_exactly():
    p = 1e-8  # its binary expansion runs past 64 bits
    head = int(Fraction(p) * 2**64)
    assert keyed_coin(head - 1, lambda: _Bits([]), p) is True
    assert keyed_coin(head + 1, lambda: _Bits([]), p) is False
    rest = Fraction(p) * 2**64 - head  # p's next bits
    nxt = int(rest * 2**64)
    assert keyed_coin(head, lambda: _Bits([nxt - 1]), p) is True
    assert keyed_coin(head, lambda: _Bits([nxt + 1]), p) is False
    short = 0.25  # 2 bits: a tie on them means U >= p
    assert keyed_coin(2**62, lambda: _Bits([]), short) is False and keyed_coin(2**62 - 1, lambda: _Bits([]), short)
    assert keyed_coin(0, lambda: _Bits([]), 1.0) is True and keyed_coin(0, lambda: _Bits([]), 0.0) is False


def _counter(epsilon=1.0, delta=1e-3, share=1.0, k=1, identity=b"release-a"):
    return PartitionCounter(PartitionSelectionPlan(epsilon, delta, k, share), SelectionKeys.derive(SEED, identity))


@pytest.mark.parametrize("users", [1, 3, 6, 10])
def test_the_released_rate_over_many_keyed_coins_is_the_keep_probability(users):
    counter = _counter()
    items = [("w", str(i)) for i in range(20000)]
    kept = counter.kept(items, [users] * len(items))
    p = keep_probability(users, 1.0, 1e-3)
    assert 0 < p < 1
    assert _binomial_ok(int(kept.sum()), len(items), p), (int(kept.sum()), p)


def test_coins_are_reproducible_per_release_and_independent_between_releases():
    items = [("x", str(i)) for i in range(5000)]
    users = [5] * len(items)
    first, again = _counter().kept(items, users), _counter().kept(items, users)
    other = _counter(identity=b"release-b").kept(items, users)
    assert (first == again).all()
    p = keep_probability(5, 1.0, 1e-3)
    both = int((first & other).sum())
    assert _binomial_ok(both, len(items), p * p)  # independent coins: both kept with p^2


def test_released_items_carry_their_count_plus_two_sided_geometric_noise():
    counter = _counter(epsilon=2.0, delta=1e-3, share=0.5, k=2)  # counts' noise epsilon 1 / 2
    counts = {("i", str(i)): 500 for i in range(4000)}
    released = counter.extract_released(counts)
    assert len(released) == 4000  # 500 users: kept surely
    noise = np.array([c - 500 for _, c in released])
    expected = TwoSidedGeometric(0.5)
    assert abs(noise.mean()) < 4.5 * math.sqrt(expected.variance / len(noise))
    assert abs(noise.var() / expected.variance - 1) < 0.1
    assert counter.extract_released(counts) == released  # the same keys: the same noise


def test_only_kept_items_leave_the_counter():
    counter = _counter(epsilon=1.0, delta=1e-6)
    counts = {("rare", str(i)): 1 for i in range(3000)}
    counts.update({("common", str(i)): 40 for i in range(50)})
    released = dict(counter.extract_released(counts))
    assert all(item[0] == "common" for item in released)  # pi(1) = 1e-6: none of 3000 (1 - P ~ 0.003)
    assert len(released) == 50 and set(released.values()) == {None}  # share 1: no counts
    kept = counter.kept(sorted(counts), [counts[i] for i in sorted(counts)])
    assert sorted(released) == [i for i, k in zip(sorted(counts), kept) if k]


def test_item_labels_are_injective():
    items = [("ab",), ("a", "b"), ("a,b",), ('a"', "b"), (b"ab",), (b"a", b"b"), ()]
    assert len({item_label(i) for i in items}) == len(items)


def _table(users_items):
    distinct = sorted({s for items in users_items for s, _ in items})
    offsets, codes, counts = [0], [], []
    for items in users_items:
        for s, c in items:
            codes.append(distinct.index(s))
            counts.append(c)
        offsets.append(len(codes))
    return columnar.sequence_table(distinct, np.array(offsets), np.array(codes), np.array(counts))


def test_contributions_bound_each_user_to_k_distinct_items_drawn_by_local_frequency():
    a, b, c = ("a",), ("b",), ("c",)
    n = 30000
    table = _table([[(a, 2), (b, 1), (c, 1)]] * n + [[(a, 1)]])
    uniforms = np.random.default_rng(7).random(n + 1)
    chosen = contributions(table, uniforms, 2)
    assert len(chosen) == 2 * n + 1  # the last user holds one item: it contributes it alone
    pairs = np.stack([chosen[:n], chosen[n + 1:]])  # draw 0 of every user, then draw 1 of those left
    assert (pairs[0] != pairs[1]).all()
    without_c = int(np.sum((pairs != table.sequences.index(c)).all(axis=0)))
    # P({a, b}) = P(a) P(b | not a) + P(b) P(a | not b) = 1/2 * 1/2 + 1/4 * 2/3 = 5/12
    assert _binomial_ok(without_c, n, 5 / 12)
    counts = count_contributions(table, uniforms, 2)
    assert sum(counts.values()) == 2 * n + 1 and counts[a] <= n + 1
    codes, times = np.unique(columnar.choose_codes(table, uniforms), return_counts=True)
    assert count_contributions(table, uniforms, 1) == {table.sequences[c]: int(t) for c, t in zip(codes, times)}


def test_more_uniforms_are_a_keyed_function_of_the_first():
    u = np.random.default_rng(3).random(10000)
    assert more_uniforms(u, 0) is u
    second = more_uniforms(u, 1)
    assert (second == more_uniforms(u, 1)).all() and ((second >= 0) & (second < 1)).all()
    assert abs(np.corrcoef(u, second)[0, 1]) < 0.05
    assert stats.kstest(second, "uniform").pvalue > 1e-4
