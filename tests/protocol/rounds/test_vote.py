"""The on-device vote: one item per user chosen by local frequency with a keyed uniform, and its
prefix only when it extends the frontier.

Statistical tests run at fixed seeds, so they are deterministic; each states the tolerance it
was designed with (the probability that a correct implementation fails at a random seed).
"""

import collections

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.vote import choose_sequence, client_vote, prefix_vote

SEED = bytes(range(100, 132))
# Significance used by the statistical tests (per test, at the fixed seed).
ALPHA = 1e-3


# --------------------------------------------------------------------------------------------
# vote
# --------------------------------------------------------------------------------------------

ENC = ItemEncoder()
HELLO, HEY, HI = ENC.encode("hello"), ENC.encode("hey"), ENC.encode("hi")


def test_prefix_vote_follows_frontier_and_terminator():
    assert prefix_vote(HI, {()}, 1) == ("h",)
    assert prefix_vote(HI, {("h",)}, 2) == ("h", "i")
    assert prefix_vote(HI, {("h", "i")}, 3) == ("h", "i", "")  # the terminator is a unit
    assert prefix_vote(HI, {("h", "i", "")}, 4) is None  # the sequence is exhausted
    assert prefix_vote(HI, {("h", "e")}, 3) is None  # the parent is not on the frontier
    assert prefix_vote(HI, set(), 1) is None  # an empty frontier admits nothing
    with pytest.raises(ValueError):
        prefix_vote(HI, {()}, 0)


def test_choose_sequence_edges():
    assert choose_sequence({}, 0.5) is None
    assert choose_sequence({HI: 0}, 0.5) is None
    assert choose_sequence({HI: 3}, 0.999) == HI
    # Record order does not matter: the items are put in canonical order before the choice.
    pairs = [(HI, 1), (HELLO, 2), (HEY, 1), (HI, 1)]
    for u in np.linspace(0, 0.999, 37):
        assert choose_sequence(pairs, u) == choose_sequence(list(reversed(pairs)), u)
        assert choose_sequence(pairs, u) == choose_sequence({HI: 2, HELLO: 2, HEY: 1}, u)
    for bad_u in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError):
            choose_sequence({HI: 1}, bad_u)
    for bad_count in (-1, 1.5, True):
        with pytest.raises(ValueError):
            choose_sequence({HI: bad_count}, 0.5)


def test_choice_interval_boundaries_match_local_frequency():
    # Sorted canonically, HELLO < HI; HELLO owns [0, 10000/10001), HI the rest.
    weighted = {HELLO: 10_000, HI: 1}
    edge = 10_000 / 10_001
    assert choose_sequence(weighted, np.nextafter(edge, 0.0)) == HELLO
    assert choose_sequence(weighted, np.nextafter(edge, 1.0)) == HI
    assert choose_sequence(weighted, 0.0) == HELLO
    assert choose_sequence(weighted, np.nextafter(1.0, 0.0)) == HI


def test_user_with_10000_records_votes_at_most_once_per_round():
    sampler = Sampler(SEED)
    # As a mapping and as 10,001 separate records (pairs): the same user, the same votes.
    as_mapping = {HELLO: 10_000, HI: 1}
    as_records = [(HELLO, 1)] * 10_000 + [(HI, 1)]
    frontier = {("h",)}
    votes = collections.Counter()
    for r in range(1, 501):
        u = sampler.choice_uniform(r, "heavy-user")
        vote = client_vote(as_mapping, frontier, 2, u)
        # One call, one vote: a single prefix (a tuple of units), never a list of them.
        assert vote in {("h", "e"), ("h", "i")}
        assert client_vote(as_records, frontier, 2, u) == vote
        votes[vote] += 1
    assert sum(votes.values()) == 500
    # P(HI) = 1/10001: over 500 rounds P(any HI vote) < 5%; none is expected at this seed.
    assert votes[("h", "e")] >= 499


def test_item_choice_follows_local_frequency_with_keyed_uniform():
    # A user with 6, 3 and 1 records of three items votes (round 1, frontier {()}, so every
    # choice shows through its first unit) over 3,000 rounds. Chi-square goodness of fit with
    # 2 degrees of freedom; tolerance: p-value > ALPHA.
    items = {"apple": 6, "banana": 3, "cherry": 1}
    weighted = {ENC.encode(i): c for i, c in items.items()}
    sampler = Sampler(SEED)
    observed = collections.Counter()
    rounds = 3000
    for r in range(1, rounds + 1):
        vote = client_vote(weighted, {("a",), ("b",), ("c",)}, 2, sampler.choice_uniform(r, "u1"))
        observed[vote[0]] += 1
    expected = [rounds * c / 10 for c in items.values()]
    got = [observed[i[0]] for i in items]
    assert stats.chisquare(got, expected).pvalue > ALPHA, got


def test_client_vote_empty_user_and_off_frontier():
    assert client_vote({}, {()}, 1, 0.3) is None
    assert client_vote({HI: 1}, {("x",)}, 2, 0.3) is None
    assert client_vote({HI: 1}, {()}, 1, 0.3) == ("h",)


def test_client_vote_accepts_numpy_integer_counts():
    assert client_vote({HI: np.int64(3)}, {()}, 1, 0.5) == ("h",)
