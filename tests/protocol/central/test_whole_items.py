"""Whole-item sample-and-threshold's pure core: the columnar count equals the per-user reference
(the vote's choice, whole), the counter lets only items with at least tau reports out (whatever
the merge order), and the plan is the sample-and-threshold planner's for one release, refused
above epsilon 1 with the condition named and what is certified instead."""

import itertools
import math

import numpy as np
import pytest

from triehh_beam.protocol.accounting import exact_accountant
from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.central.whole_items import (WholeItemCounter, count_whole_items, estimate,
                                                      estimate_interval, plan_whole_items,
                                                      release_probability, whole_item_report)
from triehh_beam.protocol.estimates.count_intervals import sampled_count_interval
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
from triehh_beam.protocol.rounds import columnar
from triehh_beam.protocol.rounds.vote import choose_sequence


def _random_table(rng, users=400, distinct=12):
    sequences = [tuple(f"w{i}") + ("$",) for i in range(distinct)]  # any distinct tuples do
    offsets, codes, counts = [0], [], []
    for _ in range(users):
        k = int(rng.integers(0, 4))  # 0..3 items, a user with none reports nothing
        held = rng.choice(distinct, size=k, replace=False)
        codes += held.tolist()
        counts += rng.integers(1, 6, size=k).tolist()
        offsets.append(len(codes))
    return columnar.sequence_table(sequences, np.array(offsets), np.array(codes), np.array(counts))


def test_the_columnar_count_is_the_per_user_reference_summed():
    rng = np.random.default_rng(14)
    table = _random_table(rng)
    uniforms = rng.random(table.users)
    reports = count_whole_items(table, uniforms)
    expected = {}
    for i in range(table.users):
        chosen = whole_item_report(table.weighted(i), float(uniforms[i]))
        assert chosen == choose_sequence(table.weighted(i), float(uniforms[i]))  # the vote's choice
        if chosen is not None:
            expected[chosen] = expected.get(chosen, 0) + 1
    assert reports.counts == expected
    assert reports.users == table.users
    assert reports.reports == sum(expected.values())
    assert reports.users_without_items == int(np.sum(np.diff(table.offsets) == 0)) > 0


def test_the_counter_releases_at_least_tau_with_counts_in_any_merge_order():
    parts = [{("a", "$"): 3, ("b", "$"): 1}, {("a", "$"): 2, ("c", "$"): 4}, {("b", "$"): 3, ("c", "$"): 1}]
    counter = WholeItemCounter(5)
    results = {counter.extract_released(WholeItemCounter.merge(order)) for order in itertools.permutations(parts)}
    assert results == {((("a", "$"), 5), (("c", "$"), 5))}  # b has 4 < 5: not out, not even as a count
    assert WholeItemCounter(1).extract_released({("b", "$"): 1}) == ((("b", "$"), 1),)
    for bad in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError):
            WholeItemCounter(bad)


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-8), (0.5, 1e-8), (1.0, 1e-12), (0.25, 1e-6)])
def test_the_plan_is_the_sample_and_threshold_planners_for_one_release(epsilon, delta):
    plan = plan_whole_items(epsilon, delta, accounting="bound")
    assert plan.feasible
    assert plan == plan_sample_threshold(epsilon, delta, 1, accounting="bound")
    guarantee = st.sample_threshold(plan.alpha, epsilon, plan.tau, 1)
    assert (guarantee.total.epsilon, guarantee.total.delta) == (plan.epsilon, plan.delta)
    assert plan.epsilon <= epsilon and plan.delta <= delta
    assert plan.delta == pytest.approx(math.exp(-st.c_alpha(plan.alpha) * plan.tau))
    assert plan.sampling_probability == pytest.approx(plan.alpha * (1 - math.exp(-epsilon)))
    # The rule: the fewest holders released with 90% probability; tau - 1 and tau + 1 (each at
    # its largest alpha) need at least as many.
    assert release_probability(plan.holders, plan.sampling_probability, plan.tau) >= 0.9
    assert release_probability(plan.holders - 1, plan.sampling_probability, plan.tau) < 0.9
    for tau in (plan.tau - 1, plan.tau + 1):
        alpha = _largest_alpha(tau, epsilon, delta)
        if alpha is not None:
            holders = st.min_holders(0.9, st.sampling_probability(alpha, epsilon), tau, 1)
            assert holders >= plan.holders


def _largest_alpha(tau, epsilon, delta):
    """The largest alpha on a fine grid whose exp(-C_alpha tau) <= delta (an independent search)."""
    best = None
    for alpha in np.linspace(1e-4, 0.517, 20000):
        if st.c_alpha(alpha) > 0 and math.exp(-st.c_alpha(alpha) * tau) <= delta:
            best = float(alpha)
    return best


@pytest.mark.parametrize("epsilon", [1.0000001, 2.0, 8.0])
def test_under_the_bound_epsilon_above_one_is_refused_with_the_condition_and_what_is_certified(epsilon):
    plan = plan_whole_items(epsilon, 1e-8, accounting="bound")
    assert not plan.feasible and plan.tau is None and plan.alpha is None
    assert "epsilon <= 1" in plan.reason and "--epsilon 1" in plan.reason
    assert f"epsilon = {epsilon:g}" in plan.reason


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-8), (2.0, 1e-8), (0.5, 1e-10)])
def test_the_exact_plan_is_the_planners_for_one_release_and_its_delta_is_recomputed(epsilon, delta):
    plan = plan_whole_items(epsilon, delta)
    assert plan.feasible and plan.accounting == "exact"
    assert plan == plan_sample_threshold(epsilon, delta, 1)
    recomputed = exact_accountant.release_delta(epsilon, plan.sampling_probability, plan.tau).delta
    assert plan.delta == recomputed <= delta and plan.epsilon == epsilon
    # Exactly accounted, the same target releases an item with fewer holders than the bound's plan.
    bound = plan_whole_items(min(epsilon, 1.0), delta, accounting="bound")
    assert plan.holders < bound.holders or epsilon < 1.0


def test_bad_targets_are_value_errors():
    for epsilon, delta in ((0, 1e-8), (-1, 1e-8), (1, 0), (1, 1)):
        with pytest.raises(ValueError):
            plan_whole_items(epsilon, delta)


def test_the_estimate_is_the_count_over_p_s():
    assert estimate(23, 0.125) == 184.0
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            estimate(3, bad)


def test_the_estimates_interval_is_given_the_release():
    # The conditional interval (count_intervals.sampled_count_interval at tau): far above tau it
    # is Garwood's; at tau its low end is 0 (a count at the threshold proves little).
    assert estimate_interval(23, 0.125, 23) == sampled_count_interval(23, 0.125, 23)
    assert estimate_interval(23, 0.125, 23)[0] == 0
    assert estimate_interval(2_000, 0.125, 23) == sampled_count_interval(2_000, 0.125)
    low, high = estimate_interval(200, 0.125, 23)
    assert low < estimate(200, 0.125) < high
    with pytest.raises(ValueError):
        estimate_interval(22, 0.125, 23)  # never released
