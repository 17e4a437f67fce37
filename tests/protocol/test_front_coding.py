"""Front coding of a frontier: a hand-worked example, round trips of random sets, and every
non-canonical coding refused."""

import random

import pytest

from triehh_beam.protocol.front_coding import FrontCoded, FrontCodingError, front_code, front_decode


def test_a_hand_worked_example():
    prefixes = {(b"h", b"e", b"l"), (b"t", b"h", b"e"), (b"h", b"e", b"y"), (b"h", b"a", b"s")}
    # Sorted: has, hel, hey, the.
    coded = front_code(prefixes)
    assert coded == FrontCoded(shared=(0, 1, 2, 0), unit_lengths=(1,) * 9, units=b"has" b"el" b"y" b"the")
    assert front_decode(coded.shared, coded.unit_lengths, coded.units, 3) == sorted(prefixes)


def test_units_of_several_bytes_keep_their_lengths():
    prefixes = {("é".encode(), b"ab"), ("é".encode(), b"a"), (b"z", "日本".encode())}
    coded = front_code(prefixes)
    # By bytes: z (0x7a) before é (0xc3 0xa9); a before ab.
    assert coded.shared == (0, 0, 1)
    assert coded.unit_lengths == (1, 6, 2, 1, 2)
    assert front_decode(coded.shared, coded.unit_lengths, coded.units, 2) == sorted(prefixes)


def test_the_empty_prefix_alone_is_round_one():
    coded = front_code({()})
    assert coded == FrontCoded((0,), (), b"")
    assert front_decode((0,), (), b"", 0) == [()]
    with pytest.raises(FrontCodingError, match="shares 0 units"):
        front_decode((0, 0), (), b"", 0)  # () twice


@pytest.mark.parametrize("seed", range(20))
def test_random_sets_round_trip_and_share_the_longest_run(seed):
    rng = random.Random(seed)
    width = rng.randint(1, 6)
    alphabet = [bytes([b]) for b in rng.sample(range(256), rng.randint(2, 6))]
    if rng.random() < 0.5:
        alphabet.append(b"xy")  # a unit of two bytes among one-byte units
    prefixes = {tuple(rng.choice(alphabet) for _ in range(width)) for _ in range(rng.randint(1, 300))}
    coded = front_code(prefixes)
    ordered = sorted(prefixes)
    assert front_decode(coded.shared, coded.unit_lengths, coded.units, width) == ordered
    for i, prefix in enumerate(ordered):
        previous = ordered[i - 1] if i else ()
        common = next((k for k in range(width) if k >= len(previous) or previous[k] != prefix[k]), width)
        assert coded.shared[i] == common
    assert len(coded.unit_lengths) == sum(width - s for s in coded.shared)
    assert len(coded.units) == sum(coded.unit_lengths)


def test_front_code_refuses_what_is_not_a_frontier():
    with pytest.raises(FrontCodingError, match="2 and 1 units"):
        front_code({(b"a", b"b"), (b"c",)})
    with pytest.raises(FrontCodingError, match="empty unit"):
        front_code({(b"a", b"")})


GOOD = front_code({(b"a", b"b"), (b"a", b"c"), (b"b", b"a")})  # shared (0, 1, 0), units abcba


@pytest.mark.parametrize("shared, lengths, units, problem", [
    ((1, 1, 0), (1,) * 5, b"abcba", "the first shares 0"),
    ((0, 2, 0), (1,) * 5, b"abcba", "none all of its units"),
    ((0, 3, 0), (1,) * 5, b"abcba", "none all of its units"),
    ((0, 1, 0), (1,) * 4, b"abcba", "unit lengths are too few"),
    ((0, 1, 0), (1,) * 6, b"abcbaa", "1 unit lengths and 1 unit bytes left over"),
    ((0, 1, 0), (1,) * 5, b"abcbax", "0 unit lengths and 1 unit bytes left over"),
    ((0, 1, 0), (1, 1, 1, 1, 2), b"abcba", "a unit of 2 bytes at byte 4 of 5"),
    ((0, 1, 0), (1, 0, 1, 1, 1), b"abcba", "a unit of 0 bytes"),
    ((0, 1, 0), (1,) * 5, b"acbba", "does not come after"),  # ac, ab: out of order
    ((0, 0, 0), (1,) * 6, b"abacba", "does not share the longest"),  # ab, ac written in full
    ((0, 1, 1), (1,) * 4, b"abcb", "does not come after"),  # ab, ac, ab
])
def test_front_decode_refuses_every_non_canonical_coding(shared, lengths, units, problem):
    assert front_decode(GOOD.shared, GOOD.unit_lengths, GOOD.units, 2) == [(b"a", b"b"), (b"a", b"c"), (b"b", b"a")]
    with pytest.raises(FrontCodingError, match=problem):
        front_decode(shared, lengths, units, 2)
