"""``evaluation.deny_lists``: the restricted vectorised runs equal the keyed simulation given the
same deny set, seed by seed (so the measured figures are the pipeline's); a deny-list schedule
never rediscovers an item; the multi-item population is as described."""

from __future__ import annotations

import numpy as np
import pytest

from triehh_beam.evaluation import deny_lists
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.reference.keyed_runs import encode_population, run_keyed
from triehh_beam.reference.simulation import sampler_for_seed, simulate

WORDS = ["the", "then", "they", "to", "of", "off", "in", "and", "an", "a", "at", "on", "one"]
ENCODER = ItemEncoder(max_length=5)


@pytest.fixture(scope="module")
def users():
    rng = np.random.default_rng(3)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    one_each = {f"u{i}": {str(w): 1} for i, w in enumerate(rng.choice(WORDS, size=1500, p=weights / weights.sum()))}
    return deny_lists.several_words(one_each, per_user=3, count=1500, seed=5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_restricted_runs_equal_the_keyed_simulation(users, seed):
    population = encode_population(users, ENCODER)
    denied = frozenset(ENCODER.encode(w) for w in ("the", "to", "and"))
    trie = run_keyed(deny_lists.restrict(population, denied), population.members(), 8, 300, sampler_for_seed(seed))
    expected = simulate(users, ENCODER, 8, 300, seed, denied=denied)
    assert population.levels(trie) == expected.levels
    assert simulate(users, ENCODER, 8, 300, seed).levels != expected.levels  # the list mattered
    assert not deny_lists.heavy_hitters(population, trie) & denied


def test_a_deny_list_schedule_never_rediscovers_an_item(users):
    population = encode_population(users, ENCODER)
    found = deny_lists.schedule(population, 8, 300, [bytes([i]) * 32 for i in range(4)], deny=True)
    assert found[0]
    for k in range(1, len(found)):
        assert not found[k] & frozenset().union(*found[:k])
    plain = deny_lists.schedule(population, 8, 300, [bytes([i]) * 32 for i in range(4)], deny=False)
    assert plain[0] == found[0]  # the first run has no list


def test_the_multi_item_population(users):
    assert len(users) == 1500
    sizes = [len(held) for held in users.values()]
    assert min(sizes) == 1 and max(sizes) == 3
    assert all(1 <= c <= 9 and w in WORDS for held in users.values() for w, c in held.items())
