"""Tests of the pure on-device and sampling modules: keyed_hash, sampling, vote, encoding.

Statistical tests run at fixed seeds, so they are deterministic; each states the tolerance it
was designed with (the probability that a correct implementation fails at a random seed).
"""

import collections
import itertools
import json
import os
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol import keyed_hash
from triehh_beam.protocol.encoding import (
    EmptyItemError,
    EncodingError,
    ItemEncoder,
    ItemKind,
    ItemTooLongError,
    is_terminated,
    sequence_length,
)
from triehh_beam.protocol.sampling import Sampler, SmallestRanks, user_id_bytes
from triehh_beam.protocol.vote import choose_sequence, client_vote, prefix_vote

SEED = bytes(range(100, 132))
# Significance used by the statistical tests (per test, at the fixed seed).
ALPHA = 1e-3


# --------------------------------------------------------------------------------------------
# keyed_hash: SipHash-2-4
# --------------------------------------------------------------------------------------------

PAPER_KEY = (
    int.from_bytes(bytes(range(0, 8)), "little"),
    int.from_bytes(bytes(range(8, 16)), "little"),
)


def _reference_siphash24(key, message: bytes) -> int:
    """A plain-integer SipHash-2-4, written from the paper, independent of the numpy code."""
    mask = (1 << 64) - 1

    def rotl(x, b):
        return ((x << b) | (x >> (64 - b))) & mask

    def sipround(v0, v1, v2, v3):
        v0 = (v0 + v1) & mask
        v1 = rotl(v1, 13) ^ v0
        v0 = rotl(v0, 32)
        v2 = (v2 + v3) & mask
        v3 = rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & mask
        v3 = rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & mask
        v1 = rotl(v1, 17) ^ v2
        v2 = rotl(v2, 32)
        return v0, v1, v2, v3

    k0, k1 = key
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    full = len(message) // 8 * 8
    for i in range(0, full, 8):
        m = int.from_bytes(message[i : i + 8], "little")
        v3 ^= m
        v0, v1, v2, v3 = sipround(*sipround(v0, v1, v2, v3))
        v0 ^= m
    last = int.from_bytes(message[full:], "little") | ((len(message) & 0xFF) << 56)
    v3 ^= last
    v0, v1, v2, v3 = sipround(*sipround(v0, v1, v2, v3))
    v0 ^= last
    v2 ^= 0xFF
    for _ in range(4):
        v0, v1, v2, v3 = sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


@pytest.mark.parametrize(
    "length, expected",
    [(0, 0x726FDB47DD0E0E31), (8, 0x93F5F5799A932462), (15, 0xA129CA6149BE45E5)],
)
def test_siphash_matches_paper_vectors(length, expected):
    message = bytes(range(length))
    assert keyed_hash.siphash24(PAPER_KEY, message) == expected
    assert _reference_siphash24(PAPER_KEY, message) == expected


def test_siphash_batch_equals_scalar_for_lengths_0_to_63():
    messages = [bytes(range(i)) for i in range(64)]
    data, offsets = keyed_hash.pack_messages(messages)
    batch = keyed_hash.siphash24_batch(PAPER_KEY, data, offsets)
    assert batch.dtype == np.uint64
    scalar = [keyed_hash.siphash24(PAPER_KEY, msg) for msg in messages]
    assert [int(h) for h in batch] == scalar
    assert scalar == [_reference_siphash24(PAPER_KEY, msg) for msg in messages]


def test_siphash_batch_random_keys_long_messages_and_offset_slices():
    rng = random.Random(7)
    key = (rng.getrandbits(64), rng.getrandbits(64))
    # Lengths past 255 exercise the "length mod 256" byte of the final word.
    messages = [bytes(rng.getrandbits(8) for _ in range(n)) for n in (0, 1, 7, 8, 9, 255, 256, 300)]
    data, offsets = keyed_hash.pack_messages(messages)
    expected = [_reference_siphash24(key, msg) for msg in messages]
    assert [int(h) for h in keyed_hash.siphash24_batch(key, data, offsets)] == expected
    # A slice of the offsets (an Arrow array with a non-zero offset) hashes the same messages.
    sliced = keyed_hash.siphash24_batch(key, data, offsets[3:7])
    assert [int(h) for h in sliced] == expected[3:6]
    assert len(keyed_hash.siphash24_batch(key, data, offsets[:1])) == 0


def test_derive_key_is_deterministic_and_purpose_separated():
    assert keyed_hash.derive_key(SEED, b"a") == keyed_hash.derive_key(SEED, b"a")
    assert keyed_hash.derive_key(SEED, b"a") != keyed_hash.derive_key(SEED, b"b")
    assert keyed_hash.derive_key(SEED, b"a") != keyed_hash.derive_key(SEED[::-1], b"a")
    with pytest.raises(ValueError):
        keyed_hash.derive_key(b"short", b"a")
    with pytest.raises(ValueError):
        keyed_hash.derive_key(bytes(65), b"a")


# --------------------------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------------------------


def test_user_id_canonical_bytes():
    assert user_id_bytes(42) == user_id_bytes("42") == user_id_bytes(b"42") == b"42"
    assert user_id_bytes(np.int64(42)) == b"42"
    assert user_id_bytes("é") == "é".encode("utf-8")
    for bad in (True, 4.2, None):
        with pytest.raises(TypeError):
            user_id_bytes(bad)
    with pytest.raises(ValueError):
        user_id_bytes("")


@pytest.mark.parametrize("m", [0, 1, 7, 50, 80])
def test_sample_has_exactly_m_distinct_users(m):
    users = [f"user-{i}" for i in range(50)]
    sample = Sampler(SEED).sample(1, users, m)
    assert len(sample) == min(m, 50)
    assert len(set(sample)) == len(sample)
    assert set(sample) <= {user_id_bytes(u) for u in users}


def test_sample_is_bottom_m_so_samples_nest_and_rounds_differ():
    sampler = Sampler(SEED)
    users = list(range(200))
    small, large = sampler.sample(3, users, 10), sampler.sample(3, users, 30)
    assert large[:10] == small
    assert sampler.sample(3, reversed(users), 10) == small  # input order does not matter
    assert sampler.sample(4, users, 10) != small
    assert Sampler(SEED[::-1]).sample(3, users, 10) != small
    with pytest.raises(ValueError):
        sampler.sample(0, users, 10)
    with pytest.raises(ValueError):
        sampler.sample(1, users, -1)


def test_sample_with_many_records_per_user_still_returns_distinct_users():
    # user 0 has 5,000 records, the others one or two; ids arrive in several equivalent forms.
    records = [0] * 5000 + list(range(1, 40)) + [str(i) for i in range(1, 40)] + [b"7"] * 10
    sampler = Sampler(SEED)
    for round_index in range(1, 30):
        sample = sampler.sample(round_index, records, 12)
        assert len(sample) == len(set(sample)) == 12
        assert sample == sampler.sample(round_index, range(40), 12)


_SUBPROCESS_CODE = """
import json, sys
from triehh_beam.protocol.sampling import Sampler
sampler = Sampler(bytes.fromhex(sys.argv[1]))
users = ["u%d" % i for i in range(300)]
print(json.dumps({
    "sample": [u.decode() for u in sampler.sample(5, users, 20)],
    "u": [sampler.choice_uniform(5, u) for u in users[:20]],
}))
"""


def test_sample_and_choice_are_identical_in_another_process():
    sampler = Sampler(SEED)
    users = [f"u{i}" for i in range(300)]
    here = {
        "sample": [u.decode() for u in sampler.sample(5, users, 20)],
        "u": [sampler.choice_uniform(5, u) for u in users[:20]],
    }
    env = dict(os.environ, PYTHONHASHSEED="12345")  # a different str hash salt than ours
    env["PYTHONPATH"] = os.pathsep.join(
        [str(pathlib.Path(__file__).resolve().parents[2])]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    out = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS_CODE, SEED.hex()],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(out.stdout) == here


def test_sample_is_uniform():
    # 50 users, m = 10, 2,000 rounds: each inclusion count c_i ~ Binomial(R, p = m/n). Sampling
    # a fixed-size set makes the counts negatively correlated; for that case
    # X = sum (c_i - Rp)^2 / (Rp(1-p)) * (n-1)/n is asymptotically chi-square with n-1 degrees
    # of freedom. Tolerance: fail below p-value ALPHA (1e-3), plus each count within the
    # Bonferroni-corrected two-sided binomial interval at ALPHA.
    n, m, rounds = 50, 10, 2000
    users = [f"user{i}" for i in range(n)]
    sampler = Sampler(SEED)
    counts = collections.Counter()
    for r in range(1, rounds + 1):
        counts.update(sampler.sample(r, users, m))
    c = np.array([counts[user_id_bytes(u)] for u in users], dtype=float)
    assert c.sum() == rounds * m
    p = m / n
    statistic = ((c - rounds * p) ** 2).sum() / (rounds * p * (1 - p)) * (n - 1) / n
    assert stats.chi2.sf(statistic, n - 1) > ALPHA, statistic
    low, high = stats.binom.ppf([ALPHA / (2 * n), 1 - ALPHA / (2 * n)], rounds, p)
    assert low <= c.min() and c.max() <= high, (c.min(), c.max(), low, high)


def test_choice_uniform_is_uniform_and_deterministic():
    sampler = Sampler(SEED)
    values = [sampler.choice_uniform(r, u) for r in range(1, 11) for u in range(200)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert stats.kstest(values, "uniform").pvalue > ALPHA
    assert sampler.choice_uniform(3, 17) == sampler.choice_uniform(3, "17")
    # Independent of the sampling rank: a different derived key.
    ranks = sampler.ranks(1, range(200)) / 2.0**64
    assert abs(stats.spearmanr(ranks, values[:200]).statistic) < 0.25


def _merged(batches, m, order, tree):
    """Fill one accumulator per batch, then merge them in ``order`` as a chain or a tree."""
    accumulators = []
    for i in order:
        acc = SmallestRanks(m)
        ranks, ids = batches[i]
        acc.add_batch(np.array(ranks, dtype=np.uint64), ids)
        accumulators.append(acc)
    if tree:
        while len(accumulators) > 1:
            pairs = [accumulators[i : i + 2] for i in range(0, len(accumulators), 2)]
            accumulators = [p[0].merge(p[1]) if len(p) == 2 else p[0] for p in pairs]
        return accumulators[0].extract()
    result = accumulators[0]
    for acc in accumulators[1:]:
        result = result.merge(acc)
    return result.extract()


@pytest.mark.parametrize("m", [1, 5, 17, 100])
def test_smallest_ranks_merge_order_independent(m):
    rng = random.Random(m)
    # Few distinct ranks, so ties between users are frequent (broken by the id bytes); users
    # repeat across batches, always with their own rank (as a user with many records does).
    rank_of = {f"u{i:03d}".encode(): rng.randrange(30) for i in range(60)}
    records = [u for u in rank_of for _ in range(rng.randrange(1, 4))]
    rng.shuffle(records)
    batches = []
    for start in range(0, len(records), 13):
        ids = records[start : start + 13]
        batches.append(([rank_of[u] for u in ids], ids))
    expected = sorted({(r, u) for u, r in rank_of.items()})[:m]
    orders = [list(range(len(batches))), list(reversed(range(len(batches))))]
    for _ in range(5):
        orders.append(rng.sample(range(len(batches)), len(batches)))
    for order, tree in itertools.product(orders, (False, True)):
        assert _merged(batches, m, order, tree) == expected

    # One accumulator fed batch after batch (the bound from a full accumulator applies).
    single = SmallestRanks(m)
    for ranks, ids in batches:
        single.add_batch(np.array(ranks, dtype=np.uint64), ids)
    assert single.extract() == expected
    assert single.threshold() == expected[-1]


def test_smallest_ranks_edge_cases():
    empty = SmallestRanks(3)
    assert empty.extract() == [] and empty.threshold() is None
    zero = SmallestRanks(0)
    zero.add_batch(np.array([1, 2], dtype=np.uint64), [b"a", b"b"])
    assert zero.extract() == []
    acc = SmallestRanks(2)
    acc.add_batch(np.array([], dtype=np.uint64), [])
    acc.add_batch(np.array([5, 5, 5], dtype=np.uint64), [b"c", b"b", b"c"])
    assert acc.extract() == [(5, b"b"), (5, b"c")]
    merged = acc.merge(SmallestRanks(2, [(1, b"z")]))
    assert merged.extract() == [(1, b"z"), (5, b"b")]
    assert acc.extract() == [(5, b"b"), (5, b"c")]  # merge does not mutate its operands
    with pytest.raises(ValueError):
        SmallestRanks(-1)


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


# --------------------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------------------

UNICODE_ITEMS = ["é", "ß", "中文", "👍🏽", "naïve café", "$", "a$b", "$$", "100$", "👨‍👩‍👧"]


@pytest.mark.parametrize("unit_size", [1, 2, 3, 4])
@pytest.mark.parametrize("item", UNICODE_ITEMS)
def test_text_items_round_trip(item, unit_size):
    enc = ItemEncoder(unit_size=unit_size, max_length=20)
    sequence = enc.encode(item)
    assert is_terminated(sequence) and sequence[-1] == ""
    assert all(len(unit) >= 1 for unit in sequence[:-1])  # no real unit equals the terminator
    assert all(len(unit) <= unit_size for unit in sequence[:-1])
    assert sequence_length(sequence) == -(-len(item) // unit_size) + 1
    assert enc.decode(sequence) == item
    # The wire form of every unit round-trips too.
    assert tuple(enc.unit_from_bytes(enc.unit_to_bytes(u)) for u in sequence) == sequence


def test_dollar_items_are_distinct_from_terminator():
    sequences = {ENC.encode(i) for i in ("a", "a$", "$a", "$", "$$")}
    assert len(sequences) == 5
    assert ENC.encode("a$") == ("a", "$", "")
    assert not is_terminated(("a", "$"))


def test_normalisation_nfc_and_case_fold():
    decomposed = "e\u0301"  # e + combining acute
    assert ENC.encode(decomposed) == ENC.encode("é") == ("é", "")
    folded = ItemEncoder(case_fold=True)
    assert folded.encode("Straße") == folded.encode("STRASSE") == tuple("strasse") + ("",)
    assert ENC.encode("Straße") != ENC.encode("strasse")  # no folding by default


@pytest.mark.parametrize("unit_size", [1, 2, 3, 4])
def test_bytes_items_round_trip(unit_size):
    enc = ItemEncoder(kind=ItemKind.BYTES, unit_size=unit_size, max_length=24)
    for item in (b"\x00", b"$", b"\x00$\xff", bytes(range(20)), "中".encode()):
        sequence = enc.encode(item)
        assert sequence[-1] == b"" and enc.decode(sequence) == item
        assert all(1 <= len(u) <= unit_size for u in sequence[:-1])


@pytest.mark.parametrize("unit_size", [1, 2, 3, 4])
def test_too_long_items_raise_and_truncate(unit_size):
    enc = ItemEncoder(unit_size=unit_size, max_length=4)
    fits = "x" * (3 * unit_size)  # 3 units + terminator = L
    too_long = fits + "y"  # 4 units + terminator
    assert sequence_length(enc.encode(fits)) == 4
    assert enc.encode_truncated(fits) == enc.encode(fits)
    with pytest.raises(ItemTooLongError) as info:
        enc.encode(too_long)
    assert (info.value.length, info.value.max_length) == (5, 4)
    truncated = enc.encode_truncated(too_long)
    assert len(truncated) == 4 and not is_terminated(truncated)
    assert enc.decode(truncated) == too_long[: 4 * unit_size]


def test_lone_surrogate_is_refused_at_encoding():
    # Every unit of an encoded sequence must have a wire form (UTF-8).
    with pytest.raises(EncodingError):
        ENC.encode("a\ud800b")


def test_encoder_errors():
    with pytest.raises(EmptyItemError):
        ENC.encode("")
    with pytest.raises(EncodingError):
        ENC.encode(b"bytes")
    with pytest.raises(EncodingError):
        ItemEncoder(kind="bytes").encode("text")
    for bad in (dict(unit_size=0), dict(max_length=1), dict(kind="bytes", case_fold=True)):
        with pytest.raises(ValueError):
            ItemEncoder(**bad)


# --------------------------------------------------------------------------------------------
# Regression tests for defects found while writing these tests.
# --------------------------------------------------------------------------------------------


def test_float_round_index_is_refused_or_equal_to_int_round():
    sampler = Sampler(SEED)
    users = range(100)
    try:
        other = sampler.sample(3.0, users, 10)
    except (TypeError, ValueError):
        return
    assert other == sampler.sample(3, users, 10)


def test_client_vote_accepts_numpy_integer_counts():
    assert client_vote({HI: np.int64(3)}, {()}, 1, 0.5) == ("h",)
