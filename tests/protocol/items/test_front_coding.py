"""Front coding of a frontier: a hand-worked example, round trips of random sets, and every
non-canonical coding refused."""

import random

import pytest

from triehh_beam.protocol.items.front_coding import (FrontCoded, FrontCodingError, front_code,
                                                     front_decode)


def test_a_hand_worked_example():
    prefixes = {(b"h", b"e", b"l"), (b"t", b"h", b"e"), (b"h", b"e", b"y"), (b"h", b"a", b"s")}
    # Sorted: has, hel, hey, the.
    coded = front_code(prefixes)
    # Every unit has 1 byte: the width is written once, no lengths.
    assert coded == FrontCoded(shared=(0, 1, 2, 0), unit_width=1, unit_lengths=(), units=b"has" b"el" b"y" b"the")
    assert front_decode(coded, 3) == sorted(prefixes)


def test_units_of_several_bytes_keep_their_lengths():
    prefixes = {("é".encode(), b"ab"), ("é".encode(), b"a"), (b"z", "日本".encode())}
    coded = front_code(prefixes)
    # By bytes: z (0x7a) before é (0xc3 0xa9); a before ab.
    assert coded.shared == (0, 0, 1)
    assert coded.unit_width == 0 and coded.unit_lengths == (1, 6, 2, 1, 2)
    assert front_decode(coded, 2) == sorted(prefixes)


def test_the_empty_prefix_alone_is_round_one():
    coded = front_code({()})
    assert coded == FrontCoded((0,), 0, (), b"")
    assert front_decode(coded, 0) == [()]
    with pytest.raises(FrontCodingError, match="shares 0 units"):
        front_decode(FrontCoded((0, 0), 0, (), b""), 0)  # () twice


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
    assert front_decode(coded, width) == ordered
    for i, prefix in enumerate(ordered):
        previous = ordered[i - 1] if i else ()
        common = next((k for k in range(width) if k >= len(previous) or previous[k] != prefix[k]), width)
        assert coded.shared[i] == common
    written = [unit for i, prefix in enumerate(ordered) for unit in prefix[coded.shared[i]:]]
    assert b"".join(written) == coded.units
    if len({len(unit) for unit in written}) == 1:
        assert coded.unit_width == len(written[0]) and coded.unit_lengths == ()
    else:
        assert coded.unit_width == 0 and coded.unit_lengths == tuple(len(unit) for unit in written)


def test_front_code_refuses_what_is_not_a_frontier():
    with pytest.raises(FrontCodingError, match="2 and 1 units"):
        front_code({(b"a", b"b"), (b"c",)})
    with pytest.raises(FrontCodingError, match="empty unit"):
        front_code({(b"a", b"")})


GOOD = front_code({(b"a", b"b"), (b"a", b"c"), (b"b", b"a")})  # shared (0, 1, 0), width 1, units abcba
MIXED = front_code({(b"a", b"b"), (b"a", b"cc"), (b"b", b"a")})  # lengths (1, 1, 2, 1, 1), units abccba


@pytest.mark.parametrize("shared, width, lengths, units, problem", [
    ((1, 1, 0), 1, (), b"abcba", "the first shares 0"),
    ((0, 2, 0), 1, (), b"abcba", "none all of its units"),
    ((0, 3, 0), 1, (), b"abcba", "none all of its units"),
    ((0, 1, 0), 1, (), b"abcb", "the 4 units written are too few"),
    ((0, 1, 0), 1, (), b"abcbaa", "1 units and 1 unit bytes left over"),
    ((0, 1, 0), 2, (), b"aabbcc", "the 3 units written are too few"),
    ((0, 1, 0), 1, (1, 1, 1, 1, 1), b"abcba", "both a unit width and unit lengths"),
    ((0, 1, 0), 0, (1, 1, 1, 1, 1), b"abcba", "unit lengths all equal where a unit width is written"),
    ((0, 1, 0), 0, (1, 1, 2, 1), b"abccb", "the 4 units written are too few"),
    ((0, 1, 0), 0, (1, 1, 2, 1, 2), b"abccba", "a unit of 2 bytes at byte 5 of 6"),
    ((0, 1, 0), 0, (1, 0, 2, 1, 1), b"abccba", "a unit of 0 bytes"),
    ((0, 1, 0), 0, (1, 1, 2, 1, 1, 3), b"abccba", "1 units and 0 unit bytes left over"),
    ((0, 1, 0), 1, (), b"acbba", "does not come after"),  # ac, ab: out of order
    ((0, 0, 0), 1, (), b"abacba", "does not share the longest"),  # ab, ac written in full
    ((0, 1, 1), 1, (), b"abcb", "does not come after"),  # ab, ac, ab
])
def test_front_decode_refuses_every_non_canonical_coding(shared, width, lengths, units, problem):
    assert front_decode(GOOD, 2) == [(b"a", b"b"), (b"a", b"c"), (b"b", b"a")]
    assert MIXED == FrontCoded((0, 1, 0), 0, (1, 1, 2, 1, 1), b"abccba")
    assert front_decode(MIXED, 2) == [(b"a", b"b"), (b"a", b"cc"), (b"b", b"a")]
    with pytest.raises(FrontCodingError, match=problem):
        front_decode(FrontCoded(shared, width, lengths, units), 2)


def test_a_huge_declared_prefix_length_costs_nothing():
    # A hostile message may claim prefixes of 2^32 - 2 units: refused by the bytes it holds.
    with pytest.raises(FrontCodingError, match="the 5 units written are too few"):
        front_decode(GOOD, 2**32 - 2)
