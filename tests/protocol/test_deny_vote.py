"""The vote with a deny list (``--deny-list``): a sampled user draws among its non-denied
sequences with its keyed uniform (renormalised local frequencies), abstains when it holds nothing
else; the reference (``vote.choose_sequence``/``client_vote``) and the columnar hot path
(``columnar.choose_codes``/``count_votes``) agree user by user and match the closed forms."""

import math

import numpy as np
import pytest

from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds import columnar
from triehh_beam.protocol.rounds.vote import choose_sequence, client_vote

from tests.columnar_population import ENCODERS, random_frontier, sequence_rows, sequence_table

ENCODER = ItemEncoder(ItemKind.TEXT, unit_size=1, max_length=4)
A, B, C = (ENCODER.encode(w) for w in ("a", "b", "c"))
USERS = 30_000


def _uniforms(users: int, seed: int = 7) -> np.ndarray:
    """Keyed item-choice uniforms of ``users`` users in round 1, as the pipeline draws them."""
    return Sampler(seed.to_bytes(32, "big")).choice_uniforms(1, [f"user-{i}" for i in range(users)])


def _columnar_choices(held: dict, denied, uniforms: np.ndarray) -> np.ndarray:
    """Every user holds ``held``: the columnar choice of each, as sequences' codes."""
    distinct = sorted(held)
    users = len(uniforms)
    offsets = np.arange(users + 1, dtype=np.int64) * len(distinct)
    codes = np.tile(np.arange(len(distinct), dtype=np.int64), users)
    counts = np.tile(np.array([held[s] for s in distinct], dtype=np.int64), users)
    table = columnar.sequence_table(distinct, offsets, codes, counts)
    return table, columnar.choose_codes(table, uniforms, denied)


def test_a_user_whose_item_is_denied_votes_for_its_other_item():
    held = {A: 3, B: 1}
    uniforms = _uniforms(USERS)
    reference = [choose_sequence(held, float(u), {A}) for u in uniforms]
    assert set(reference) == {B}
    table, codes = _columnar_choices(held, {A}, uniforms)
    assert {table.sequences[c] for c in codes} == {B}
    # Without the list, three quarters vote a: the list is what moved them.
    plain = sum(choose_sequence(held, float(u)) == A for u in uniforms)
    assert abs(plain / USERS - 0.75) < 4 * math.sqrt(0.75 * 0.25 / USERS)


def test_renormalised_frequencies_among_the_other_items():
    """{a: 3, b: 1, c: 2} with a denied: b with probability 1 / 3 (its share of b and c), not
    1/6 (the share it had without the list). Tolerance: 4 binomial standard deviations (false alarm
    odds about 6e-5 at a fixed seed, so either passes or fails for good)."""
    held = {A: 3, B: 1, C: 2}
    p, tolerance = 1 / 3, 4 * math.sqrt((1 / 3) * (2 / 3) / USERS)
    uniforms = _uniforms(USERS, seed=11)
    reference = [choose_sequence(held, float(u), {A}) for u in uniforms]
    assert A not in reference and None not in reference
    share_b = reference.count(B) / USERS
    assert abs(share_b - p) < tolerance, share_b
    table, codes = _columnar_choices(held, {A}, uniforms)
    chosen = [table.sequences[c] for c in codes]
    assert chosen == reference  # user by user, the same draw
    assert abs(chosen.count(B) / USERS - p) < tolerance
    # The same uniforms without the list give b its own 1/6: far outside the tolerance above.
    assert abs(sum(choose_sequence(held, float(u)) == B for u in uniforms) / USERS - 1 / 6) < tolerance


def test_a_user_holding_only_denied_items_abstains():
    uniforms = _uniforms(50)
    assert all(client_vote({A: 2}, frozenset({()}), 1, float(u), {A}) is None for u in uniforms)
    table, codes = _columnar_choices({A: 2, B: 5}, {A, B}, uniforms)
    assert (codes == -1).all()
    votes = columnar.count_votes(table, uniforms, frozenset({()}), 1, denied={A, B})
    assert votes.counts == {} and votes.votes_cast == 0
    assert (votes.users_only_denied, votes.users_without_items) == (50, 0)


@pytest.mark.parametrize("kind", sorted(ENCODERS))
@pytest.mark.parametrize("seed", [0, 1])
def test_count_votes_with_a_deny_list_equals_client_vote_user_by_user(kind, seed):
    population = sequence_rows(kind, seed)
    table = sequence_table(population)
    rng = np.random.default_rng(200 + seed)
    held = sorted({s for rows in population for s, c in rows if c})
    denied = frozenset(s for s in held if rng.random() < 0.3)
    assert denied and len(denied) < len(held)
    uniforms = rng.random(len(population))
    chosen = columnar.choose_codes(table, uniforms, denied)
    for i, rows in enumerate(population):
        expected = choose_sequence(rows, float(uniforms[i]), denied)
        assert (None if chosen[i] < 0 else table.sequences[chosen[i]]) == expected
    for round_index in range(1, ENCODERS[kind].max_length + 1):
        frontier = random_frontier(population, round_index, rng)
        expected = {}
        only_denied = 0
        for i, rows in enumerate(population):
            vote = client_vote(rows, frontier, round_index, float(uniforms[i]), denied)
            if vote is not None:
                expected[vote] = expected.get(vote, 0) + 1
            positive = {s for s, c in rows if c}
            only_denied += bool(positive) and positive <= denied
        votes = columnar.count_votes(table, uniforms, frontier, round_index, denied)
        assert votes.counts == expected
        assert votes.users_only_denied == only_denied
        assert all(p not in denied for p in votes.counts)


def test_without_sequences_keeps_users_and_codes():
    table, _ = _columnar_choices({A: 1, B: 2, C: 3}, (), np.zeros(3))
    restricted = columnar.without_sequences(table, {B})
    assert restricted.users == 3 and restricted.sequences == table.sequences
    assert [restricted.weighted(i) for i in range(3)] == [((A, 1), (C, 3))] * 3
    assert columnar.without_sequences(table, ()) is table
