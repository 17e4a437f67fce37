"""Sample-and-threshold (TrieHH++): the accountant against hand-computed values, its conditions,
the worst-case utility against a closed form and a Monte Carlo, and the planner's choice against
a brute-force search."""

import math

import numpy as np
import pytest

from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.planning.sample_threshold_planner import ALPHA_MAX, plan_sample_threshold


def test_the_papers_example_by_hand():
    # eps = 1, alpha = 1/6: p_s = (1 - e^-1)/6 = 0.632121/6 = 0.105354;
    # C = ln 6 - 6/7 = 1.791759 - 0.857143 = 0.934616; tau = 20: delta = e^-18.692 = 7.62e-9.
    assert st.sampling_probability(1 / 6, 1.0) == pytest.approx(0.105354, abs=1e-6)
    assert st.c_alpha(1 / 6) == pytest.approx(0.934616, abs=1e-6)
    g = st.sample_threshold(1 / 6, 1.0, 20)
    assert g.per_round.delta == pytest.approx(7.621e-9, rel=1e-3)
    assert g.per_round.delta < 1e-8
    assert g.total.epsilon == 1.0 and g.total.delta == g.per_round.delta


def test_the_issues_figures_by_hand():
    # eps = 4 over L = 4: eps_r = 1; delta = 1e-8: delta_r = 2.5e-9, so C * tau >= ln(4e8) = 19.807.
    # alpha = 0.18: C = ln(1/0.18) - 1/1.18 = 1.714798 - 0.847458 = 0.867340; tau = 23: 19.949.
    g = st.sample_threshold(0.18, 1.0, 23, rounds=4)
    assert g.c_alpha == pytest.approx(0.867340, abs=1e-6)
    assert g.per_round.delta == pytest.approx(math.exp(-19.94882), rel=1e-4)
    assert g.per_round.delta <= 2.5e-9
    assert g.sampling_probability == pytest.approx(0.1138, abs=1e-4)  # 11.4%
    assert g.total.epsilon == pytest.approx(4.0) and g.total.delta == pytest.approx(4 * g.per_round.delta)
    assert g.total.delta < 1e-8
    # tau = 22 does not reach it at alpha = 0.18 (C * 22 = 19.08 < 19.807).
    assert st.sample_threshold(0.18, 1.0, 22, rounds=4).total.delta > 1e-8


@pytest.mark.parametrize("alpha, eps_r, tau, condition", [
    (0.0, 1.0, 20, "0 < alpha <= 1"),
    (1.5, 1.0, 20, "0 < alpha <= 1"),
    (0.6, 1.0, 20, "C_alpha"),  # ln(1/0.6) - 1/1.6 = 0.511 - 0.625 < 0
    (0.1, 1.01, 20, "eps_r <= 1"),
    (0.1, 0.5, 0, "tau >= 1"),
])
def test_conditions_are_enforced_with_the_numbers(alpha, eps_r, tau, condition):
    with pytest.raises(st.SampleThresholdConditionError) as err:
        st.sample_threshold(alpha, eps_r, tau)
    assert condition in str(err.value)
    assert len(err.value.violations) == 1


def test_c_alpha_changes_sign_where_the_planner_says():
    assert st.c_alpha(ALPHA_MAX) > 0 > st.c_alpha(ALPHA_MAX + 1e-9)
    assert 0.51 < ALPHA_MAX < 0.52


def test_survival_is_the_binomial_tail_in_closed_form():
    # f = 30, p = 0.2, tau = 3: 1 - sum_{k<3} C(30,k) 0.2^k 0.8^(30-k).
    closed = 1 - sum(math.comb(30, k) * 0.2**k * 0.8 ** (30 - k) for k in range(3))
    assert st.survival_probability(30, 0.2, 3) == pytest.approx(closed, rel=1e-12)
    assert st.discovery_probability(30, 0.2, 3, 4) == pytest.approx(closed**4, rel=1e-12)
    # share thins each holder's vote: Binomial(f, p * s).
    assert st.survival_probability(30, 0.4, 3, share=0.5) == pytest.approx(closed, rel=1e-12)
    assert st.survival_probability(2, 0.9, 3) == 0.0


def test_survival_matches_a_monte_carlo_of_bernoulli_sampling_and_choice():
    # Holders sampled with p_s, each then votes for the item with probability s (independent).
    rng = np.random.default_rng(7)
    f, p, s, tau, trials = 120, 0.15, 0.5, 9, 200_000
    votes = ((rng.random((trials, f)) < p) & (rng.random((trials, f)) < s)).sum(axis=1)
    observed = np.mean(votes >= tau)
    expected = st.survival_probability(f, p, tau, share=s)
    sd = math.sqrt(expected * (1 - expected) / trials)
    assert abs(observed - expected) < 5 * sd  # 5 sd: a false alarm once in ~3.5 million


def test_min_holders_is_the_exact_transition():
    p, tau, length = 0.1328, 27, 4
    for q in (0.5, 0.9, 0.99):
        f = st.min_holders(q, p, tau, length)
        assert st.discovery_probability(f, p, tau, length) >= q
        assert st.discovery_probability(f - 1, p, tau, length) < q
    assert st.min_holders(0.9, 0.0, 5, 2) is None


def test_planner_meets_the_target_and_its_choice_is_the_brute_force_optimum():
    plan = plan_sample_threshold(4.0, 1e-8, 4, accounting="bound")
    assert plan.feasible
    assert plan.epsilon <= 4.0 and plan.delta <= 1e-8
    assert plan.guarantee().total.delta == plan.delta
    assert plan.sampling_probability == pytest.approx(plan.alpha * (1 - math.exp(-1.0)))
    # Brute force over tau and a fine alpha grid: nothing certified needs fewer holders.
    best = None
    for tau in range(20, 36):
        for alpha in np.linspace(0.1, 0.3, 201):  # steps of 0.001
            if st.sample_threshold(alpha, 1.0, tau, 4).total.delta > 1e-8:
                continue
            holders = st.min_holders(0.9, st.sampling_probability(alpha, 1.0), tau, 4)
            best = holders if best is None else min(best, holders)
    assert plan.holders <= best
    assert plan.holders >= best - 2  # the grid is fine: it comes close to the optimum
    # And it does at least as well as the issue's hand choice (alpha = 0.18, tau = 23).
    assert plan.holders <= st.min_holders(0.9, st.sampling_probability(0.18, 1.0), 23, 4)


def test_planner_refuses_eps_r_above_one_and_says_what_is_certified():
    plan = plan_sample_threshold(4.0, 1e-8, 2, accounting="bound")
    assert not plan.feasible and plan.alpha is None and plan.tau is None
    assert "eps_r = epsilon/L <= 1" in plan.reason and "eps_r = 2" in plan.reason
    assert "at most epsilon = 2" in plan.reason
    with pytest.raises(ValueError, match="infeasible"):
        plan.guarantee()


@pytest.mark.parametrize("epsilon, delta, L", [(1, 1e-8, 4), (2, 1e-10, 10), (0.5, 1e-6, 1), (3, 1e-12, 3)])
def test_planner_never_exceeds_the_target(epsilon, delta, L):
    plan = plan_sample_threshold(epsilon, delta, L, accounting="bound")
    assert plan.feasible
    assert plan.epsilon <= epsilon and plan.delta <= delta
    assert plan.round_delta * L == pytest.approx(plan.delta)
    assert 0 < plan.alpha < ALPHA_MAX


@pytest.mark.parametrize("kwargs, message", [
    (dict(epsilon=0, delta=1e-8, max_length=4), "epsilon must be > 0"),
    (dict(epsilon=1, delta=1.0, max_length=4), "delta must be in"),
    (dict(epsilon=1, delta=1e-8, max_length=0), "max_length must be >= 1"),
    (dict(epsilon=1, delta=1e-8, max_length=4, objective=1.0), "objective must be in"),
    (dict(epsilon=1, delta=1e-8, max_length=4, length=5), "length must be <= 4"),
])
def test_planner_rejects_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_sample_threshold(**kwargs)


def test_a_refusal_shows_epsilon_and_eps_r_with_every_digit_they_take():
    """epsilon = 10.0000001 over L = 10 was shown as "epsilon = 10 ... eps_r = 1, outside it"."""
    plan = plan_sample_threshold(10.0000001, 1e-8, 10, accounting="bound")
    assert not plan.feasible
    assert "epsilon = 10.0000001 over L = 10 rounds gives eps_r = 1.00000001 > 1" in plan.reason
    assert "epsilon = 4 over L = 2 rounds gives eps_r = 2 > 1" in plan_sample_threshold(4, 1e-8, 2, accounting="bound").reason
