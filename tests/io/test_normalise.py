"""Tests of triehh_beam.io.normalise: the buffers handed to the hashing, the pure
normalisation of ids, items and counts, the checks and their order, and the decoding of
base64 and hex items."""

from __future__ import annotations

import base64
import binascii
import random

import numpy as np
import pyarrow as pa
import pytest

from triehh_beam.io import (RECORD_SCHEMA, RecordColumns, RecordFormatError, RecordOptions,
                            binary_buffers, normalise_batch)
from triehh_beam.protocol.randomness import keyed_hash, sampling
from tests.io.helpers import (
    batch_rows,
)


@pytest.mark.parametrize("kind", [pa.binary(), pa.string(), pa.large_binary(), pa.large_string()])
def test_binary_buffers_whole_and_sliced(kind):
    values = ["", "a", "héllo", "xyz" * 10, "", "007", "42"]
    array = pa.array(values, kind)
    for start, length in [(0, 7), (1, 3), (2, 5), (4, 0), (6, 1), (0, 0)]:
        part = array.slice(start, length)
        data, offsets = binary_buffers(part)
        assert data.dtype == np.uint8 and offsets.dtype == np.int64
        assert len(offsets) == length + 1 and offsets[0] == 0
        got = [bytes(data[offsets[i] : offsets[i + 1]]) for i in range(length)]
        assert got == [v.encode() for v in values[start : start + length]]
        expected_data, expected_offsets = keyed_hash.pack_messages(got)
        np.testing.assert_array_equal(offsets, expected_offsets)
        np.testing.assert_array_equal(data, expected_data)


def test_binary_buffers_is_zero_copy_for_the_data():
    array = pa.array([b"abc", b"defg", b"hi"], pa.binary()).slice(1, 2)
    data, offsets = binary_buffers(array)
    assert bytes(data) == b"defghi"
    assert data.ctypes.data == array.buffers()[2].address + 3  # a view into Arrow's buffer
    assert not data.flags.writeable


def test_binary_buffers_hashes_like_the_reference():
    key = keyed_hash.derive_key(b"s" * 16, b"test")
    users = pa.array([b"u%d" % i for i in range(50)], pa.binary()).slice(7, 30)
    expected = [keyed_hash.siphash24(key, u) for u in users.to_pylist()]
    assert keyed_hash.siphash24_batch(key, *binary_buffers(users)).tolist() == expected


def test_binary_buffers_takes_chunked_arrays_and_refuses_other_types():
    chunked = pa.chunked_array([pa.array(["a", "bc"]), pa.array(["d"])])
    data, offsets = binary_buffers(chunked)
    assert bytes(data) == b"abcd" and offsets.tolist() == [0, 1, 3, 4]
    with pytest.raises(TypeError, match="binary or string"):
        binary_buffers(pa.array([1, 2]))


def test_normalise_matches_sampling_user_id_bytes():
    ids = [42, 0, -5, 2**62, 7]
    batch = pa.record_batch({"user_id": pa.array(ids), "item": pa.array(["i"] * 5)})
    good, drops = normalise_batch(batch)
    assert good.column("user_id").to_pylist() == [sampling.user_id_bytes(u) for u in ids]
    assert good.column("count").to_pylist() == [1] * 5  # no count column
    assert drops == {"missing_user": 0, "missing_item": 0, "bad_count": 0}
    texts = ["42", "007", "héllo", "ユーザー"]
    batch = pa.record_batch({"user_id": pa.array(texts), "item": pa.array(["i"] * 4)})
    assert normalise_batch(batch)[0].column("user_id").to_pylist() == [
        sampling.user_id_bytes(u) for u in texts
    ]


def test_normalise_int_and_string_ids_are_the_same_user():
    as_int = pa.record_batch({"user_id": pa.array([42], pa.uint32()), "item": ["a"]})
    as_text = pa.record_batch({"user_id": pa.array(["42"]), "item": ["a"]})
    as_bytes = pa.record_batch({"user_id": pa.array([b"42"]), "item": ["a"]})
    results = [
        normalise_batch(b)[0].column("user_id").to_pylist() for b in (as_int, as_text, as_bytes)
    ]
    assert results == [[b"42"]] * 3


def test_normalise_drops_and_counts_bad_rows_once_each():
    batch = pa.record_batch(
        {
            "user_id": pa.array(["a", None, "", "b", "c", "d", "e", None, "f"]),
            "item": pa.array(["x", "x", "x", None, "", "y", "y", None, "z"]),
            "count": pa.array([3, 1, 1, 1, 1, -1, None, -4, 0], pa.int64()),
        }
    )
    good, drops = normalise_batch(batch)
    # A null count is 1 (the count is optional); a negative one is bad.
    assert batch_rows(good) == [(b"a", "x", 3), (b"e", "y", 1), (b"f", "z", 0)]
    # The row with no user, no item and a negative count is one missing user.
    assert drops == {"missing_user": 3, "missing_item": 2, "bad_count": 1}
    assert good.schema == RECORD_SCHEMA


def test_normalise_text_counts_as_in_csv():
    counts = ["3", " 4 ", "007", "-1", "1.5", "x", "", None, "99999999999999999999", " \t", "+2"]
    batch = pa.record_batch(
        {"user_id": pa.array(["u"] * len(counts)), "item": pa.array(["i"] * len(counts)),
         "count": pa.array(counts)}
    )
    good, drops = normalise_batch(batch)
    # Empty, white space only and null are 1; every other value that is not a count is bad.
    assert good.column("count").to_pylist() == [3, 4, 7, 1, 1, 1]
    assert drops["bad_count"] == 5


@pytest.mark.parametrize("kind", [pa.int64(), pa.int32(), pa.uint8(), pa.uint64(), pa.null()])
def test_normalise_null_integer_counts_are_one(kind):
    values = [None, None] if kind == pa.null() else [2, None]
    batch = pa.record_batch({"user_id": ["a", "b"], "item": ["i", "j"],
                             "count": pa.array(values, kind)})
    good, drops = normalise_batch(batch)
    expected = [1, 1] if kind == pa.null() else [2, 1]
    assert good.column("count").to_pylist() == expected and drops["bad_count"] == 0


def test_normalise_unsigned_counts_beyond_int64_are_bad():
    batch = pa.record_batch(
        {"user_id": ["a", "b"], "item": ["i", "i"], "count": pa.array([5, 2**63], pa.uint64())}
    )
    good, drops = normalise_batch(batch)
    assert batch_rows(good) == [(b"a", "i", 5)] and drops["bad_count"] == 1


def test_normalise_custom_columns_dictionaries_and_tables():
    table = pa.Table.from_batches(
        [
            pa.record_batch({"uid": pa.array(["a", "b"]).dictionary_encode(), "q": ["x", "y"],
                             "n": pa.array([1, 2], pa.int32()), "other": [1.0, 2.0]}),
            pa.record_batch({"uid": pa.array(["c", ""]).dictionary_encode(), "q": ["z", "w"],
                             "n": pa.array([3, 4], pa.int32()), "other": [1.0, 2.0]}),
        ]
    )
    good, drops = normalise_batch(table, RecordColumns(user="uid", item="q", count="n"))
    assert batch_rows(good) == [(b"a", "x", 1), (b"b", "y", 2), (b"c", "z", 3)]
    assert drops == {"missing_user": 1, "missing_item": 0, "bad_count": 0}
    ignored = normalise_batch(table, RecordColumns(user="uid", item="q", count=None))[0]
    assert ignored.column("count").to_pylist() == [1, 1, 1]


def test_normalise_refuses_missing_columns_and_wrong_types():
    with pytest.raises(RecordFormatError, match="'item'"):
        normalise_batch(pa.record_batch({"user_id": ["a"], "thing": ["x"]}))
    with pytest.raises(RecordFormatError, match="user id column 'user_id' has type double"):
        normalise_batch(pa.record_batch({"user_id": [1.5], "item": ["x"]}))
    with pytest.raises(RecordFormatError, match="count column 'count' has type double"):
        normalise_batch(pa.record_batch({"user_id": ["a"], "item": ["x"], "count": [1.0]}))
    with pytest.raises(RecordFormatError, match="items are strings"):
        normalise_batch(pa.record_batch({"user_id": ["a"], "item": [3]}))


def test_normalise_keeps_buffers_when_nothing_is_dropped():
    batch = pa.record_batch({"user_id": pa.array(["a", "b"]), "item": ["x", "y"]})
    good, _ = normalise_batch(batch)
    data_address = batch.column("user_id").buffers()[2].address
    assert good.column("user_id").buffers()[2].address == data_address


def test_field_limits_are_configurable():
    batch = pa.record_batch({"user_id": ["abc", "abcd", "ab"], "item": ["wxyz", "w", "wxyzv"]})
    options = RecordOptions(max_user_bytes=3, max_item_bytes=4)
    good, drops = normalise_batch(batch, options=options)
    assert good.column("user_id").to_pylist() == [b"abc"]
    assert drops == {"missing_user": 0, "missing_item": 0, "bad_count": 0,
                     "oversized_user": 1, "oversized_item": 1}
    # A multi-byte character counts its UTF-8 bytes.
    good, drops = normalise_batch(pa.record_batch({"user_id": ["a"], "item": ["éé"]}),
                                  options=RecordOptions(max_item_bytes=3))
    assert good.num_rows == 0 and drops["oversized_item"] == 1


def _decode(values, encoding):
    batch = pa.record_batch({"user_id": ["u"] * len(values), "item": pa.array(values, pa.string())})
    options = RecordOptions(item_kind="bytes", bytes_encoding=encoding)
    good, drops = normalise_batch(batch, options=options)
    return good.column("item").to_pylist(), drops.get("bad_item", 0)


def test_base64_items_are_strict():
    good = ["AA==", "AAA=", "AAAA", "/+/+", base64.b64encode(bytes(range(256))).decode()]
    assert _decode(good, "base64") == ([base64.b64decode(v) for v in good], 0)
    # Not a multiple of 4 (also with a '=' after a whole quad), padding inside, too much
    # padding, white space, other alphabets, text that is not ASCII.
    bad = ["AAA", "ajFn=", "AA=A", "A===", "AA==AA==", " AAA", "AAA=\n", "-_-_", "AAé="]
    assert _decode(bad, "base64") == ([], len(bad))


def test_hex_items_are_strict():
    assert _decode(["00ff", "ABcd", "7f"], "hex") == ([b"\x00\xff", b"\xab\xcd", b"\x7f"], 0)
    bad = ["0", "0g", "00 ff", "0x00", "ff\n", "éé"]
    assert _decode(bad, "hex") == ([], len(bad))


def test_decoding_agrees_with_the_standard_library_on_random_text():
    rng = random.Random(20240602)
    alphabets = {"base64": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/= -",
                 "hex": "0123456789abcdefABCDEFg "}
    for encoding, alphabet in alphabets.items():
        values = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 13)))
                  for _ in range(3000)]
        expected = []
        for value in values:
            try:
                if encoding == "hex":
                    decoded = binascii.a2b_hex(value)
                elif len(value) % 4 == 0:  # the documented contract: this, and nothing else
                    decoded = base64.b64decode(value, validate=True)
                else:
                    continue
                expected.append(decoded)
            except (binascii.Error, ValueError):
                pass
        got, bad = _decode(values, encoding)
        assert got == expected and bad == len(values) - len(expected), encoding
        assert 50 < len(expected) < len(values) - 50  # both outcomes are exercised


@pytest.mark.parametrize("normalise", [False, True], ids=["off", "on"])
def test_normalise_user_ids_strips_white_space_and_composes_text_ids(normalise):
    decomposed, composed = "Jose\u0301", "Jos\u00e9"
    table = pa.table({"user_id": [" 42", "42\t", "42", decomposed, composed, " \u3000", "7"],
                      "item": ["a"] * 7})
    batch, drops = normalise_batch(table, options=RecordOptions(normalise_user_ids=normalise))
    ids = batch.column(0).to_pylist()
    if normalise:
        assert ids == [b"42", b"42", b"42", composed.encode(), composed.encode(), b"7"]
        assert drops["missing_user"] == 1  # white space only (an ideographic space too)
    else:
        assert ids == [b" 42", b"42\t", b"42", decomposed.encode(), composed.encode(),
                       " \u3000".encode(), b"7"]
        assert drops["missing_user"] == 0
    # Integer ids are not text: unchanged either way.
    ints = pa.table({"user_id": pa.array([42, -5], pa.int64()), "item": ["a", "b"]})
    batch, _ = normalise_batch(ints, options=RecordOptions(normalise_user_ids=normalise))
    assert batch.column(0).to_pylist() == [b"42", b"-5"]
