"""Item types: unicode text at unit sizes 1-4, integers as bit units (values, ranges, order),
bytes from base64/hex text, and the tokenising encoder (the rule itself: tests/protocol/items/test_tokenize.py)."""

from __future__ import annotations

import base64
import pickle
import random
import unicodedata

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to

from tests.pipeline_factory import new_pipeline
from triehh_beam.beam.read import ReadRecordBatches
from triehh_beam.io import (RecordFormatError, RecordOptions, iter_record_batches, normalise_batch,
                            record_schema, write_records)
from triehh_beam.proto import trie_pb2
from triehh_beam.protocol.items.encoding import (EncodingError, ItemEncoder, ItemKind, ItemTooLongError,
                                                 is_terminated)
from triehh_beam.protocol.items.tokenize import TOKENIZER_ID
from triehh_beam.protocol.rounds.trie import Trie

# --- unicode text ---------------------------------------------------------------------------

SCRIPTS = {
    "latin accents": "Ölçü café naïve façade",
    "decomposed accents": "cafe\u0301 nai\u0308ve",  # NFC composes them
    "cyrillic": "привет, Ёжик",
    "greek": "Καλημέρα",
    "cjk han": "你好世界",
    "japanese": "東京タワーに行きました",
    "korean": "안녕하세요",
    "devanagari": "नमस्ते",
    "emoji": "😂👍",
    "emoji zwj family": "👨\u200d👩\u200d👧\u200d👦",
    "emoji skin tone": "👍🏽👋🏿",
    "emoji flag": "🇫🇷🇯🇵",
    "emoji subdivision flag": "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
    "rainbow flag": "🏳\ufe0f\u200d🌈",
    "arabic (rtl)": "مرحبا بالعالم",
    "hebrew with niqqud (rtl)": "שָׁלוֹם",
    "mixed bidi": "abc שלום 123 مرحبا",
}


@pytest.mark.parametrize("unit_size", [1, 2, 3, 4])
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_unicode_round_trips(name, unit_size):
    item = SCRIPTS[name]
    encoder = ItemEncoder(unit_size=unit_size, max_length=64)
    sequence = encoder.encode(item)
    expected = unicodedata.normalize("NFC", item)
    assert encoder.decode(sequence) == expected
    assert is_terminated(sequence) and sequence[-1] == ""
    body = sequence[:-1]
    assert all(isinstance(u, str) and 1 <= len(u) <= unit_size for u in body)
    assert all(len(u) == unit_size for u in body[:-1])  # only the last unit may be short
    # The wire form (UTF-8 per unit) round-trips, and every prefix is valid for the encoder.
    assert tuple(encoder.unit_from_bytes(encoder.unit_to_bytes(u)) for u in sequence) == sequence
    assert all(encoder.prefix_problem(sequence[:r]) is None for r in range(len(sequence) + 1))


def test_unicode_items_round_trip_through_a_persisted_trie():
    encoder = ItemEncoder(unit_size=2, max_length=64)
    items = [unicodedata.normalize("NFC", v) for v in SCRIPTS.values()]
    sequences = [encoder.encode(v) for v in items]
    depth = max(len(s) for s in sequences)
    levels = [{s[:r] for s in sequences if len(s) >= r} for r in range(1, depth + 1)]
    trie = Trie(encoder, levels)
    assert Trie.from_bytes(trie.to_bytes()) == trie
    assert sorted(trie.heavy_hitters()) == sorted(items)


def test_case_folding_is_unicode_aware():
    encoder = ItemEncoder(case_fold=True, max_length=20)
    assert encoder.decode(encoder.encode("STRASSE")) == encoder.decode(encoder.encode("straße"))
    assert encoder.decode(encoder.encode("ΣΊΣΥΦΟΣ")) == "σίσυφοσ"


# --- integers -------------------------------------------------------------------------------

WIDTHS = [(8, 1), (8, 3), (8, 8), (16, 4), (16, 5), (32, 4), (32, 16), (64, 8), (64, 16), (1, 1)]


def _int_encoder(bits, unit_size, max_length=None, **kwargs):
    units = -(-bits // unit_size)
    return ItemEncoder(kind=ItemKind.INT, int_bits=bits, unit_size=unit_size,
                       max_length=max_length or units + 1, **kwargs)


@pytest.mark.parametrize("bits,unit_size", WIDTHS)
def test_integers_encode_and_decode(bits, unit_size):
    encoder = _int_encoder(bits, unit_size)
    low, high = encoder.int_range
    assert (low, high) == (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    rng = random.Random(bits * 100 + unit_size)
    values = {v for v in (low, high, 0, -1, 1) if low <= v <= high}
    values |= {rng.randint(low, high) for _ in range(200)}
    for value in values:
        sequence = encoder.encode(value)
        assert len(sequence) == encoder.int_units + 1 and sequence[-1] == b""
        body = sequence[:-1]
        assert all(isinstance(u, bytes) and set(u) <= set(b"01") for u in body)
        assert all(len(u) == unit_size for u in body[:-1])
        assert sum(len(u) for u in body) == bits
        # Offset binary: the bits are value - low, most significant first.
        assert int(b"".join(body), 2) == value - low
        assert encoder.decode(sequence) == value
        assert encoder.prefix_range(sequence) == (value, value)
        assert encoder.prefix_problem(sequence) is None
        wire = [encoder.unit_to_bytes(u) for u in sequence]
        assert tuple(encoder.unit_from_bytes(w) for w in wire) == sequence


@pytest.mark.parametrize("bits,unit_size", WIDTHS)
def test_integer_sequences_sort_like_the_values(bits, unit_size):
    encoder = _int_encoder(bits, unit_size)
    low, high = encoder.int_range
    rng = random.Random(7)
    values = sorted({rng.randint(low, high) for _ in range(300)} | {low, high})
    assert sorted(values, key=encoder.encode) == values


@pytest.mark.parametrize("bits,unit_size", WIDTHS)
def test_integer_prefixes_are_ranges(bits, unit_size):
    encoder = _int_encoder(bits, unit_size)
    low, high = encoder.int_range
    assert encoder.prefix_range(()) == (low, high)
    rng = random.Random(3)
    for _ in range(50):
        value = rng.randint(low, high)
        sequence = encoder.encode(value)
        for r in range(len(sequence)):
            prefix = sequence[:r]
            first, last = encoder.prefix_range(prefix)
            known_bits = sum(len(u) for u in prefix)
            assert first <= value <= last
            assert last - first + 1 == 2 ** (bits - known_bits)
            # A prefix is exactly the values whose sequences start with it.
            assert encoder.encode(first)[:r] == prefix and encoder.encode(last)[:r] == prefix
            if first > low:
                assert encoder.encode(first - 1)[:r] != prefix
            if last < high:
                assert encoder.encode(last + 1)[:r] != prefix


def test_integer_prefix_ranges_by_hand():
    encoder = ItemEncoder(kind="int", int_bits=8, unit_size=4, max_length=3)
    assert encoder.encode(0) == (b"1000", b"0000", b"")
    assert encoder.encode(-128) == (b"0000", b"0000", b"")
    assert encoder.encode(127) == (b"1111", b"1111", b"")
    assert encoder.prefix_range((b"1000",)) == (0, 15)
    assert encoder.prefix_range((b"0111",)) == (-16, -1)
    # Units of 3 bits over 8 bits: 3 + 3 + 2.
    encoder = ItemEncoder(kind="int", int_bits=8, unit_size=3, max_length=4)
    assert encoder.encode(5) == (b"100", b"001", b"01", b"")
    assert encoder.prefix_range((b"100", b"001")) == (4, 7)


def test_integers_out_of_range_or_not_integers_are_refused():
    encoder = ItemEncoder(kind="int", int_bits=16, unit_size=4, max_length=5)
    for value in (2**15, -(2**15) - 1, 10**30):
        with pytest.raises(EncodingError, match="outside the 16-bit range"):
            encoder.encode(value)
    for value in (1.0, True, None, b"12", "1.5", "0x10", "1_000", "١٢", ""):
        with pytest.raises(EncodingError):
            encoder.encode(value)
    assert encoder.decode(encoder.encode(" -42 ")) == -42  # decimal text is accepted
    assert encoder.decode(encoder.encode("+7")) == 7


def test_integer_encoder_validation():
    assert ItemEncoder(kind="int", max_length=65) == ItemEncoder(kind="int", int_bits=64,
                                                                 max_length=65)
    assert ItemEncoder(int_bits=0) == ItemEncoder()  # proto3 default for text
    with pytest.raises(ValueError, match="at most 9"):
        ItemEncoder(kind="int", int_bits=32, unit_size=4, max_length=10)
    with pytest.raises(ValueError, match="unit_size for integers"):
        ItemEncoder(kind="int", int_bits=32, unit_size=17, max_length=3)
    with pytest.raises(ValueError, match="unit_size for integers"):
        ItemEncoder(kind="int", int_bits=4, unit_size=8, max_length=2)
    with pytest.raises(ValueError, match="int_bits must be"):
        ItemEncoder(kind="int", int_bits=65, max_length=10)
    with pytest.raises(ValueError, match="int_bits must be"):
        ItemEncoder(kind="int", int_bits=0, max_length=10)
    with pytest.raises(ValueError, match="integer items only"):
        ItemEncoder(kind="text", int_bits=32)
    with pytest.raises(ValueError, match="case_fold"):
        ItemEncoder(kind="int", case_fold=True, max_length=10)
    with pytest.raises(ValueError, match="integer items only"):
        ItemEncoder().prefix_range(("a",))
    encoder = ItemEncoder(kind="int", int_bits=32, unit_size=4, max_length=9)
    assert pickle.loads(pickle.dumps(encoder)) == encoder


def test_short_integer_l_discovers_ranges_only():
    encoder = ItemEncoder(kind="int", int_bits=32, unit_size=4, max_length=3)
    with pytest.raises(ItemTooLongError):
        encoder.encode(1000)
    prefix = encoder.encode_truncated(1000)
    assert len(prefix) == 3 and not is_terminated(prefix)
    first, last = encoder.prefix_range(prefix)
    assert first <= 1000 <= last and last - first + 1 == 2**20
    assert encoder.decode(prefix) == "".join(u.decode() for u in prefix)  # bits, as text


def test_integer_prefix_problems():
    encoder = ItemEncoder(kind="int", int_bits=8, unit_size=3, max_length=4)
    assert encoder.prefix_problem((b"100", b"001", b"01", b"")) is None
    assert "binary digits" in encoder.prefix_problem((b"102",))
    assert "has 2 bits" in encoder.prefix_problem((b"10",))  # short unit before the last
    assert "has 3 bits" in encoder.prefix_problem((b"100", b"001", b"010"))  # last unit too long
    assert "terminator after 2 units" in encoder.prefix_problem((b"100", b"001", b""))
    assert "expected bytes" in encoder.prefix_problem(("100",))
    with pytest.raises(EncodingError):
        encoder.prefix_range((b"1x1",))
    with pytest.raises(EncodingError):
        encoder.decode((b"100", b""))


def test_integer_heavy_hitters_come_out_of_a_trie_as_ints():
    encoder = ItemEncoder(kind="int", int_bits=8, unit_size=4, max_length=3)
    values = [-5, 0, 100]
    sequences = [encoder.encode(v) for v in values]
    levels = [{s[:r] for s in sequences} for r in (1, 2, 3)]
    trie = Trie(encoder, levels)
    assert trie.heavy_hitters() == sorted(values)


@pytest.mark.skipif(not hasattr(trie_pb2.Encoding, "INT"),
                    reason="the Encoding proto has no INT kind yet (int_bits, tokenizer fields)")
def test_integer_and_tokenising_encoders_persist():  # pragma: no cover - until the proto lands
    for encoder in (ItemEncoder(kind="int", int_bits=16, unit_size=4, max_length=5),
                    ItemEncoder(tokenize=True, max_length=8)):
        trie = Trie(encoder, [])
        assert Trie.from_bytes(trie.to_bytes()).encoder == encoder


# --- integers and bytes read from records ---------------------------------------------------


def _read_rows(path, options, **kwargs):
    rows, drops = [], {}
    for batch, batch_drops in iter_record_batches(path, options=options, **kwargs):
        assert batch.schema == record_schema(options.item_kind)
        rows.extend(zip(*(c.to_pylist() for c in batch.columns)))
        for reason, n in batch_drops.items():
            if n:
                drops[reason] = drops.get(reason, 0) + n
    return rows, drops


@pytest.mark.parametrize("format", ["csv", "jsonl"])
def test_integer_items_from_text_formats(tmp_path, format):
    path = str(tmp_path / f"ints.{format}")
    items = ["42", " -7 ", "+3", "007", "-128", "127", "128", "1.0", "abc", "", "9" * 30]
    write_records(path, [(f"u{i}", item) for i, item in enumerate(items)])
    rows, drops = _read_rows(path, RecordOptions(item_kind="int", int_bits=8))
    assert [r[1] for r in rows] == [42, -7, 3, 7, -128, 127]
    assert drops == {"bad_item": 4, "missing_item": 1}


def test_integer_items_from_json_numbers_take_the_fast_path(tmp_path):
    path = str(tmp_path / "ints.jsonl")
    write_records(path, [(f"u{i}", v) for i, v in enumerate([0, -(2**63), 2**63 - 1, 5])])
    rows, drops = _read_rows(path, RecordOptions(item_kind="int"))
    assert [r[1] for r in rows] == [0, -(2**63), 2**63 - 1, 5] and drops == {}


def test_integer_items_from_parquet(tmp_path):
    path = str(tmp_path / "ints.parquet")
    pq.write_table(pa.table({"user_id": ["a", "b", "c", "d"],
                             "item": pa.array([1, 2**63, None, 2**64 - 1], pa.uint64())}), path)
    rows, drops = _read_rows(path, RecordOptions(item_kind="int"))
    assert rows == [(b"a", 1, 1)] and drops == {"bad_item": 2, "missing_item": 1}
    pq.write_table(pa.table({"user_id": ["a"], "item": [1.5]}), path)
    with pytest.raises(RecordFormatError, match=r"ints\.parquet: the item column 'item' has type "
                                                r"double; integer items"):
        _read_rows(path, RecordOptions(item_kind="int"))


def test_integer_items_end_to_end_encoding(tmp_path):
    path = str(tmp_path / "ints.csv")
    write_records(path, [("u1", "-1"), ("u2", "1000"), ("u3", "40000")])
    encoder = ItemEncoder(kind="int", int_bits=16, unit_size=4, max_length=5)
    rows, drops = _read_rows(path, RecordOptions.for_encoder(encoder))
    assert drops == {"bad_item": 1}  # 40000 is outside 16 bits
    assert [encoder.decode(encoder.encode(item)) for _, item, _ in rows] == [-1, 1000]


def test_integer_items_flow_through_a_pipeline(tmp_path):
    path = str(tmp_path / "ints.jsonl")
    write_records(path, [("u1", 5), ("u2", -5), ("u3", "x")])
    encoder = ItemEncoder(kind="int", int_bits=8, unit_size=4, max_length=3)
    with new_pipeline() as p:
        batches = p | "Read" >> ReadRecordBatches(path, options=RecordOptions.for_encoder(encoder))
        items = batches | "Items" >> beam.FlatMap(lambda b: b.column("item").to_pylist())
        sequences = items | "Encode" >> beam.Map(encoder.encode)
        assert_that(sequences, equal_to([encoder.encode(5), encoder.encode(-5)]))


BYTE_VALUES = [b"\x00", b"\xff\xfe\x00\x01", bytes(range(256)), b"abc", b"\x80" * 7]


@pytest.mark.parametrize("format", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("encoding", ["base64", "hex"])
def test_byte_items_from_base64_and_hex_text(tmp_path, format, encoding):
    rng = random.Random(5)
    values = BYTE_VALUES + [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
                            for _ in range(100)]
    text = [base64.b64encode(v).decode() if encoding == "base64" else v.hex() for v in values]
    if encoding == "hex":
        text[3] = text[3].upper()  # either case
    bad = ["zz", "abc", "a b", "QQ=", "Q===", "====", "QQ==QQ==", "é"] if encoding == "base64" \
        else ["zz", "abc", "a b", "0x00", "é", "0g"]
    path = str(tmp_path / f"bytes.{format}")
    write_records(path, [(f"u{i}", t) for i, t in enumerate(text + bad)])
    options = RecordOptions(item_kind="bytes", bytes_encoding=encoding)
    rows, drops = _read_rows(path, options)
    assert [r[1] for r in rows] == values
    assert drops == {"bad_item": len(bad)}
    encoder = ItemEncoder(kind="bytes", unit_size=3, max_length=200)
    assert [encoder.decode(encoder.encode(r[1])) for r in rows] == values


def test_binary_parquet_items_are_taken_as_they_are(tmp_path):
    path = str(tmp_path / "b.parquet")
    write_records(path, [("u1", b"\x00\xff"), ("u2", b"QQ==")])
    options = RecordOptions(item_kind="bytes", bytes_encoding="base64")
    assert _read_rows(path, options)[0] == [(b"u1", b"\x00\xff", 1), (b"u2", b"QQ==", 1)]


def test_byte_items_without_an_encoding_are_the_utf8_bytes(tmp_path):
    path = str(tmp_path / "b.csv")
    write_records(path, [("u1", "é"), ("u2", "QQ==")])
    rows, _ = _read_rows(path, RecordOptions(item_kind="bytes"))
    assert [r[1] for r in rows] == ["é".encode(), b"QQ=="]


def test_oversized_byte_items_count_their_decoded_size():
    batch = pa.record_batch({"user_id": ["a", "b"],
                             "item": [base64.b64encode(b"x" * 10).decode(),
                                      base64.b64encode(b"x" * 11).decode()]})
    options = RecordOptions(item_kind="bytes", bytes_encoding="base64", max_item_bytes=10)
    good, drops = normalise_batch(batch, options=options)
    assert good.column("item").to_pylist() == [b"x" * 10] and drops["oversized_item"] == 1


def test_record_options_validation():
    with pytest.raises(ValueError, match="bytes_encoding must be one of"):
        RecordOptions(item_kind="bytes", bytes_encoding="base32")
    with pytest.raises(ValueError, match="byte items only"):
        RecordOptions(bytes_encoding="hex")
    with pytest.raises(ValueError, match="integer items only"):
        RecordOptions(int_bits=8)
    with pytest.raises(ValueError, match="max_item_bytes"):
        RecordOptions(max_item_bytes=0)
    encoder = ItemEncoder(kind="int", int_bits=12, unit_size=4, max_length=4)
    options = RecordOptions.for_encoder(encoder)
    assert (options.item_kind, options.int_bits) == (ItemKind.INT, 12)
    assert RecordOptions.for_encoder(ItemEncoder()).item_kind is ItemKind.TEXT


def test_tokenising_encoder_splits_records_into_items():
    encoder = ItemEncoder(tokenize=True, case_fold=True, max_length=10)
    assert encoder.tokenizer_id == TOKENIZER_ID == "words-v1"
    items = encoder.items_of("The cat, the HAT!")
    assert items == ["The", "cat", "the", "HAT"]
    assert [encoder.decode(encoder.encode(i)) for i in items] == ["the", "cat", "the", "hat"]
    assert ItemEncoder().items_of("The cat") == ["The cat"]
    assert ItemEncoder().tokenizer_id == ""
    with pytest.raises(ValueError, match="tokenize applies to text"):
        ItemEncoder(kind="bytes", tokenize=True)
    with pytest.raises(EncodingError):
        encoder.items_of(b"x")

