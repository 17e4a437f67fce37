"""SipHash-2-4 and key derivation: the keyed hash that sampling and item choice are made of."""

import hashlib
import random

import numpy as np
import pytest

from tests.reference_siphash import PAPER_KEY, reference_siphash24
from triehh_beam.protocol.randomness import keyed_hash

SEED = bytes(range(100, 132))


# --------------------------------------------------------------------------------------------
# keyed_hash: SipHash-2-4
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "length, expected",
    [(0, 0x726FDB47DD0E0E31), (8, 0x93F5F5799A932462), (15, 0xA129CA6149BE45E5)],
)
def test_siphash_matches_paper_vectors(length, expected):
    message = bytes(range(length))
    assert keyed_hash.siphash24(PAPER_KEY, message) == expected
    assert reference_siphash24(PAPER_KEY, message) == expected


def test_siphash_batch_equals_scalar_for_lengths_0_to_63():
    messages = [bytes(range(i)) for i in range(64)]
    data, offsets = keyed_hash.pack_messages(messages)
    batch = keyed_hash.siphash24_batch(PAPER_KEY, data, offsets)
    assert batch.dtype == np.uint64
    scalar = [keyed_hash.siphash24(PAPER_KEY, msg) for msg in messages]
    assert [int(h) for h in batch] == scalar
    assert scalar == [reference_siphash24(PAPER_KEY, msg) for msg in messages]


def test_siphash_batch_random_keys_long_messages_and_offset_slices():
    rng = random.Random(7)
    key = (rng.getrandbits(64), rng.getrandbits(64))
    # Lengths past 255 exercise the "length mod 256" byte of the final word.
    messages = [bytes(rng.getrandbits(8) for _ in range(n)) for n in (0, 1, 7, 8, 9, 255, 256, 300)]
    data, offsets = keyed_hash.pack_messages(messages)
    expected = [reference_siphash24(key, msg) for msg in messages]
    assert [int(h) for h in keyed_hash.siphash24_batch(key, data, offsets)] == expected
    # A slice of the offsets (an Arrow array with a non-zero offset) hashes the same messages.
    sliced = keyed_hash.siphash24_batch(key, data, offsets[3:7])
    assert [int(h) for h in sliced] == expected[3:6]
    assert len(keyed_hash.siphash24_batch(key, data, offsets[:1])) == 0


def test_words_packed_once_hash_the_same_under_every_key():
    # What an audit does: the messages packed once (message_words), hashed under many keys.
    rng = random.Random(11)
    messages = [bytes(rng.getrandbits(8) for _ in range(n)) for n in (0, 3, 7, 8, 15, 16, 17, 40)]
    words, n_words = keyed_hash.message_words(*keyed_hash.pack_messages(messages))
    for _ in range(3):
        key = (rng.getrandbits(64), rng.getrandbits(64))
        assert [int(h) for h in keyed_hash.siphash24_words(key, words, n_words)] == [
            reference_siphash24(key, msg) for msg in messages]
    empty = keyed_hash.message_words(*keyed_hash.pack_messages([]))
    assert len(keyed_hash.siphash24_words(PAPER_KEY, *empty)) == 0


def test_derive_key_is_deterministic_and_purpose_separated():
    assert keyed_hash.derive_key(SEED, b"a") == keyed_hash.derive_key(SEED, b"a")
    assert keyed_hash.derive_key(SEED, b"a") != keyed_hash.derive_key(SEED, b"b")
    assert keyed_hash.derive_key(SEED, b"a") != keyed_hash.derive_key(SEED[::-1], b"a")
    with pytest.raises(ValueError):
        keyed_hash.derive_key(b"short", b"a")
    with pytest.raises(ValueError):
        keyed_hash.derive_key(bytes(65), b"a")


def test_a_job_identity_separates_keys_and_the_empty_one_keeps_the_seeds_own():
    # Jobs recorded before identities existed resume with exactly their old keys (pinned here:
    # the value the seed-only derivation gave before identities were added).
    golden = hashlib.sha256(b"golden").digest()
    assert keyed_hash.derive_key(golden, b"sample/round=1") == (457336935933441699, 460546703026680492)
    assert keyed_hash.derive_key(golden, b"sample/round=1", b"") == (457336935933441699, 460546703026680492)
    a = keyed_hash.derive_key(SEED, b"sample/round=1", b'{"job":"a"}')
    assert a == keyed_hash.derive_key(SEED, b"sample/round=1", b'{"job":"a"}')
    assert a != keyed_hash.derive_key(SEED, b"sample/round=1", b'{"job":"b"}')
    assert a != keyed_hash.derive_key(SEED, b"sample/round=1")
    # The pair is encoded unambiguously: moving bytes between identity and purpose changes the key.
    assert keyed_hash.derive_key(SEED, b"xy", b"a") != keyed_hash.derive_key(SEED, b"y", b"ax")
