"""Tests of triehh_beam.io.schema: column names, reader options and the normalised schema."""

from __future__ import annotations

import pyarrow as pa
import pytest

from triehh_beam.io import (
    RECORD_SCHEMA,
    RecordColumns,
    RecordOptions,
)
from triehh_beam.io.schema import record_schema


def test_record_columns_are_validated():
    with pytest.raises(ValueError, match="must differ"):
        RecordColumns(user="a", item="a")
    with pytest.raises(ValueError, match="non-empty"):
        RecordColumns(user="")


def test_record_options_are_validated():
    assert RecordOptions(item_kind="int").int_bits == 64
    assert RecordOptions(item_kind="text").int_bits is None
    with pytest.raises(ValueError, match="bytes_encoding applies to byte items only"):
        RecordOptions(bytes_encoding="hex")
    with pytest.raises(ValueError, match="bytes_encoding must be one of"):
        RecordOptions(item_kind="bytes", bytes_encoding="base32")
    with pytest.raises(ValueError, match="int_bits must be an integer from 1 to 64"):
        RecordOptions(item_kind="int", int_bits=65)
    with pytest.raises(ValueError, match="int_bits applies to integer items only"):
        RecordOptions(int_bits=8)
    with pytest.raises(ValueError, match="max_item_bytes must be a positive integer"):
        RecordOptions(max_item_bytes=0)


def test_record_schema_by_item_kind():
    assert RecordOptions().schema == RECORD_SCHEMA == record_schema("text")
    assert record_schema("bytes").field("item").type == pa.binary()
    assert record_schema("int").field("item").type == pa.int64()
    assert all(not f.nullable for f in record_schema("int"))
