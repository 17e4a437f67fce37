"""The evaluation of the frequency estimates: the columnar copy equals the per-user oracle
(``simulate_estimates``), the PipelineDP-style central baseline does what its docstring says
(threshold, one contribution per user, selection probability against its closed form), and the
comparison runs end to end on a small population.

Statistical tolerances: counts inside the central 1 - 1e-4 of their exact binomial distribution;
means within 4.5 standard errors of closed-form variances (fixed seeds: deterministic)."""

import math

import numpy as np
import pytest
from scipy import stats

from triehh_beam.evaluation import estimates_eval
from triehh_beam.protocol.estimates.frequency_estimates import EstimateKeys, EstimateTargets
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.central_top_k import central_top_k, laplace_threshold
from triehh_beam.reference.simulation import simulate

ENCODER = ItemEncoder(max_length=5)
SEED = bytes(range(3, 35))


def _population(seed=4, users=3000):
    rng = np.random.default_rng(seed)
    words = ["the", "to", "of", "and", "a", "in", "tea", "ten", "zzzzzzz", "ox"]
    weights = 1 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    population = {}
    for user in range(users):
        held = {}
        for _ in range(int(rng.integers(1, 4))):
            word = words[rng.choice(len(words), p=weights)]
            held[word] = held.get(word, 0) + int(rng.integers(1, 4))
        population[f"u{user}"] = held
    return population


def test_the_columnar_estimates_equal_the_oracle():
    population = _population()
    result = simulate(population, ENCODER, theta=10, m=400, seed=SEED, identity=b"eval")
    trie = Trie(ENCODER, result.levels)
    targets = EstimateTargets.from_trie(trie)
    assert len(targets) >= 4
    oracle = estimates_eval.simulate_estimates(population, ENCODER, trie, SEED, 0.8, identity=b"eval")
    encoded = estimates_eval.encode_population(population, ENCODER)
    columnar = estimates_eval.estimate(encoded, targets, EstimateKeys.derive(SEED, b"eval"), 0.8)
    assert columnar == oracle


def test_the_laplace_threshold():
    # 1 - ln(2 delta) / epsilon: at epsilon 2.5, delta 1e-10, 1 + 22.33 / 2.5 = 9.93 users.
    assert laplace_threshold(2.5, 1e-10) == pytest.approx(1 + math.log(1 / 2e-10) / 2.5)
    assert laplace_threshold(2.5, 1e-10) == pytest.approx(9.93, abs=0.01)
    with pytest.raises(ValueError):
        laplace_threshold(0, 1e-6)
    with pytest.raises(ValueError):
        laplace_threshold(1, 0.7)


def test_the_central_baseline_selects_with_the_laplace_probability_and_bounds_contributions():
    # 400 items held by exactly c users each (c = 1..8 around the threshold), users with two
    # items contributing to one: P(keep) = P(c + Lap(1/eps_s) > T), a closed form.
    epsilon, delta = 2.0, 1e-3
    threshold = laplace_threshold(epsilon / 2, delta)
    users, c_of = {}, {}
    for item in range(400):
        c = 1 + item % 8
        c_of[item] = c
        for j in range(c):
            users[f"i{item}-{j}"] = {item: 1}
    rng = np.random.default_rng(11)
    kept_by_c = {c: 0 for c in range(1, 9)}
    for _ in range(25):
        released = central_top_k(users, epsilon, delta, rng)
        for item, _ in released.kept:
            kept_by_c[c_of[item]] += 1
    for c, kept in kept_by_c.items():
        x = threshold - c  # P(Lap(b) > x), b = 1 / eps_s
        b = 1 / (epsilon / 2)
        p = 0.5 * math.exp(-x / b) if x >= 0 else 1 - 0.5 * math.exp(x / b)
        trials = 25 * 50
        assert stats.binom.cdf(kept, trials, p) > 5e-5 and stats.binom.sf(kept - 1, trials, p) > 5e-5, (c, kept, p)
    # One contribution per user: a user holding two items counts for one of them.
    both = {f"u{i}": {"x": 1, "y": 5} for i in range(1000)}
    released = central_top_k(both, 50.0, 1e-6, np.random.default_rng(0))
    counts = dict(released.kept)
    assert counts["x"] + counts["y"] == pytest.approx(1000, abs=1)
    assert 400 < counts["x"] < 600  # uniform among the user's items, as PipelineDP samples


def test_the_comparison_runs_and_its_estimates_are_unbiased():
    population = _population(users=2000)
    result = estimates_eval.compare(population, ENCODER, epsilon=4.0, estimate_epsilon=1.0, delta=1e-6,
                                    runs=4, ks=(3, 5))
    t = result["triehh"]
    assert t["estimates"] > 10
    # Holders hold several items: the estimate targets the weighted users sum_u share_u(x), below
    # the holders, and its error against them is centred (4.5 standard errors: the CI is 1.96).
    mean, half = t["mean_error"]
    assert abs(mean) <= 4.5 / 1.96 * half + 1e-9
    # The published intervals hold the weighted users; the noise's alone (+-3) mostly does not.
    assert t["published_coverage"][0] >= 0.8 > t["coverage"][0]
    assert t["published_half_width"] > 3 * t["half_width"]
    assert set(result["central"]["recall_top_by_count"]) == {3, 5}
    assert "recall@5" in estimates_eval.format_tables(result)
