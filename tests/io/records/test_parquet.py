"""Tests of triehh_beam.io.records.parquet: column types, text that is not UTF-8, and row groups read
one at a time."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from triehh_beam.io import RecordFormatError, iter_record_batches, parquet_row_groups, write_records
from tests.io.helpers import (
    read_blocks,
    read_rows,
)


def test_integer_parquet_ids_are_decimal_text(tmp_path):
    path = str(tmp_path / "i.parquet")
    write_records(path, [(42, "a", 1), (10**15, "b", 2)])
    assert pq.read_schema(path).field("user_id").type == pa.int64()
    assert read_rows(path)[0] == [(b"42", "a", 1), (b"1000000000000000", "b", 2)]


def test_parquet_text_that_is_not_utf8_is_counted(tmp_path):
    users = pa.array([b"a", b"\xc3", b"c"], pa.binary())
    users = pa.Array.from_buffers(pa.string(), 3, users.buffers())
    path = str(tmp_path / "u.parquet")
    pq.write_table(pa.table({"user_id": users, "item": pa.array([b"x", b"y", b"\xff"])}), path)
    rows, drops, _ = read_blocks(path)
    assert rows == [(b"a", "x", 1)] and drops == {"invalid_utf8": 2}


def test_row_groups_read_one_at_a_time_add_up_to_the_file(tmp_path):
    path = str(tmp_path / "g.parquet")
    rows = [(f"u{i}", f"w{i % 5}", i % 3) for i in range(2500)]
    rows[1200] = (None, "x", 1)
    write_records(path, rows, row_group_size=1000)
    assert parquet_row_groups(path) == [1000, 1000, 500]
    whole = read_rows(path, batch_size=256)
    parts = [read_rows(path, batch_size=256, row_group=g) for g in range(3)]
    assert [r for part, _ in parts for r in part] == whole[0]
    assert [drops for _, drops in parts] == [{}, {"missing_user": 1}, {}]
    with pytest.raises(RecordFormatError, match=r"g\.parquet: no row group 3 in a file of 3 row groups"):
        list(iter_record_batches(path, row_group=3))
    with pytest.raises(ValueError, match="only Parquet files are read by row group"):
        list(iter_record_batches(str(tmp_path / "x.csv"), row_group=0))


def test_row_groups_check_the_schema_from_the_footer(tmp_path):
    pq.write_table(pa.table({"user_id": [1.5], "item": ["a"]}), str(tmp_path / "f.parquet"))
    with pytest.raises(RecordFormatError, match=r"f\.parquet: the user id column 'user_id'"):
        parquet_row_groups(str(tmp_path / "f.parquet"))
    (tmp_path / "n.parquet").write_bytes(b"not parquet")
    with pytest.raises(RecordFormatError, match=r"n\.parquet: cannot read it as parquet"):
        parquet_row_groups(str(tmp_path / "n.parquet"))
    with pytest.raises(FileNotFoundError):
        parquet_row_groups(str(tmp_path / "gone.parquet"))
