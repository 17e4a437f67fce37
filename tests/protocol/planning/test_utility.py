"""Proposition 1 (worst-case discovery) and the planning questions built on it."""

import math

import numpy as np
import pytest

from triehh_beam.protocol.planning import planner, utility
from triehh_beam.protocol.planning.utility import (count_for_fraction, discovery_probability,
                                                   discovery_probability_for_fraction, min_frequency,
                                                   min_frequency_for_plan, min_population,
                                                   survival_probability)


def _exact_survival(count: int, n: int, m: int, theta: int) -> float:
    """P(X >= theta) for X ~ Hypergeometric(n, count, m), summed with exact integers."""
    total = math.comb(n, m)
    hits = sum(
        math.comb(count, x) * math.comb(n - count, m - x)
        for x in range(theta, min(count, m) + 1)
    )
    return hits / total


@pytest.mark.parametrize(
    "count, n, m, theta",
    [(0, 30, 10, 1), (5, 30, 10, 2), (12, 30, 10, 4), (30, 30, 10, 10), (29, 30, 10, 10),
     (7, 40, 40, 7), (7, 40, 40, 8), (20, 60, 15, 5), (3, 60, 15, 4), (50, 200, 30, 9)],
)
def test_survival_matches_exact_sum(count, n, m, theta):
    assert survival_probability(count, n, m, theta) == pytest.approx(
        _exact_survival(count, n, m, theta), rel=1e-10, abs=1e-15
    )


def test_discovery_is_survival_to_the_length():
    for length in (1, 3, 10):
        p = survival_probability(50, 200, 30, 9)
        assert discovery_probability(50, 200, 30, 9, length) == pytest.approx(p**length)
        exact = _exact_survival(50, 200, 30, 9) ** length
        assert discovery_probability(50, 200, 30, 9, length) == pytest.approx(exact, rel=1e-10)


def test_discovery_monte_carlo():
    # Fixed seed; each trial runs `length` rounds, each sampling m of n users without
    # replacement (random keys, the m smallest) and counting the f holders among them.
    # Tolerance: 4.5 standard errors of the estimate (a false failure ~1 in 150,000 runs).
    # It has power: sampling with replacement (binomial) would give 0.309 instead of 0.347.
    n, f, m, theta, length, trials = 200, 28, 40, 5, 3, 30_000
    rng = np.random.default_rng(20240611)
    survived = np.ones(trials, dtype=bool)
    for _ in range(length):
        for start in range(0, trials, 5_000):
            keys = rng.random((5_000, n))
            sampled = np.argpartition(keys, m, axis=1)[:, :m]
            votes = (sampled < f).sum(axis=1)  # users 0..f-1 hold the item
            survived[start:start + 5_000] &= votes >= theta
    estimate = survived.mean()
    expected = discovery_probability(f, n, m, theta, length)
    se = math.sqrt(expected * (1 - expected) / trials)
    assert 0.2 < expected < 0.8  # a regime where the check has power
    assert abs(estimate - expected) <= 4.5 * se, (estimate, expected, se)


def test_survival_edge_cases():
    assert survival_probability(3, 100, 50, 4) == 0.0  # fewer holders than theta
    assert survival_probability(100, 100, 50, 4) == 1.0  # everyone holds it
    assert survival_probability(60, 100, 50, 4) == 1.0  # any 50 of 100 include >= 10 holders
    assert survival_probability(10, 100, 3, 4) == 0.0  # batch smaller than theta


@pytest.mark.parametrize(
    "call",
    [
        lambda: survival_probability(101, 100, 10, 4),
        lambda: survival_probability(-1, 100, 10, 4),
        lambda: survival_probability(10, 100, 101, 4),
        lambda: survival_probability(10, 0, 0, 4),
        lambda: survival_probability(10, 100, 10, 0),
        lambda: survival_probability(10.0, 100, 10, 4),
        lambda: discovery_probability(10, 100, 10, 4, 0),
        lambda: count_for_fraction(1.5, 100),
        lambda: count_for_fraction(-0.1, 100),
        lambda: min_frequency(0.0, 100, 10, 4, 3),
        lambda: min_frequency(1.5, 100, 10, 4, 3),
        lambda: min_population(0.0, 0.9, 4.0, 1e-10, 10),
        lambda: min_population(0.01, 0.9, 0.0, 1e-10, 10),
        lambda: min_population(0.01, 0.9, 4.0, 1.0, 10),
        lambda: min_population(0.01, 0.9, 4.0, 1e-10, 10, length=11),
        lambda: min_population(0.01, 0.9, 4.0, 1e-10, 10, rule="paper"),
    ],
)
def test_validation(call):
    with pytest.raises(ValueError):
        call()


def test_count_for_fraction():
    assert count_for_fraction(0.07, 100) == 7  # 7.000000000000001 in floats
    assert count_for_fraction(0.01, 12_345) == 124  # 123.45 holders means at least 124
    assert count_for_fraction(0.0, 100) == 0
    assert count_for_fraction(1.0, 100) == 100
    assert count_for_fraction(1e-9, 100) == 1
    assert discovery_probability_for_fraction(0.25, 200, 30, 9, 2) == pytest.approx(
        discovery_probability(50, 200, 30, 9, 2)
    )


@pytest.mark.parametrize("target", [0.01, 0.5, 0.9, 0.99, 1.0])
@pytest.mark.parametrize("n, m, theta, length", [(200, 30, 9, 3), (10**5, 2354, 14, 10),
                                                 (10**7, 30_000, 15, 5)])
def test_min_frequency_is_tight(target, n, m, theta, length):
    need = min_frequency(target, n, m, theta, length)
    assert need is not None
    assert need.probability >= target
    assert need.probability == discovery_probability(need.count, n, m, theta, length)
    assert discovery_probability(need.count - 1, n, m, theta, length) < target
    assert need.fraction == need.count / n


def test_min_frequency_unreachable():
    assert min_frequency(0.5, 100, 3, 4, 2) is None  # m < theta: nothing survives


def test_min_frequency_for_plan():
    p = planner.plan(100_000, 4, 1e-10, 10)
    need = min_frequency_for_plan(p, 0.9)
    assert need.length == 10 and (need.n, need.batch_size, need.theta) == (100_000, 2354, 14)
    shorter = min_frequency_for_plan(p, 0.9, length=4)
    assert shorter.count < need.count
    with pytest.raises(ValueError, match="infeasible"):
        min_frequency_for_plan(planner.plan(10**4, 1, 1e-8, 10), 0.9)
    with pytest.raises(ValueError):
        min_frequency_for_plan(p, 0.9, length=11)


def _probability_at(n, fraction, eps, delta, max_length, rule, length):
    """The forward computation, written out independently of min_population's helper."""
    p = planner.plan(n, eps, delta, max_length, rule, with_alternatives=False)
    if not p.feasible:
        return 0.0
    return discovery_probability(math.ceil(round(fraction * n, 9)), n, p.batch_size, p.theta,
                                 length)


@pytest.mark.parametrize(
    "fraction, target, eps, delta, max_length, rule, length",
    [
        (0.01, 0.9, 4.0, 2.3e-12, 10, "authors", None),
        (0.01, 0.5, 4.0, 2.3e-12, 10, "corollary1", None),
        (0.001, 0.9, 1.0, 1e-10, 10, "authors", 6),
        (0.05, 0.99, 2.0, 1e-8, 10, "authors", None),
        (0.2, 0.9, 8.0, 1e-6, 5, "corollary1", 3),
    ],
)
def test_min_population_consistent_with_forward(fraction, target, eps, delta, max_length, rule,
                                                length):
    need = min_population(fraction, target, eps, delta, max_length, rule=rule, length=length)
    length = max_length if length is None else length
    assert need is not None
    at = _probability_at(need.n, fraction, eps, delta, max_length, rule, length)
    below = _probability_at(need.n - 1, fraction, eps, delta, max_length, rule, length)
    assert at >= target > below
    assert need.probability == pytest.approx(at) and need.probability_below == pytest.approx(below)
    # ... and a coarser grid below is short too (the search did not stop at a local blip)
    for smaller in (int(need.n * 0.98), int(need.n * 0.9), int(need.n * 0.5)):
        assert _probability_at(smaller, fraction, eps, delta, max_length, rule, length) < target
    # the reported plan is the planner's at n
    p = planner.plan(need.n, eps, delta, max_length, rule)
    assert (need.theta, need.batch_size, need.epsilon, need.delta) == (
        p.theta, p.batch_size, p.epsilon, p.delta)
    assert need.count == count_for_fraction(fraction, need.n)


def test_min_population_plans_logarithmically_many_populations(monkeypatch):
    # Fast by construction, whatever the machine: the exponential search and the bisection
    # evaluate about 2 log2(n) candidate populations (n = 20,087 ... 10,150,001 here).
    planned = []
    plan_at = utility._planned_probability
    monkeypatch.setattr(utility, "_planned_probability", lambda n, *rest: planned.append(n) or plan_at(n, *rest))
    for fraction in (0.05, 0.01, 0.001, 0.0001):
        planned.clear()
        found = min_population(fraction, 0.9, 4.0, 1e-10, 10)
        assert found is not None
        assert len(planned) <= 2 * math.ceil(math.log2(found.n)) + 4, (found.n, len(planned))


def test_min_population_smaller_fraction_needs_more_users():
    needs = [min_population(f, 0.9, 4.0, 1e-10, 10).n for f in (0.05, 0.01, 0.001)]
    assert needs == sorted(needs)
    budgets = [min_population(0.01, 0.9, e, 1e-10, 10).n for e in (8.0, 4.0, 2.0, 1.0)]
    assert budgets == sorted(budgets)


# --- Users with several items (issue 15): a holder votes for the item by its share ------------


def _exact_thinned_survival(count, n, m, theta, share):
    """P(X >= theta), X ~ Binomial(H, share), H ~ Hypergeometric(n, count, m): exact sums."""
    from fractions import Fraction

    s = Fraction(share)
    total = 0
    for h in range(theta, min(count, m) + 1):
        sampled = Fraction(math.comb(count, h) * math.comb(n - count, m - h), math.comb(n, m))
        votes = sum(math.comb(h, x) * s**x * (1 - s) ** (h - x) for x in range(theta, h + 1))
        total += sampled * votes
    return float(total)


@pytest.mark.parametrize("count, n, m, theta, share", [
    (60, 200, 40, 5, 0.25), (120, 200, 40, 5, 0.25), (30, 60, 15, 4, 0.5), (50, 200, 30, 9, 0.9),
    (10, 40, 40, 3, 1 / 3), (5, 30, 10, 2, 0.01),
])
def test_survival_with_a_share_matches_exact_sums(count, n, m, theta, share):
    assert survival_probability(count, n, m, theta, share) == pytest.approx(
        _exact_thinned_survival(count, n, m, theta, share), rel=1e-9, abs=1e-15)


def test_a_share_of_one_is_one_item_per_user_and_shares_only_lower_it():
    assert survival_probability(50, 200, 30, 9, 1.0) == survival_probability(50, 200, 30, 9)
    probabilities = [survival_probability(120, 200, 40, 5, s) for s in (1.0, 0.5, 0.25, 0.1)]
    assert probabilities == sorted(probabilities, reverse=True) and probabilities[-1] > 0


def test_several_items_monte_carlo():
    # Fixed seed; each trial runs `length` rounds: m of n users sampled without replacement,
    # each sampled holder (users 0..f-1) votes for the item with probability `share` (its
    # share of the holder's records: the vote's choice, drawn apart from the sample). Tolerance:
    # 4.5 standard errors. Power: the plug-in "user-equivalents" f*share = 30 single-item
    # holders would give 0.586 instead of 0.547, 8 standard errors away.
    n, f, m, theta, length, share, trials = 200, 120, 40, 5, 2, 0.25, 30_000
    rng = np.random.default_rng(20240615)
    survived = np.ones(trials, dtype=bool)
    for _ in range(length):
        for start in range(0, trials, 5_000):
            sampled = np.argpartition(rng.random((5_000, n)), m, axis=1)[:, :m]
            chose_it = rng.random((5_000, m)) < share
            votes = ((sampled < f) & chose_it).sum(axis=1)
            survived[start:start + 5_000] &= votes >= theta
    estimate = survived.mean()
    expected = discovery_probability(f, n, m, theta, length, share)
    se = math.sqrt(expected * (1 - expected) / trials)
    assert abs(estimate - expected) <= 4.5 * se, (estimate, expected, se)
    plug_in = discovery_probability(f // 4, n, m, theta, length)
    assert abs(plug_in - expected) > 8 * se


def test_min_frequency_with_a_share_is_tight_and_above_the_plug_in():
    n, m, theta, length = 10**6, 21_978, 15, 10
    one = min_frequency(0.9, n, m, theta, length)
    quarter = min_frequency(0.9, n, m, theta, length, share=0.25)
    assert one.count == 1148 and quarter.share == 0.25
    assert discovery_probability(quarter.count, n, m, theta, length, 0.25) >= 0.9
    assert discovery_probability(quarter.count - 1, n, m, theta, length, 0.25) < 0.9
    # Four items a user is more than four times the holders: user-equivalents are no bound.
    assert quarter.count > 4 * one.count and quarter.user_equivalents > one.count
    assert quarter.to_dict()["user_equivalents"] == quarter.count * 0.25
    plan = planner.plan(n, 4, 1e-12, length)
    assert min_frequency_for_plan(plan, 0.9, share=0.25).count == quarter.count


@pytest.mark.parametrize("share", [0, -0.5, 1.5, "half", True])
def test_share_is_validated(share):
    with pytest.raises(ValueError, match="share"):
        survival_probability(5, 30, 10, 2, share)
