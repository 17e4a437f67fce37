"""The vectorised keyed runs grow exactly the keyed simulation's trie (and so the pipeline's):
run by run, seed by seed, on populations with several items per user, long and empty items,
subsets of the encoded users, and parameters no plan would choose."""

import random

import pytest

from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.reference.keyed_runs import encode_population, run_keyed
from triehh_beam.reference.simulation import sampler_for_seed, simulate

WORDS = ["the", "then", "they", "to", "top", "a", "an", "and", "ant", "be", "bee", "été", "überlong-item"]


def _population(n: int, seed: int, several: bool) -> dict:
    rng = random.Random(seed)
    weights = [40, 10, 8, 30, 6, 25, 12, 20, 3, 9, 2, 4, 5]
    users = {}
    for i in range(n):
        if several and i % 3 == 0:  # Algorithm 3: several items, with local counts
            users[f"user-{i}"] = {w: rng.randint(1, 4) for w in rng.sample(WORDS, rng.randint(2, 4))}
        else:
            users[i] = rng.choices(WORDS, weights)
    users["empty-item"] = [""]
    return users


@pytest.mark.parametrize("several", [False, True])
@pytest.mark.parametrize("too_long", ["drop", "truncate"])
def test_runs_equal_the_keyed_simulation_seed_by_seed(several, too_long):
    users = _population(600, 1, several)
    encoder = ItemEncoder(max_length=6)
    population = encode_population(users, encoder, too_long)
    members = population.members()
    distinct_tries = set()
    for seed in range(8):
        for theta, m in ((5, 120), (2, 40), (1, 7), (30, 10_000)):  # the last samples everyone
            expected = simulate(users, encoder, theta, m, seed, too_long=too_long)
            trie = run_keyed(population, members, theta, m, sampler_for_seed(seed))
            assert population.levels(trie) == expected.levels, (seed, theta, m)
            distinct_tries.add(expected.levels)
    assert len(distinct_tries) > 10  # the comparison saw many different tries, not one
    assert population.records_too_long == expected.records_too_long
    assert population.records_empty == expected.records_empty == 1


def test_a_subset_of_the_encoded_users_is_sampled_as_its_own_population():
    users = _population(400, 2, several=True)
    encoder = ItemEncoder(max_length=5)
    extra = {"canary-user": ["zz"], "another": ["the"]}
    population = encode_population({**users, **extra}, encoder)
    without = population.members([u for u in population.user_ids if u not in (b"canary-user", b"another")])
    with_one = population.members([u for u in population.user_ids if u != b"another"])
    assert len(without) == len(users) and len(with_one) == len(users) + 1
    for seed in range(6):
        sampler = sampler_for_seed(seed)
        assert population.levels(run_keyed(population, without, 3, 60, sampler)) == \
            simulate(users, encoder, 3, 60, seed).levels
        assert population.levels(run_keyed(population, with_one, 1, 60, sampler)) == \
            simulate({**users, "canary-user": ["zz"]}, encoder, 1, 60, seed).levels


def test_a_run_cut_after_r_rounds_holds_the_first_r_levels():
    users = _population(500, 3, several=False)
    encoder = ItemEncoder(max_length=6)
    population = encode_population(users, encoder)
    members = population.members()
    full = population.levels(run_keyed(population, members, 4, 100, sampler_for_seed(5)))
    assert len(full) >= 3
    for r in (1, 2, 3):
        assert population.levels(run_keyed(population, members, 4, 100, sampler_for_seed(5), r)) == full[:r]


def test_everyone_sampled_and_a_threshold_of_one_keep_every_chosen_prefix():
    # m >= n samples everyone; theta = 1 keeps every vote: single-item users' whole items.
    users = {i: [w] for i, w in enumerate(["ab", "ab", "ac", "b"])}
    population = encode_population(users, ItemEncoder(max_length=4))
    trie = run_keyed(population, population.members(), 1, 10, sampler_for_seed(0))
    assert population.levels(trie) == (
        frozenset({("a",), ("b",)}), frozenset({("a", "b"), ("a", "c"), ("b", "")}),
        frozenset({("a", "b", ""), ("a", "c", "")}))
    assert population.prefix_number(("a", "b", "")) >= 0 and population.prefix_number(("z",)) == -1


def test_nothing_to_sample_keeps_nothing_and_bad_parameters_are_refused():
    population = encode_population({1: ["a"]}, ItemEncoder(max_length=3))
    members = population.members()
    assert not run_keyed(population, members, 1, 0, sampler_for_seed(0)).any()
    assert not run_keyed(population, population.members([]), 1, 5, sampler_for_seed(0)).any()
    for theta, m, rounds in ((0, 1, None), (1, -1, None), (1, 1, 0)):
        with pytest.raises(ValueError):
            run_keyed(population, members, theta, m, sampler_for_seed(0), rounds)
    with pytest.raises(KeyError):
        population.members([b"nobody"])
