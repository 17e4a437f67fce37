"""Shamir sharing over GF(2^31 - 1): a hand-computed vector, recovery from every threshold-sized
subset, refusals, and the Lagrange coefficients' closed form (they sum to 1)."""

import itertools
import random

import numpy as np
import pytest

from triehh_beam.protocol.secagg import shamir


def _source(seed):
    return random.Random(seed).randbytes


def test_hand_computed_vector():
    # Secret chunk 5, coefficient 7: the polynomial 5 + 7x at x = 1, 2, 3 is 12, 19, 26.
    shares = shamir.split(b"\x00\x00\x05", 2, [1, 2, 3], lambda n: (7).to_bytes(4, "big") * (n // 4))
    assert shares == {1: (12).to_bytes(4, "big"), 2: (19).to_bytes(4, "big"), 3: (26).to_bytes(4, "big")}
    assert shamir.combine({2: shares[2], 3: shares[3]}, 2, 3) == b"\x00\x00\x05"


def test_a_coefficient_equal_to_the_prime_is_redrawn():
    words = iter([shamir.PRIME.to_bytes(4, "big"), (9).to_bytes(4, "big")])
    shares = shamir.split(b"\x00\x00\x01", 2, [1, 2], lambda n: next(words))
    assert shares[1] == (10).to_bytes(4, "big")


@pytest.mark.parametrize("length", [1, 2, 3, 16, 32, 33])
def test_any_threshold_subset_recovers_the_secret(length):
    rng = random.Random(length)
    secret = rng.randbytes(length)
    xs = [1, 2, 3, 5, 8, 13]
    shares = shamir.split(secret, 4, xs, _source(length))
    assert all(len(s) == shamir.share_bytes(length) for s in shares.values())
    for subset in itertools.combinations(xs, 4):
        assert shamir.combine({x: shares[x] for x in subset}, 4, length) == secret


def test_fewer_shares_than_the_threshold_are_refused():
    shares = shamir.split(b"secret", 3, [1, 2, 3], _source(1))
    with pytest.raises(shamir.ShamirError, match="2 shares, 3 needed"):
        shamir.combine({1: shares[1], 2: shares[2]}, 3, 6)


def test_below_threshold_shares_fit_every_secret():
    # t - 1 shares of a t-of-n sharing are consistent with any secret: with t = 2, one share
    # value y at x = 1 matches secret s with coefficient y - s, for every s.
    counts = np.zeros(8, dtype=int)
    rng = random.Random(3)
    for _ in range(4000):
        share = shamir.split(b"\x00\x00\x00", 2, [1, 2], rng.randbytes)[1]
        counts[int.from_bytes(share, "big") >> 28] += 1
    # 8 equal bins of the share's top bits; chi-square with 7 df below its 0.999 quantile (24.32).
    expected = 4000 / 8
    assert ((counts - expected) ** 2 / expected).sum() < 24.32


def test_lagrange_coefficients_sum_to_one():
    for xs in ([1, 2], [1, 4, 9], list(range(1, 40, 3))):
        assert int(shamir.lagrange_at_zero(xs).sum()) % shamir.PRIME == 1


@pytest.mark.parametrize("threshold, xs, secret, match", [
    (0, [1, 2], b"s", "threshold"), (3, [1, 2], b"s", "threshold"), (2, [1, 1], b"s", "repeated"),
    (1, [0], b"s", "x-coordinate"), (1, [1], b"", "non-empty"),
])
def test_bad_splits_are_refused(threshold, xs, secret, match):
    with pytest.raises(shamir.ShamirError, match=match):
        shamir.split(secret, threshold, xs, _source(0))


def test_bad_shares_are_refused():
    shares = shamir.split(b"abcdef", 2, [1, 2], _source(2))
    with pytest.raises(shamir.ShamirError, match="8 bytes"):
        shamir.combine({1: shares[1][:-1], 2: shares[2]}, 2, 6)
    with pytest.raises(shamir.ShamirError, match="prime"):
        shamir.combine({1: b"\xff" * 8, 2: shares[2]}, 2, 6)
    # A mutated share recovers another secret or is caught by its padding/range check.
    altered = bytes([shares[1][0] ^ 1]) + shares[1][1:]
    try:
        assert shamir.combine({1: altered, 2: shares[2]}, 2, 6) != b"abcdef"
    except shamir.ShamirError:
        pass
