"""The keyed simulation of TrieHH++ (sample-and-threshold rounds): equal, trie for trie, to an
independent simple simulation written here from the protocol's statement (ranks below
floor(p_s 2^64), the item drawn by its share of the user's records, prefixes with >= tau votes),
and in both sampling modes at the closed-form discovery probability of an item that shares no
prefix (5 standard deviations over the runs: a false alarm at a random seed below 1e-6)."""

import math

import numpy as np
import pytest

from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness.sampling import Sampler, user_id_bytes
from triehh_beam.reference.simulation import simulate_many_sample_threshold, simulate_sample_threshold

ENC = ItemEncoder(max_length=8)
WORDS = ["the", "then", "they", "this", "that", "a", "an", "and", "ant", "be", "bee", "been", "cat", "car"]


def _population(n_users: int = 3000, seed: int = 11) -> dict:
    """Zipf-ish words; a third of the users hold two or three items with local counts."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    weights /= weights.sum()
    users = {}
    for u in range(n_users):
        k = 1 if u % 3 else int(rng.integers(2, 4))
        picks = rng.choice(len(WORDS), size=k, replace=False, p=weights)
        users[f"u{u}"] = {WORDS[i]: int(rng.integers(1, 4)) for i in picks}
    return users


def _simple_keyed(users: dict, tau: int, p: float, seed: bytes, max_rounds: int):
    """TrieHH++ in a few lines, from its statement (no simulation module, no client_vote)."""
    sampler = Sampler(seed)
    ids = sorted(users, key=user_id_bytes)
    held = {u: sorted((ENC.encode(item), c) for item, c in users[u].items()) for u in ids}
    levels, frontier = [], {()}
    for r in range(1, max_rounds + 1):
        if not frontier:
            break
        ranks = sampler.ranks(r, ids)
        tally = {}
        for u, rank in zip(ids, ranks):
            if int(rank) >= math.floor(p * 2**64):
                continue  # not in this round's Bernoulli sample
            target = sampler.choice_uniform(r, u) * sum(c for _, c in held[u])
            acc = 0
            for sequence, count in held[u]:
                acc += count
                if target < acc:
                    break
            if len(sequence) >= r and sequence[: r - 1] in frontier:
                tally[sequence[:r]] = tally.get(sequence[:r], 0) + 1
        kept = {prefix for prefix, votes in tally.items() if votes >= tau}
        if not kept:
            break
        levels.append(frozenset(kept))
        frontier = {prefix for prefix in kept if len(prefix[-1])}  # the terminator is the empty unit
    return levels


@pytest.mark.parametrize("seed", range(4))
def test_keyed_simulation_equals_the_simple_one(seed):
    users = _population()
    secret = bytes([seed]) * 32
    tau, p = 25, 0.12
    result = simulate_sample_threshold(users, ENC, tau, p, secret)
    assert [set(level) for level in result.levels] == [set(level) for level in _simple_keyed(users, tau, p, secret, 8)]
    assert len(result.heavy_hitters) >= 3  # the case is not vacuous: the frequent words come out
    # Each round's sample is the Bernoulli one: its size is near p n.
    for stats in result.round_stats:
        assert abs(stats.users_sampled - p * 3000) <= 5 * math.sqrt(3000 * p * (1 - p))


def test_same_seed_same_trie_and_a_seed_changes_it():
    users = _population(1500)
    runs = simulate_many_sample_threshold(users, ENC, 10, 0.2, [b"s" * 32, b"s" * 32, b"t" * 32])
    assert runs[0] == runs[1]
    assert runs[0].round_stats != runs[2].round_stats


@pytest.mark.parametrize("sampling", ["keyed", "numpy"])
def test_discovery_rate_matches_the_closed_form(sampling):
    # "ab" held by 60 users alone and sharing no prefix with the other items: found with
    # probability P(Binomial(60, p) >= tau) ** 3 (a, b and the terminator).
    users = {f"h{i}": ["ab"] for i in range(60)}
    users.update({f"o{i}": [f"z{i % 7}"] for i in range(200)})
    tau, p, runs = 20, 0.4, 400
    expected = st.discovery_probability(60, p, tau, 3)
    assert 0.3 < expected < 0.7
    results = simulate_many_sample_threshold(users, ENC, tau, p, range(runs), sampling=sampling)
    rate = np.mean(["ab" in r.heavy_hitters for r in results])
    assert abs(rate - expected) <= 5 * math.sqrt(expected * (1 - expected) / runs)


@pytest.mark.parametrize("p", [-0.1, 1.1, "0.5", None])
def test_invalid_probability(p):
    with pytest.raises(ValueError, match="sample_probability"):
        simulate_sample_threshold({"u": ["a"]}, ENC, 1, p, 0)
