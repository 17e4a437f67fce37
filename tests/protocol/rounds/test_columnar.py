"""The columnar vote equals ``vote.client_vote`` user by user, on random populations."""

import itertools

import numpy as np
import pytest

from tests.columnar_population import ENCODERS, random_frontier, sequence_rows, sequence_table
from triehh_beam.protocol.rounds import columnar
from triehh_beam.protocol.rounds.counting import PrefixCounter
from triehh_beam.protocol.rounds.vote import choose_sequence, client_vote

@pytest.mark.parametrize("kind", sorted(ENCODERS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_count_votes_equals_client_vote_user_by_user(kind, seed):
    population = sequence_rows(kind, seed)
    table = sequence_table(population)
    rng = np.random.default_rng(100 + seed)
    uniforms = rng.random(len(population))
    uniforms[:4] = [0.0, np.nextafter(1.0, 0.0), 1e-300, 0.5]  # u at the edges
    chosen = columnar.choose_codes(table, uniforms)
    for round_index in range(1, ENCODERS[kind].max_length + 1):
        frontier = random_frontier(population, round_index, rng)
        expected = {}
        without = filtered = 0
        for i, rows in enumerate(population):
            positive = [(s, c) for s, c in rows if c]
            vote = client_vote(rows, frontier, round_index, float(uniforms[i]))
            if vote is not None:
                expected[vote] = expected.get(vote, 0) + 1
            elif not positive:
                without += 1
            else:
                filtered += 1
            # The choice itself, before the frontier.
            if positive:
                assert table.sequences[chosen[i]] == choose_sequence(rows, float(uniforms[i]))
            else:
                assert chosen[i] == -1
        votes = columnar.count_votes(table, uniforms, frontier, round_index)
        assert votes.counts == expected
        assert (votes.users, votes.users_without_items, votes.votes_filtered) == (len(population), without, filtered)
        assert votes.votes_cast == sum(expected.values())


def test_the_table_is_canonical_merged_and_checked():
    a, b, c = ("b", ""), ("a", "b", ""), ("a", "")
    table = columnar.sequence_table([a, b, c], [0, 4, 4, 5], np.array([0, 1, 0, 2, 1]), np.array([1, 2, 3, 0, 5]))
    assert table.sequences == (c, b, a)  # sorted() order of the tuples
    assert table.weighted(0) == ((b, 2), (a, 4))  # repeated a summed, zero-count c dropped
    assert table.weighted(1) == ()
    assert table.weighted(2) == ((b, 5),)
    with pytest.raises(ValueError):
        columnar.sequence_table([a], [0, 1], np.array([0]), np.array([-1]))
    with pytest.raises(ValueError):
        columnar.sequence_table([a, a], [0, 1], np.array([0]), np.array([1]))
    with pytest.raises(ValueError):
        columnar.sequence_table([a], [0, 2], np.array([0]), np.array([1]))
    with pytest.raises(ValueError):
        columnar.choose_codes(table, np.array([0.1, 1.0, 0.2]))


def test_cumulative_boundaries_are_compared_exactly():
    # Two items of counts 1 and 2**52 - 2: u just below and at 1/total decide between them,
    # and a large population of other users before this one (a global float offset would blur
    # the comparison) does not change it.
    big = 2**52 - 2
    x, y = ("x", ""), ("y", "")
    total = 1 + big
    rows = [[(x, 3), (y, 5)]] * 1000 + [[(x, 1), (y, big)]]
    table = sequence_table(rows)
    for u in [0.0, np.nextafter(1 / total, 0.0), 1 / total, np.nextafter(1 / total, 1.0), 0.999999]:
        uniforms = np.full(len(rows), 0.3)
        uniforms[-1] = u
        chosen = columnar.choose_codes(table, uniforms)
        assert table.sequences[chosen[-1]] == choose_sequence(rows[-1], float(u))
    # The boundary itself: just below 1/total the first item, at it the second.
    assert choose_sequence(rows[-1], float(np.nextafter(1 / total, 0.0))) == x
    assert choose_sequence(rows[-1], 1 / total) == y


def test_a_total_beyond_2_53_is_drawn_by_the_reference():
    x, y = ("x", ""), ("y", "")
    rows = [[(x, 2**60), (y, 2**61)], [(x, 1)]]
    table = sequence_table(rows)
    for u in [0.0, 0.33, 1 / 3, 0.34, 0.9]:
        chosen = columnar.choose_codes(table, np.array([u, 0.5]))
        assert table.sequences[chosen[0]] == choose_sequence(rows[0], u)


def test_partial_counts_merge_and_prune_to_the_whole_populations_kept_prefixes():
    population = sequence_rows("text", 7, users=900)
    uniforms = np.random.default_rng(7).random(900)
    frontier = frozenset({()})
    whole = columnar.count_votes(sequence_table(population), uniforms, frontier, 1).counts
    parts = [
        columnar.count_votes(sequence_table(population[i : i + 250]), uniforms[i : i + 250], frontier, 1).counts
        for i in range(0, 900, 250)
    ]
    for order in itertools.permutations(parts):
        assert PrefixCounter.merge(order) == whole
    counter = PrefixCounter(theta=40)
    assert counter.extract_kept(PrefixCounter.merge(parts)) == sorted(p for p, n in whole.items() if n >= 40)
