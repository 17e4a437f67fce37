"""The compiled batch SipHash (``native/siphash.c``, the ``triehh_beam_siphash`` extension) equals
the numpy reference bit for bit, and is what this test environment runs: a missing build fails
here rather than silently hashing with numpy. Set ``TRIEHH_ALLOW_NUMPY_HASH=1`` to run the suite
where the extension cannot be built (no C compiler); the comparisons are then skipped."""

import os
import random

import numpy as np
import pytest

from tests.reference_siphash import PAPER_KEY, reference_siphash24
from triehh_beam.protocol.randomness import keyed_hash

ALLOW_NUMPY = os.environ.get("TRIEHH_ALLOW_NUMPY_HASH") == "1"
compiled_only = pytest.mark.skipif(keyed_hash.implementation() != "compiled",
                                   reason="the compiled hash is not built")


def _random_batch(rng: random.Random, lengths):
    messages = [rng.randbytes(n) for n in lengths]
    return messages, keyed_hash.pack_messages(messages)


def test_the_compiled_hash_is_what_runs():
    if ALLOW_NUMPY:
        pytest.skip("TRIEHH_ALLOW_NUMPY_HASH=1: the numpy hash is allowed")
    assert keyed_hash.implementation() == "compiled", (
        "triehh_beam_siphash is not importable: `pip install .` builds it (needs a C compiler); "
        "set TRIEHH_ALLOW_NUMPY_HASH=1 to test with the numpy hash instead")


@compiled_only
def test_compiled_equals_numpy_and_the_paper_on_every_length_0_to_80():
    rng = random.Random(27)
    for _ in range(5):
        key = (rng.getrandbits(64), rng.getrandbits(64))
        messages, (data, offsets) = _random_batch(rng, range(81))
        compiled = keyed_hash.siphash24_batch(key, data, offsets)
        assert compiled.dtype == np.uint64 and compiled.shape == (81,)
        assert compiled.tolist() == keyed_hash.siphash24_batch_numpy(key, data, offsets).tolist()
        assert compiled.tolist() == [reference_siphash24(key, m) for m in messages]


@compiled_only
def test_compiled_equals_numpy_on_a_large_shuffled_batch():
    # Lengths past 255 exercise the "length mod 256" byte; shuffled so neighbours differ.
    rng = random.Random(28)
    lengths = [rng.choice([0, 1, 7, 8, 9, 16, rng.randrange(300)]) for _ in range(5000)]
    _, (data, offsets) = _random_batch(rng, lengths)
    key = (rng.getrandbits(64), rng.getrandbits(64))
    assert np.array_equal(keyed_hash.siphash24_batch(key, data, offsets),
                          keyed_hash.siphash24_batch_numpy(key, data, offsets))


@compiled_only
def test_int32_offsets_and_slices_that_do_not_start_at_zero():
    rng = random.Random(29)
    messages, (data, offsets) = _random_batch(rng, [rng.randrange(40) for _ in range(200)])
    key = (rng.getrandbits(64), rng.getrandbits(64))
    expected = keyed_hash.siphash24_batch_numpy(key, data, offsets).tolist()
    assert keyed_hash.siphash24_batch(key, data, offsets.astype(np.int32)).tolist() == expected
    for lo, hi in ((0, 1), (17, 18), (3, 120), (150, 200), (199, 200)):
        for offset_type in (np.int64, np.int32):
            sliced = offsets[lo : hi + 1].astype(offset_type)
            assert sliced[0] > 0 or lo == 0
            assert keyed_hash.siphash24_batch(key, data, sliced).tolist() == expected[lo:hi]
    # A window of the data holding just the sliced messages, its offsets rebased to it.
    window = data[offsets[10] : offsets[20]]
    assert keyed_hash.siphash24_batch(key, window, offsets[10:21] - offsets[10]).tolist() == expected[10:20]
    # Other integer offsets (a list, uint64) are taken as int64.
    assert keyed_hash.siphash24_batch(key, data, offsets.astype(np.uint64)).tolist() == expected
    assert keyed_hash.siphash24_batch(key, data, offsets.tolist()).tolist() == expected


def test_empty_batches_in_either_implementation(monkeypatch):
    data = np.frombuffer(b"abc", dtype=np.uint8)
    for implementation in ("compiled", "numpy"):
        if implementation == "numpy":
            monkeypatch.setattr(keyed_hash, "_compiled", None)
        elif keyed_hash.implementation() != "compiled":
            continue
        for offsets in (np.zeros(1, np.int64), np.array([2], np.int32), np.zeros(0, np.int64)):
            hashes = keyed_hash.siphash24_batch(PAPER_KEY, data, offsets)
            assert hashes.dtype == np.uint64 and len(hashes) == 0
        assert len(keyed_hash.siphash24_batch(PAPER_KEY, np.zeros(0, np.uint8), np.zeros(1, np.int64))) == 0
        # One empty message in an empty buffer is the paper's vector for length 0.
        [empty] = keyed_hash.siphash24_batch(PAPER_KEY, np.zeros(0, np.uint8), np.zeros(2, np.int64))
        assert int(empty) == 0x726FDB47DD0E0E31


@pytest.mark.parametrize("offsets", [[0, 3, 2], [0, 4], [-1, 2], [2, 1]])
def test_offsets_that_leave_the_data_are_refused_by_either_implementation(monkeypatch, offsets):
    data = np.frombuffer(b"abc", dtype=np.uint8)
    for offset_type in (np.int64, np.int32):
        with pytest.raises(ValueError, match="non-decreasing and within the data"):
            keyed_hash.siphash24_batch(PAPER_KEY, data, np.array(offsets, offset_type))
    monkeypatch.setattr(keyed_hash, "_compiled", None)
    assert keyed_hash.implementation() == "numpy"
    with pytest.raises(ValueError, match="non-decreasing and within the data"):
        keyed_hash.siphash24_batch(PAPER_KEY, data, np.array(offsets, np.int64))


def test_the_numpy_fallback_gives_the_paper_vectors(monkeypatch):
    monkeypatch.setattr(keyed_hash, "_compiled", None)
    assert keyed_hash.implementation() == "numpy"
    assert keyed_hash.siphash24(PAPER_KEY, bytes(range(15))) == 0xA129CA6149BE45E5


@compiled_only
def test_keys_as_numpy_integers_or_beyond_64_bits_hash_as_the_numpy_code_does():
    # The numpy code takes each key half mod 2^64, as numpy uint64 or Python int alike.
    _, (data, offsets) = _random_batch(random.Random(30), range(20))
    for key in ((np.uint64(2**64 - 1), np.uint64(5)), (-1, 2**64 + 5), (2**64 - 1, 5)):
        assert np.array_equal(keyed_hash.siphash24_batch(key, data, offsets),
                              keyed_hash.siphash24_batch_numpy(key, data, offsets))
