"""Frequency estimates: the targets, the one-contribution choice (columnar = per-user reference),
the keyed release, and the statistics the README promises: unbiased estimates and 95% intervals
that cover, over many runs at fixed seeds.

Statistical tolerances: means within 4.5 standard errors of closed-form variances, and counts of
covering intervals inside the central 1 - 1e-4 of their exact binomial distribution; a correct
mechanism fails each with probability about 1e-4 or less (the seeds are fixed, so each test is
deterministic).
"""

import math

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.estimates.count_intervals import noisy_count_intervals
from triehh_beam.protocol.estimates.frequency_estimates import (LEVEL, EstimateKeys, EstimateTargets,
                                                                FrequencyEstimates, count_choices,
                                                                reference_estimates, release,
                                                                target_label, user_choice)
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol.rounds.trie import Trie

ENCODER = ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=6)
SEED = bytes(range(32))


def _seq(text):
    return ENCODER.encode(text)


def _binomial_ok(successes, n, p, alpha=1e-4):
    return stats.binom.cdf(successes, n, p) > alpha / 2 and stats.binom.sf(successes - 1, n, p) > alpha / 2


# ---- targets ----------------------------------------------------------------------------------


def test_targets_are_the_leaves_of_the_trie_and_each_sequence_starts_with_one_at_most():
    trie = Trie(ENCODER, [{("a",), ("b",)}, {("a", ""), ("a", "n"), ("b", "e")},
                          {("a", "n", ""), ("a", "n", "d")}])
    targets = EstimateTargets.from_trie(trie)
    # Heavy hitters a, an; frequent prefixes "and" (3 units, not extended) and "be".
    assert set(targets.sequences) == {("a", ""), ("a", "n", ""), ("a", "n", "d"), ("b", "e")}
    assert list(targets.sequences) == sorted(targets.sequences)
    assert targets.index_of(_seq("a")) == targets.sequences.index(("a", ""))
    assert targets.index_of(_seq("an")) == targets.sequences.index(("a", "n", ""))
    assert targets.index_of(_seq("andy")) == targets.sequences.index(("a", "n", "d"))
    assert targets.index_of(_seq("and")) == targets.sequences.index(("a", "n", "d"))
    assert targets.index_of(_seq("bee")) == targets.sequences.index(("b", "e"))
    for miss in ("ab", "b", "c", "ax"):
        assert targets.index_of(_seq(miss)) == -1
    assert [targets.is_item(i) for i in range(len(targets))] == [
        targets.sequences[i][-1] == "" for i in range(len(targets))]


def test_targets_refuse_prefixes_of_each_other_and_repeats():
    with pytest.raises(ValueError, match="prefix"):
        EstimateTargets((("a",), ("a", "b", "")))
    with pytest.raises(ValueError):
        EstimateTargets((("a", ""), ("a", "")))
    with pytest.raises(ValueError, match="empty"):
        EstimateTargets(((),))
    assert len(EstimateTargets(())) == 0


def test_target_labels_are_unambiguous():
    assert target_label(("ab", "")) != target_label(("a", "b", ""))
    assert target_label((b"a", b"")) == target_label(("a", ""))  # one job never mixes kinds
    assert target_label(("é",)) == (2).to_bytes(8, "big") + "é".encode()


# ---- the choice ------------------------------------------------------------------------------

TARGETS = EstimateTargets((_seq("a"), _seq("an"), ("b", "e"), _seq("to")))


def test_a_user_chooses_by_local_frequency_among_its_discovered_items_only():
    # "zz" is not discovered: the user's weights are a: 1, be*: 2 + 1 = 3 (bee, bed), so it
    # contributes to "a" for u in [0, 1/4) and to "be" for u in [1/4, 1).
    weighted = [(_seq("a"), 1), (_seq("bee"), 2), (_seq("bed"), 1), (_seq("zz"), 100)]
    grid = (np.arange(4000) + 0.5) / 4000
    choices = [user_choice(weighted, TARGETS, u) for u in grid]
    a, be = TARGETS.index_of(_seq("a")), TARGETS.index_of(("b", "e"))
    assert choices.count(a) == 1000 and choices.count(be) == 3000
    assert user_choice([(_seq("zz"), 5)], TARGETS, 0.3) is None
    assert user_choice([], TARGETS, 0.3) is None
    assert user_choice([(_seq("to"), 7)], TARGETS, 0.999) == TARGETS.index_of(_seq("to"))


def _random_population(seed, users=300):
    rng = np.random.default_rng(seed)
    vocabulary = [_seq(w) for w in ("a", "an", "and", "bee", "be", "bed", "to", "zz", "q")]
    population = {}
    for i in range(users):
        rows = int(rng.integers(0, 6))
        population[f"user{i}"] = [(vocabulary[int(rng.integers(len(vocabulary)))], int(rng.integers(0, 4)))
                                  for _ in range(rows)]
    return population


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_columnar_count_equals_the_per_user_reference(seed):
    population = _random_population(seed)
    keys = EstimateKeys.derive(SEED, b"job %d" % seed)
    ids = sorted(population)
    uniforms = keys.choice_uniforms(ids)
    expected = np.zeros(len(TARGETS), dtype=np.int64)
    offsets, codes, counts = [0], [], []
    for user, u in zip(ids, uniforms):
        chosen = user_choice(population[user], TARGETS, float(u))
        if chosen is not None:
            expected[chosen] += 1
        for sequence, count in population[user]:
            code = TARGETS.index_of(sequence)
            if code >= 0:
                codes.append(code)
                counts.append(count)
        offsets.append(len(codes))
    got = count_choices(TARGETS, np.array(offsets), np.array(codes, dtype=np.int64),
                        np.array(counts, dtype=np.int64), uniforms)
    assert got.tolist() == expected.tolist()
    assert expected.sum() > 100  # the population exercises the choice


# ---- the release -----------------------------------------------------------------------------


def test_every_target_gets_an_estimate_even_without_contributions():
    keys = EstimateKeys.derive(SEED)
    released = reference_estimates({"u1": [(_seq("to"), 1)]}, TARGETS, 1.0, keys)
    assert len(released.estimates) == len(TARGETS) == 4
    assert released.half_width == TwoSidedGeometric(1.0).half_width(LEVEL) == 3
    lo, hi = released.noise_interval(0)
    assert hi - lo == 6 and lo == released.estimates[0] - 3
    # The published interval is of the weighted users: the users' draws counted, never below 0.
    assert released.intervals() == tuple(noisy_count_intervals(released.estimates, 1.0))
    assert released.interval(0) == released.intervals()[0] and released.interval(0)[0] >= 0
    assert isinstance(released.estimates[0], int)


def test_the_release_is_a_function_of_the_seed_identity_and_target():
    counts = [5, 0, 1000, 17]
    one = release(counts, TARGETS, 0.5, EstimateKeys.derive(SEED, b"job"))
    again = release(counts, TARGETS, 0.5, EstimateKeys.derive(SEED, b"job"))
    other_job = release(counts, TARGETS, 0.5, EstimateKeys.derive(SEED, b"another job"))
    assert one == again
    assert one.estimates != other_job.estimates
    # A target's noise is its own: releasing a subset of the targets keeps their numbers.
    subset = EstimateTargets(TARGETS.sequences[:2])
    assert release(counts[:2], subset, 0.5, EstimateKeys.derive(SEED, b"job")).estimates == one.estimates[:2]


def test_the_release_refuses_mismatched_or_negative_counts():
    keys = EstimateKeys.derive(SEED)
    with pytest.raises(ValueError):
        release([1, 2], TARGETS, 1.0, keys)
    with pytest.raises(ValueError):
        release([1, 2, 3, -1], TARGETS, 1.0, keys)
    with pytest.raises(ValueError):
        release([1, 2, 3, 4], TARGETS, 0.0, keys)
    with pytest.raises(ValueError):
        FrequencyEstimates(TARGETS, (1,), 1.0, 3)


def test_the_choice_and_noise_keys_are_neither_the_seed_nor_each_other():
    keys = EstimateKeys.derive(SEED, b"x")
    assert keys.choice_key != keys.noise_key
    assert SEED not in repr(keys).encode()
    assert keys != EstimateKeys.derive(SEED, b"y")


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_estimates_are_unbiased_and_intervals_cover_over_many_runs(epsilon):
    # Fixed exact counts, 2,000 independent releases (one job identity each): per target the
    # mean error is within 4.5 standard errors of 0, and the intervals that hold the exact count
    # are a Binomial(runs, coverage) count.
    counts = [0, 3, 250, 12_345]
    runs = 2_000
    noise = TwoSidedGeometric(epsilon)
    errors = np.array([
        np.subtract(release(counts, TARGETS, epsilon, EstimateKeys.derive(SEED, b"run %d" % r)).estimates, counts)
        for r in range(runs)])
    standard_error = math.sqrt(noise.variance / runs)
    assert np.all(np.abs(errors.mean(axis=0)) < 4.5 * standard_error), errors.mean(axis=0)
    k = noise.half_width()
    covered = int(np.sum(np.abs(errors) <= k))
    assert _binomial_ok(covered, errors.size, noise.coverage(k)), (covered / errors.size, noise.coverage(k))
    assert noise.coverage(k) >= 0.95
    # Not vacuous: a third of the width covers far less.
    assert not _binomial_ok(int(np.sum(np.abs(errors) <= k // 3)), errors.size, noise.coverage(k))


def test_estimates_are_unbiased_for_the_expected_choices_of_multi_item_users():
    # Over seeds, the keyed choice makes the exact count of x a sum of Bernoulli(w_u(x) / W_u):
    # E[estimate_x] = f_x = sum_u w_u(x) / W_u, Var = sum_u p(1 - p) + the noise's variance.
    population = _random_population(7, users=200)
    epsilon, runs = 1.0, 300
    shares = np.zeros(len(TARGETS))
    variance = np.full(len(TARGETS), TwoSidedGeometric(epsilon).variance)
    for weighted in population.values():
        weights = np.zeros(len(TARGETS))
        for sequence, count in weighted:
            if TARGETS.index_of(sequence) >= 0:
                weights[TARGETS.index_of(sequence)] += count
        if weights.sum():
            p = weights / weights.sum()
            shares += p
            variance += p * (1 - p)
    releases = [reference_estimates(population, TARGETS, epsilon, EstimateKeys.derive(SEED, b"seed %d" % r))
                for r in range(runs)]
    estimates = np.array([released.estimates for released in releases])
    assert np.all(np.abs(estimates.mean(axis=0) - shares) < 4.5 * np.sqrt(variance / runs)), (
        estimates.mean(axis=0), shares)
    # The published intervals hold f_x over the keyed draws (at least 95% less three binomial
    # standard errors; tests/protocol/estimates/test_count_intervals.py measures them more finely); the
    # noise's alone, estimate +- k, does not.
    floor = LEVEL - 3 * math.sqrt(LEVEL * (1 - LEVEL) / runs)
    intervals = np.array([released.intervals() for released in releases])
    covered = ((intervals[..., 0] <= shares) & (shares <= intervals[..., 1])).mean(axis=0)
    assert np.all(covered >= floor), covered
    noise_only = (np.abs(estimates - shares) <= releases[0].half_width).mean(axis=0)
    assert np.all(noise_only < floor), noise_only
    # f_x is below the holder count when holders spread their records: not the same quantity.
    holders = [sum(any(TARGETS.index_of(s) == i and c for s, c in w) for w in population.values())
               for i in range(len(TARGETS))]
    assert any(h - f > 10 for h, f in zip(holders, shares))


def test_single_item_users_are_counted_exactly_before_noise():
    # Each user holds one discovered item (any number of records): the exact count is the holder
    # count, so the estimate minus the holders is the noise alone, whatever the seed.
    population = {f"u{i}": [(_seq(["a", "an", "to"][i % 3]), 1 + i % 4)] for i in range(90)}
    population["x"] = [(_seq("zz"), 3)]
    keys = EstimateKeys.derive(SEED, b"single")
    released = reference_estimates(population, TARGETS, 50.0, keys)  # noise 0 w.p. 1 - 4e-22
    by_target = released.by_target()
    assert by_target[_seq("a")] == by_target[_seq("an")] == by_target[_seq("to")] == 30
    assert by_target[("b", "e")] == 0
