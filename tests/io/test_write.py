"""Tests of triehh_beam.io.write: every format and compression written reads back the same."""

from __future__ import annotations

import gzip

import pytest

from triehh_beam.io import (
    write_records,
)
from tests.io.helpers import (
    ROWS,
    ROWS_EXPECTED,
    read_rows,
    text_ids,
)


@pytest.mark.parametrize("name", ["r.jsonl", "r.csv", "r.jsonl.gz", "r.csv.gz", "r.ndjson", "r.pq"])
def test_every_format_round_trips(tmp_path, name):
    path = str(tmp_path / name)
    rows = text_ids(ROWS) if name.endswith(".pq") else ROWS
    write_records(path, rows)
    assert read_rows(path) == (ROWS_EXPECTED, {})


def test_compressed_files_are_really_compressed(tmp_path):
    path = str(tmp_path / "r.csv.gz")
    write_records(path, ROWS)
    assert gzip.decompress(open(path, "rb").read()).startswith(b'"user_id"')


def test_write_records_refuses_what_it_cannot_write(tmp_path):
    with pytest.raises(ValueError, match="all"):
        write_records(str(tmp_path / "x.csv"), [("u", "a"), ("v", "b", 1)])
    with pytest.raises(ValueError, match="mix types"):
        write_records(str(tmp_path / "x.parquet"), [(1, "a"), ("v", "b")])
    with pytest.raises(TypeError, match="text format"):
        write_records(str(tmp_path / "x.jsonl"), [(b"u", "a")])
    with pytest.raises(ValueError, match="compress internally"):
        write_records(str(tmp_path / "x.parquet.gz"), [("u", "a")])
