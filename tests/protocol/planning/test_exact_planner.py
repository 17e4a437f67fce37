"""The exact planner (docs/protocol.md §2, "Exact accounting"): its plan is certified by the
accountant, its p_s is the largest at 6 significant digits, and its branch and bound over tau
finds what a brute-force scan of every tau finds."""

import functools
import math

import pytest

from triehh_beam.protocol.accounting import exact_accountant as ea
from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.planning.exact_planner import largest_probability, plan_exact

OBJECTIVE = 0.9

# (epsilon, delta, L, length): one release of whole items at eps = 1 and at eps = 2, and TrieHH++
# at eps = 2 over L = 4 rounds (unit size 3 for items of up to 9 characters: 4 units).
TARGETS = [(1.0, 1e-8, 1, 1), (2.0, 1e-8, 1, 1), (2.0, 1e-8, 4, 4)]


@functools.lru_cache(maxsize=None)
def _plan(epsilon, delta, rounds, length):
    return plan_exact(epsilon, delta, rounds, OBJECTIVE, length, 1.0)


@functools.lru_cache(maxsize=None)
def _scan(epsilon_round, delta_round, length, top=150):
    """``{tau: (p_s, holders)}`` for every tau in 1..top: the largest p_s at each tau (each
    search starting from the previous tau's, which it checks fits) and the holders it needs."""
    out, start = {}, 0.0
    for tau in range(1, top + 1):
        p = largest_probability(tau, epsilon_round, delta_round, start=start)
        start = p or start
        holders = st.min_holders(OBJECTIVE, p, tau, length, 1.0) if p else None
        out[tau] = (p, math.inf if holders is None else holders)
    return out


@pytest.mark.parametrize("epsilon, delta, rounds, length", TARGETS)
def test_the_plan_is_certified_by_the_accountant(epsilon, delta, rounds, length):
    chosen = _plan(epsilon, delta, rounds, length)
    holders, tau, p, eps_r = chosen.holders, chosen.tau, chosen.sampling_probability, chosen.epsilon_round
    delta_r, composition = chosen.delta_round, chosen.composition
    assert eps_r * rounds <= epsilon and eps_r == pytest.approx(epsilon / rounds, rel=1e-15)
    recomputed = ea.release_delta(eps_r, p, tau)
    assert recomputed.delta == delta_r
    assert recomputed.delta <= delta / rounds
    assert composition.delta <= delta and composition.epsilon <= epsilon
    assert holders == st.min_holders(OBJECTIVE, p, tau, length, 1.0)


@pytest.mark.parametrize("epsilon, delta, rounds, length", TARGETS)
def test_the_plans_probability_is_the_largest_at_six_digits(epsilon, delta, rounds, length):
    chosen = _plan(epsilon, delta, rounds, length)
    tau, p, eps_r = chosen.tau, chosen.sampling_probability, chosen.epsilon_round
    unit = 10.0 ** (math.floor(math.log10(p)) - 5)
    assert float(f"{p:.6g}") == p
    assert ea.release_delta(eps_r, p + unit, tau).delta > delta / rounds


@pytest.mark.parametrize("epsilon, delta, rounds, length", TARGETS)
def test_branch_and_bound_finds_the_brute_force_minimum(epsilon, delta, rounds, length):
    chosen = _plan(epsilon, delta, rounds, length)
    holders, tau, p, eps_r = chosen.holders, chosen.tau, chosen.sampling_probability, chosen.epsilon_round
    scan = _scan(eps_r, delta / rounds, length, top=max(150, holders))
    best = min(h for _, h in scan.values())
    assert holders == best
    assert scan[tau] == (p, holders)
    # The premise of the bound: the largest p_s never decreases with tau (post-processing).
    found = [q for q, _ in scan.values() if q]
    assert found == sorted(found)
    # The scan is long enough: a threshold above `best` needs more than `best` holders.
    assert max(scan) >= best


def _largest_alpha(delta, tau):
    """The largest alpha (6 significant digits, floored) with exp(-C_alpha tau) <= delta: the
    paper's bound, as the bound planner chooses it."""
    lo, hi = 1e-6, 0.5173
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if st.round_delta(mid, tau) <= delta else (lo, mid)
    return math.floor(lo * 1e6) / 1e6


def test_known_plans():
    # eps = 1, delta = 1e-8, one release: the exact accountant allows p_s = 28.8% at tau = 23,
    # and an item needs 98 holders to be released with probability 0.9 (the paper's bound:
    # alpha = 0.194, p_s = 12.3%, 235 holders).
    chosen = _plan(1.0, 1e-8, 1, 1)
    assert (chosen.holders, chosen.tau, chosen.sampling_probability) == (98, 23, 0.288242)
    assert min(_scan(1.0, 1e-8, 1).values(), key=lambda ph: ph[1]) == (0.288242, 98)
    alpha = _largest_alpha(1e-8, 23)
    assert round(alpha, 3) == 0.194 and st.sample_threshold(alpha, 1.0, 23).per_round.delta <= 1e-8
    bound_plan = st.sampling_probability(alpha, 1.0)
    assert round(bound_plan, 3) == 0.123
    assert st.min_holders(OBJECTIVE, bound_plan, 23, 1) == 235
    # eps = 2, one release (outside the paper's theorem, eps <= 1): tau = 20, p_s = 36.3%, 68.
    chosen = _plan(2.0, 1e-8, 1, 1)
    assert (chosen.holders, chosen.tau, round(chosen.sampling_probability, 3)) == (68, 20, 0.363)
    # eps = 2 over L = 4 rounds, items of 4 units: eps_r = 0.5, delta_r = 2.5e-9.
    chosen = _plan(2.0, 1e-8, 4, 4)
    assert (chosen.epsilon_round, chosen.tau, chosen.sampling_probability, chosen.holders) == (
        0.5, 32, 0.218004, 195)


@pytest.mark.parametrize("accounting", ["exact", "bound"])
def test_both_planners_search_thresholds_up_to_the_one_max_tau(monkeypatch, accounting):
    # eps = 1, delta = 1e-8, one release: both planners choose tau = 23 (test_known_plans); with
    # sample_threshold.MAX_TAU lowered to 10 each must stay within it. (The bound's planner kept its
    # own 100,000 before, so it ignored the shared constant.)
    from triehh_beam.protocol.planning.exact_planner import plan_exact as cached
    from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold

    assert plan_sample_threshold(1.0, 1e-8, 1, accounting=accounting).tau == 23
    monkeypatch.setattr(st, "MAX_TAU", 10)
    cached.cache_clear()
    try:
        plan = plan_sample_threshold(1.0, 1e-8, 1, accounting=accounting)
    finally:
        cached.cache_clear()
    assert plan.feasible and plan.tau <= 10
