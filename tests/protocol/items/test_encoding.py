"""Item encoding: units, the terminator, normalisation, length limits, and round trips."""

import pytest

from triehh_beam.protocol.items.encoding import (EmptyItemError, EncodingError, ItemEncoder, ItemKind,
                                                 ItemTooLongError, is_terminated, sequence_length)

ENC = ItemEncoder()


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
