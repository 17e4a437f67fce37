"""The keyed simulation of whole-item sample-and-threshold, statistically, against closed forms
over many runs at fixed seeds (each run an independent secret seed): count / p_s is unbiased for
an item far above the threshold (and, for users holding several items, for the sum of the
probabilities that they report it); an item's release probability is P(Binomial(f, p_s) >= tau);
and given its release the estimate of an item near tau is biased upward exactly as
E[X | X >= tau] / p_s says. Tolerances are stated with each test (4 standard errors, or a
Clopper-Pearson interval at 99.99%), so a correct simulation fails about once in 10^4 runs."""

import math

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.central.whole_items import plan_whole_items
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.reference.whole_items import simulate_many_whole_items, simulate_whole_items

ENCODER = ItemEncoder(max_length=8)
PLAN = plan_whole_items(1.0, 1e-6)  # the default (exact) accounting's plan
P_S, TAU = PLAN.sampling_probability, PLAN.tau
RUNS = 300
# Holders of the item "near" the threshold (its expected reports f p_s are tau) and of a "rare"
# one (expected reports about 0.3 tau), derived from the plan rather than fixed, so that each
# item stays where its test needs it whatever p_s the planner chooses.
NEAR = round(TAU / P_S)
RARE = round(0.3 * TAU / P_S)


def _population(holders):
    """One item per user: ``holders`` maps item -> users holding it."""
    users, k = {}, 0
    for item, f in holders.items():
        for _ in range(f):
            users[f"u{k}"] = {item: 1}
            k += 1
    return users


@pytest.fixture(scope="module")
def runs():
    users = _population({"big": 1000, "near": NEAR, "rare": RARE, "filler": 1500})
    return simulate_many_whole_items(users, ENCODER, P_S, TAU, range(RUNS))


def test_count_over_p_s_is_unbiased_far_above_the_threshold(runs):
    f = 1000
    assert f * P_S > TAU + 10 * math.sqrt(f * P_S)  # released in every run (10 sd above tau)
    estimates = np.array([r.estimates["big"] for r in runs])
    sd = math.sqrt(f * (1 - P_S) / P_S)  # of one estimate: Binomial(f, p_s) / p_s
    assert abs(estimates.mean() - f) < 4 * sd / math.sqrt(RUNS)
    assert estimates.std() == pytest.approx(sd, rel=0.25)  # and its spread is the binomial's


@pytest.mark.parametrize("item,f", [("near", NEAR), ("rare", RARE), ("big", 1000)])
def test_release_probability_is_the_binomial_tail(runs, item, f):
    released = sum(item in r.items for r in runs)
    expected = stats.binom.sf(TAU - 1, f, P_S)
    ci = stats.binomtest(released, RUNS).proportion_ci(confidence_level=0.9999, method="exact")
    assert ci.low <= expected <= ci.high, (released, expected)


def test_a_released_estimate_near_tau_is_biased_upward_as_the_truncated_mean_says(runs):
    f = NEAR
    values = np.array([r.items["near"] for r in runs if "near" in r.items])
    k = np.arange(TAU, f + 1)
    pmf = stats.binom.pmf(k, f, P_S)
    conditional = (k * pmf).sum() / pmf.sum()  # E[X | X >= tau]
    sd = math.sqrt((k ** 2 * pmf).sum() / pmf.sum() - conditional ** 2)
    assert abs(values.mean() - conditional) < 4 * sd / math.sqrt(len(values))
    assert conditional / P_S > f * 1.1  # the bias is real: over 10% above the holders here


def test_several_items_per_user_estimate_the_sum_of_report_probabilities():
    # 800 users hold x three times and y once (x reported with probability 3/4), 400 hold y
    # alone: E[count_x / p_s] = 600 and E[count_y / p_s] = 200 + 400 = 600.
    users = {f"a{i}": {"x": 3, "y": 1} for i in range(800)}
    users.update({f"b{i}": {"y": 1} for i in range(400)})
    results = simulate_many_whole_items(users, ENCODER, P_S, TAU, range(1000, 1000 + RUNS))
    for item in ("x", "y"):
        assert 600 * P_S > TAU + 10 * math.sqrt(600 * P_S)  # released in every run
        values = np.array([r.estimates[item] for r in results])
        # Each of the 1200 users reports the item with probability q_i: count ~ a sum of
        # Bernoulli(p_s q_i), variance sum p_s q_i (1 - p_s q_i).
        q = np.array([0.75] * 800 + [0.0] * 400) if item == "x" else np.array([0.25] * 800 + [1.0] * 400)
        sd = math.sqrt(np.sum(P_S * q * (1 - P_S * q))) / P_S
        assert abs(values.mean() - 600) < 4 * sd / math.sqrt(RUNS), item


def test_nothing_below_tau_is_released_and_seeds_and_identities_matter():
    users = _population({"a": 300, "b": 60, "c": 5})
    result = simulate_whole_items(users, ENCODER, P_S, TAU, 7)
    assert all(count >= TAU for count in result.items.values()) and "c" not in result.items
    n = 365
    assert abs(result.users_sampled - n * P_S) < 5 * math.sqrt(n * P_S * (1 - P_S)) and result.n_users == n
    assert result.reports == result.users_sampled  # every user holds an encodable item
    assert result == simulate_whole_items(users, ENCODER, P_S, TAU, 7)  # deterministic
    others = {simulate_whole_items(users, ENCODER, P_S, TAU, 7, identity=b"job-%d" % i).items["a"]
              for i in range(5)}
    assert len(others) > 1  # the identity keys the draws


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError):
        simulate_whole_items({"u": {"a": 1}}, ENCODER, 0.0, 3, 1)
    with pytest.raises(ValueError):
        simulate_whole_items({"u": {"a": 1}}, ENCODER, 0.5, 0, 1)
