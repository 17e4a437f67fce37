"""Noisy prefix rounds (issue 41): the plan's composed epsilon against an independent closed form
of L discrete Laplace mechanisms; the threshold against the tail summed from the pmf; the
release's keep rates (voted and unvoted candidates) against their closed forms over many keyed
releases, with stated tolerances; keyed reproducibility; nothing below the threshold leaves."""

from __future__ import annotations

import math

import numpy as np
import pytest

from triehh_beam.protocol.central.noisy_release import NoisyRoundKeys, candidate_units, release_round
from triehh_beam.protocol.central.noisy_rounds import (NoisyRoundsPlan, at_least, plan_noisy_rounds,
                                                       pld_epsilon, zcdp_epsilon)


def _exact_delta(round_epsilon: float, rounds: int, epsilon: float) -> float:
    """delta(epsilon) of ``rounds`` discrete Laplace mechanisms (shift 1), written out: one
    round's privacy loss is +eps_r with probability 1/(1 + a) and -eps_r otherwise (a = e^-eps_r),
    so the composed loss is eps_r (2K - L), K ~ Bin(L, 1/(1 + a)), and delta is
    E[max(0, 1 - e^(epsilon - loss))] (symmetric in the pair's order)."""
    a = math.exp(-round_epsilon)
    p = 1 / (1 + a)
    total = 0.0
    for k in range(rounds + 1):
        loss = round_epsilon * (2 * k - rounds)
        if loss > epsilon:
            total += math.comb(rounds, k) * p**k * (1 - p) ** (rounds - k) * (1 - math.exp(epsilon - loss))
    return total


def _exact_epsilon(round_epsilon: float, rounds: int, delta: float) -> float:
    low, high = 0.0, rounds * round_epsilon
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (low, middle) if _exact_delta(round_epsilon, rounds, middle) <= delta else (middle, high)
    return high


@pytest.mark.parametrize("round_epsilon, rounds, delta", [(0.125, 4, 1e-8), (0.1, 20, 1e-5), (0.05, 60, 1e-6),
                                                          (0.3, 10, 1e-8)])
def test_pld_epsilon_matches_the_closed_form(round_epsilon, rounds, delta):
    exact = _exact_epsilon(round_epsilon, rounds, delta)
    certified = pld_epsilon(round_epsilon, rounds, delta)
    # pessimistic (never below the truth) and within the PLD's grid (1e-4 per round's loss).
    assert exact - 1e-9 <= certified <= exact + rounds * 1e-4 + 1e-6, (exact, certified)


def test_zcdp_is_the_bun_steinke_conversion_and_never_above_basic():
    rho = 60 * 0.05**2 / 2
    assert zcdp_epsilon(0.05, 60, 1e-5) == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e5)))
    assert zcdp_epsilon(0.05, 60, 1e-5) < 3.0  # below basic there
    assert zcdp_epsilon(0.125, 4, 1e-8) == 0.5  # its conversion exceeds basic composition here


@pytest.mark.parametrize("epsilon, delta, rounds", [(0.5, 1e-8, 4), (1.0, 1e-8, 4), (4.0, 1e-6, 40)])
def test_the_plan_is_certified_and_as_large_as_its_accountants_allow(epsilon, delta, rounds):
    plan = plan_noisy_rounds(epsilon, delta, rounds)
    assert plan.certified_epsilon <= epsilon
    assert _exact_delta(plan.round_epsilon, rounds, epsilon) <= delta  # independent: the guarantee holds
    assert plan.round_epsilon >= epsilon / rounds  # never worse than basic composition
    # maximal to the bisection's precision: 1% more noise-free would break the certificate
    assert pld_epsilon(plan.round_epsilon * 1.01, rounds, delta) > epsilon or plan.round_epsilon == epsilon
    if rounds == 40:  # many rounds: composition beats basic, and PLD beats zCDP
        assert plan.accountant == "pld" and plan.round_epsilon > 1.3 * epsilon / rounds
        assert plan_noisy_rounds(epsilon, delta, rounds, accountant="zcdp").round_epsilon < plan.round_epsilon


def test_the_threshold_is_the_smallest_that_bounds_false_prefixes():
    plan = plan_noisy_rounds(0.5, 1e-8, 4, false_prefixes=1.0)
    noise = plan.noise
    for candidates in (1, 27, 18_279, 100 * 18_279):
        t = plan.threshold(candidates)
        tail = lambda k: math.fsum(noise.pmf(z) for z in range(k, k + 4000))  # noqa: E731 (pmf summed)
        assert candidates * tail(t) <= 1.0 / 4 * (1 + 1e-9)
        assert t == 1 or candidates * tail(t - 1) > 1.0 / 4
    with pytest.raises(ValueError, match="candidates"):
        plan.threshold(0)


def test_holders_needed_is_where_the_keep_probability_crosses():
    plan = plan_noisy_rounds(0.5, 1e-8, 4)
    c = plan.holders_needed(18_279, 0.9)
    t = plan.threshold(18_279)
    assert at_least(plan.round_epsilon, t - c) >= 0.9 > at_least(plan.round_epsilon, t - c + 1)
    assert plan.holders_needed(18_279, 0.5) == t  # P(Z >= 0) > 1/2 > P(Z >= 1)


def test_bad_plans_are_refused():
    with pytest.raises(ValueError, match="delta"):
        plan_noisy_rounds(0.5, 0.0, 4)
    with pytest.raises(ValueError, match="accountant"):
        plan_noisy_rounds(0.5, 1e-8, 4, accountant="rdp")
    with pytest.raises(ValueError, match="above the target"):
        NoisyRoundsPlan(0.5, 1e-8, 4, 0.2, "pld", 0.8)


def _keys(i: int, identity: bytes = b"release") -> NoisyRoundKeys:
    return NoisyRoundKeys.derive(i.to_bytes(32, "big"), identity)


def test_keep_rates_of_voted_candidates_match_the_closed_form():
    """Each voted candidate is kept with P(c + Z >= T): 600 keyed releases of 9 candidates, the
    rates within 4.5 standard errors of the closed form (a false failure has probability < 1e-4)."""
    plan = NoisyRoundsPlan(4.0, 1e-6, 4, 1.0, "pld", 4.0, false_prefixes=1e-3)
    units = candidate_units("ab", 1)
    frontier = [("a",), ("b",)]
    t = plan.threshold(len(frontier) * len(units))
    votes = {("a", "a"): t - 3, ("a", "b"): t - 2, ("a", ""): t - 1, ("b", "a"): t, ("b", "b"): t + 1,
             ("b", ""): t + 2}
    runs = 600
    kept = {c: 0 for c in votes}
    for i in range(runs):
        released = release_round(votes, frontier, units, 2, plan, _keys(i))
        for c in released:
            kept[c] += 1
            assert released[c] >= t
    for candidate, count in votes.items():
        p = at_least(plan.round_epsilon, t - count)
        assert abs(kept[candidate] / runs - p) <= 4.5 * math.sqrt(p * (1 - p) / runs) + 1e-12, (count, kept, p)


def test_unvoted_candidates_are_kept_at_rate_q_with_threshold_plus_geometric_counts():
    """No votes at all: the kept count over 200 releases of 18,279 x 3 candidates is Poisson-like
    with mean 200 C q(T) (binomial, 4.5 sigma); their counts are T + G, E[G] = a / (1 - a) (the
    sample mean within 4.5 standard errors of G's)."""
    plan = NoisyRoundsPlan(1.0, 1e-8, 4, 0.25, "pld", 1.0, false_prefixes=40.0)
    units = candidate_units("abcdefghijklmnopqrstuvwxyz", 3)
    frontier = [("the",), ("and",), ("for",)]
    candidates = len(frontier) * len(units)
    t = plan.threshold(candidates)
    q = at_least(plan.round_epsilon, t)
    runs, counts = 200, []
    for i in range(runs):
        released = release_round({}, frontier, units, 2, plan, _keys(i))
        counts += list(released.values())
        assert all(p[:-1] in frontier and p[-1] in units for p in released)
    mean = runs * candidates * q
    assert abs(len(counts) - mean) <= 4.5 * math.sqrt(mean * (1 - q)), (len(counts), mean)
    a = math.exp(-plan.round_epsilon)
    g = np.asarray(counts) - t
    assert g.min() >= 0
    sd = math.sqrt(a) / (1 - a)
    assert abs(g.mean() - a / (1 - a)) <= 4.5 * sd / math.sqrt(len(g)), (g.mean(), a / (1 - a))


def test_the_release_is_keyed_reproducible_and_never_below_its_threshold():
    plan = plan_noisy_rounds(0.5, 1e-8, 4, false_prefixes=0.1)
    units = candidate_units("abc", 3)
    frontier = [()]
    votes = {(u,): 20 + 3 * i for i, u in enumerate(units[:30])}
    t = plan.threshold(len(units))
    first = release_round(votes, frontier, units, 1, plan, _keys(1))
    assert first == release_round(votes, frontier, units, 1, plan, _keys(1))  # a resume redraws the same
    other = release_round(votes, frontier, units, 1, plan, _keys(1, b"another release"))
    assert first != other  # another release: other noise
    assert first and all(count >= t for count in first.values())
    dropped = [c for c in votes if c not in first]
    assert dropped  # the threshold bites: those candidates, and their counts, are nowhere
    with pytest.raises(ValueError, match="outside"):
        release_round({("zz", "a"): 3}, frontier, units, 1, plan, _keys(1))


def test_holders_for_a_release_multiply_the_rounds_keep_probabilities():
    plan = plan_noisy_rounds(0.5, 1e-8, 4)
    rounds = [18_278, 100 * 18_279, 100 * 18_279, 100 * 18_279]
    thresholds = [plan.threshold(c) for c in rounds]
    for p in (0.5, 0.9):
        c = plan.holders_for(p, rounds)
        keep = lambda h: math.prod(  # noqa: E731 (summed from the pmf: an independent tail)
            math.fsum(plan.noise.pmf(z) for z in range(t - h, t - h + 4000)) for t in thresholds)
        assert keep(c) >= p > keep(c - 1), (p, c)
    assert plan.holders_for(0.9, rounds) > plan.holders_needed(100 * 18_279, 0.9)  # four rounds to clear, not one
