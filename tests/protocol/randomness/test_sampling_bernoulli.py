"""TrieHH++'s keyed Bernoulli sample: a user is in round r's sample iff its keyed rank is below
floor(p_s 2^64). Deterministic (the same users on a retry, whatever the input order), and each
user independently with probability p_s: the sample's size is checked against Binomial(n, p_s)
and two rounds' overlap against Binomial(n, p_s^2), at fixed seeds, within 5 standard deviations
(a correct implementation fails at a random seed with probability below 1e-6 per check)."""

import math

import numpy as np
import pytest

from triehh_beam.protocol.randomness.sampling import (Sampler, bernoulli_threshold, in_bernoulli_sample,
                                                      user_id_bytes)

SEED = bytes(range(7, 39))
USERS = [f"user-{i}" for i in range(20_000)]


def _within(observed: int, n: int, p: float, sds: float = 5.0) -> bool:
    return abs(observed - n * p) <= sds * math.sqrt(n * p * (1 - p))


def test_threshold_is_floor_of_p_times_2_to_the_64():
    assert bernoulli_threshold(0.5) == 2**63
    assert bernoulli_threshold(0.0) == 0
    assert bernoulli_threshold(1.0) == 2**64
    t = bernoulli_threshold(0.1)
    assert t <= 0.1 * 2**64 < t + 1  # never above p: T / 2^64 <= p
    for bad in (-0.1, 1.5, "0.1", True, float("nan")):
        with pytest.raises(ValueError):
            bernoulli_threshold(bad)


def test_mask_edges():
    ranks = np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)
    assert in_bernoulli_sample(ranks, 0).tolist() == [False] * 4
    assert in_bernoulli_sample(ranks, 2**64).tolist() == [True] * 4
    assert in_bernoulli_sample(ranks, 2**63).tolist() == [True, True, False, False]


def test_a_user_is_sampled_iff_its_rank_is_below_the_threshold():
    sampler = Sampler(SEED)
    p = 0.113
    sample = set(sampler.bernoulli_sample(3, USERS[:2000], p))
    ranks = sampler.ranks(3, USERS[:2000])
    expected = {user_id_bytes(u) for u, r in zip(USERS[:2000], ranks) if int(r) < p * 2**64}
    assert sample == expected and sample


def test_deterministic_whatever_the_order_and_duplicates():
    p = 0.2
    first = Sampler(SEED).bernoulli_sample(2, USERS[:5000], p)
    shuffled = list(reversed(USERS[:5000])) + USERS[:100]  # another order, repeated users
    again = Sampler(bytes(SEED)).bernoulli_sample(2, shuffled, p)
    assert first == again == sorted(first)
    assert Sampler(SEED).bernoulli_sample(3, USERS[:5000], p) != first  # another round
    assert Sampler(SEED, b"other job").bernoulli_sample(2, USERS[:5000], p) != first


@pytest.mark.parametrize("p", [0.02, 0.113, 0.5])
def test_sample_share_is_binomial(p):
    sampler = Sampler(SEED)
    n = len(USERS)
    rounds = [set(sampler.bernoulli_sample(r, USERS, p)) for r in (1, 2, 3, 4)]
    for sample in rounds:
        assert _within(len(sample), n, p)
    # Rounds are independent: a user is in two rounds' samples with probability p^2.
    assert _within(len(rounds[0] & rounds[1]), n, p * p)
    assert _within(len(rounds[2] & rounds[3]), n, p * p)


def test_probability_zero_and_one():
    sampler = Sampler(SEED)
    assert sampler.bernoulli_sample(1, USERS[:100], 0.0) == []
    assert len(sampler.bernoulli_sample(1, USERS[:100], 1.0)) == 100
