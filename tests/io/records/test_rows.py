"""Tests of triehh_beam.io.records.rows: rows as BigQuery's reader yields them (dicts of Python values,
NULL as None) normalise to exactly what the same records give when read from a Parquet file,
with the same drops; unusable column types are refused naming the column."""

from __future__ import annotations

import datetime
import decimal
import json

import pyarrow as pa
import pytest

from triehh_beam.io import RecordColumns, RecordFormatError, RecordOptions, write_records
from triehh_beam.io.records.rows import normalise_rows, row_columns
from tests.io.helpers import LONG_USER, batch_rows, read_blocks

# A BigQuery table of (user_id STRING, item STRING, count INT64): good rows and every kind of
# bad one, as ReadFromBigQuery yields them.
RECORDS = [("u1", "apple", 2), ("u2", "pear", None), (None, "x", 1), ("", "x", 1),
           (LONG_USER, "x", 1), ("u3", None, 1), ("u4", "", 1), ("u5", "kiwi", -1),
           ("u6", "fig", 0), ("u7", "ünï 🍐", 3)]


def as_rows(records, names=("user_id", "item", "count")):
    return [dict(zip(names, record)) for record in records]


def test_rows_normalise_exactly_as_the_same_records_read_from_a_file(tmp_path):
    path = str(tmp_path / "same.parquet")
    write_records(path, RECORDS)
    rows, drops, rejected = read_blocks(path)
    block = normalise_rows(as_rows(RECORDS), keep_rejected=True)
    assert batch_rows(block.batch) == rows
    assert {k: v for k, v in block.drops.items() if v} == drops
    assert [(r.reason, json.loads(r.raw)) for r in block.rejected] == [
        (r.reason, json.loads(r.raw)) for r in rejected]
    assert all(r.line is None and r.row_index is None for r in block.rejected)


def test_integer_ids_bytes_items_and_no_count_column():
    rows = [{"user_id": 42, "item": b"\x00\xff"}, {"user_id": 7, "item": b"a"}]
    block = normalise_rows(rows, options=RecordOptions(item_kind="bytes"))
    assert batch_rows(block.batch) == [(b"42", b"\x00\xff", 1), (b"7", b"a", 1)]
    # Custom column names; a count column no row has is absent: every count is 1.
    rows = [{"who": "a", "what": "x"}]
    block = normalise_rows(rows, RecordColumns(user="who", item="what", count="n"))
    assert batch_rows(block.batch) == [(b"a", "x", 1)]
    assert row_columns(RecordColumns(count=None), RecordOptions(timestamp_column="ts")) == [
        "user_id", "item", "ts"]


def test_timestamps_from_bigquery_timestamp_and_datetime_values():
    utc = datetime.timezone.utc
    rows = [
        {"user_id": "a", "item": "x", "ts": datetime.datetime(2024, 5, 1, 12, tzinfo=utc)},
        {"user_id": "b", "item": "x", "ts": datetime.datetime(2024, 5, 1, 12, 0, 0, 250)},
        {"user_id": "c", "item": "x", "ts": None},
    ]
    options = RecordOptions(timestamp_column="ts")
    may_1 = 1714564800 * 10**6
    for group in (rows[:1] + rows[2:], rows[1:]):  # one type per column, as a table has
        block = normalise_rows(group, RecordColumns(count=None), options)
        assert block.batch.schema == options.schema
        assert block.drops["bad_timestamp"] == 1
        assert block.batch.column("timestamp").to_pylist() in ([may_1], [may_1 + 250])


def test_empty_and_unusable_columns():
    assert normalise_rows([]).batch.num_rows == 0
    with pytest.raises(RecordFormatError, match="user id column 'user_id' has type double"):
        normalise_rows([{"user_id": 1.5, "item": "x"}])
    with pytest.raises(RecordFormatError, match="count column 'count' has type decimal"):
        normalise_rows([{"user_id": "a", "item": "x", "count": decimal.Decimal("2")}])
    with pytest.raises(RecordFormatError, match="the column 'user_id' mixes"):
        normalise_rows([{"user_id": "a", "item": "x"}, {"user_id": 5, "item": "x"}])
    with pytest.raises(RecordFormatError, match="no column 'item'"):
        normalise_rows([{"user_id": "a"}])
    with pytest.raises(ValueError, match="must differ"):
        normalise_rows([], options=RecordOptions(timestamp_column="item"))
    assert pa.types.is_binary(normalise_rows([]).batch.schema.field("user_id").type)
