"""One user's records as weighted sequences (protocol/items/user_items.py): the rule case by case,
and equal to the keyed simulation's own encoding (reference/simulation.py ``encode_population``, which
calls the encoder directly) on random populations, tokenised ones pre-tokenised for it."""

import random

import pytest

from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.items.tokenize import tokenize
from triehh_beam.protocol.items.user_items import EncodedValue, encode_value, weighted_sequences
from triehh_beam.reference.simulation import encode_population

TEXT = ItemEncoder(max_length=4)


@pytest.mark.parametrize("encoder, value, truncate, expected", [
    (TEXT, "ab", False, EncodedValue((("a", "b", ""),), 0, 0)),
    (TEXT, "abcd", False, EncodedValue((), 1, 0)),
    (TEXT, "abcd", True, EncodedValue((("a", "b", "c", "d"),), 0, 0)),
    (TEXT, "abc", False, EncodedValue((("a", "b", "c", ""),), 0, 0)),  # L = 4 units, terminator included
    (TEXT, "", False, EncodedValue((), 0, 1)),
    (TEXT, b"bytes", False, EncodedValue((), 0, 1)),
    (TEXT, "e\u0301", False, EncodedValue((("é", ""),), 0, 0)),  # NFC
    (ItemEncoder(kind="int", int_bits=4, unit_size=2, max_length=3), " -1 ", False,
     EncodedValue(((b"01", b"11", b""),), 0, 0)),
    (ItemEncoder(kind="int", int_bits=4, unit_size=2, max_length=3), 8, False, EncodedValue((), 0, 1)),
    (ItemEncoder(kind="bytes", unit_size=2, max_length=3), b"abc", False, EncodedValue(((b"ab", b"c", b""),), 0, 0)),
    (ItemEncoder(tokenize=True, max_length=4), "the cat, the cattle", False,
     EncodedValue((("t", "h", "e", ""), ("c", "a", "t", ""), ("t", "h", "e", "")), 1, 0)),
    (ItemEncoder(tokenize=True, max_length=4), "the cattle", True,
     EncodedValue((("t", "h", "e", ""), ("c", "a", "t", "t")), 0, 0)),
    (ItemEncoder(tokenize=True, max_length=4), "  ... !", False, EncodedValue((), 0, 1)),
    (ItemEncoder(tokenize=True, max_length=4), 42, False, EncodedValue((), 0, 1)),
])
def test_encode_value_case_by_case(encoder, value, truncate, expected):
    assert encode_value(encoder, value, truncate) == expected


def test_weighted_sequences_sum_counts_and_drop_zeros():
    records = [("ab", 2), ("a\u0062", 3), ("zz", 0), ("abcd", 4), ("", 5)]
    assert weighted_sequences(TEXT, records, False) == {("a", "b", ""): 5}
    assert weighted_sequences(TEXT, dict(records), True) == {("a", "b", ""): 3, ("a", "b", "c", "d"): 4}
    assert weighted_sequences(TEXT, [], False) == {}


@pytest.mark.parametrize("count", [-1, 1.0, True, "2", None])
def test_weighted_sequences_refuse_a_bad_count(count):
    with pytest.raises(ValueError, match="counts must be non-negative integers"):
        weighted_sequences(TEXT, [("ab", count)], False)


WORDS = ["the", "then", "they", "théâtre", "Theatre", "cafe\u0301", "café", "日本語", "a", "x" * 12, "ab"]


def _population(seed, tokens=False):
    rng = random.Random(seed)
    users = {}
    for user in range(400):
        items = {}
        for _ in range(rng.randint(1, 5)):
            value = " ".join(rng.choices(WORDS, k=rng.randint(1, 3))) if tokens else rng.choice(WORDS)
            items[value] = items.get(value, 0) + rng.randint(0, 3)
        users[f"user-{user}"] = items
    return users


@pytest.mark.parametrize("encoder", [ItemEncoder(max_length=6), ItemEncoder(unit_size=2, max_length=5, case_fold=True)])
@pytest.mark.parametrize("too_long", ["drop", "truncate"])
def test_equal_to_the_simulations_encoding(encoder, too_long):
    users = _population(1)
    population = encode_population(users, encoder, too_long)
    for user_id, weighted in zip(population.user_ids, population.weighted):
        ours = weighted_sequences(encoder, users[user_id.decode()], too_long == "truncate")
        assert tuple(sorted(ours.items())) == weighted
    assert population.records_too_long > 0  # the long words were met


@pytest.mark.parametrize("too_long", ["drop", "truncate"])
def test_tokenised_records_equal_the_simulation_on_pre_tokenised_records(too_long):
    encoder = ItemEncoder(tokenize=True, case_fold=True, max_length=6)
    plain = ItemEncoder(case_fold=True, max_length=6)
    users = _population(2, tokens=True)
    pre_tokenised = {}
    for user, items in users.items():
        tokens = {}
        for value, count in items.items():
            for token in tokenize(value):
                tokens[token] = tokens.get(token, 0) + count
        pre_tokenised[user] = tokens
    population = encode_population(pre_tokenised, plain, too_long)
    checked = 0
    for user_id, weighted in zip(population.user_ids, population.weighted):
        ours = weighted_sequences(encoder, users[user_id.decode()], too_long == "truncate")
        assert tuple(sorted(ours.items())) == weighted
        checked += len(weighted) > 1
    assert checked > 100
