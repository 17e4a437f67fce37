"""Tests of triehh_beam.io.drops: counter names, the bad share, the operator's line and the
dead-letter JSON line."""

from __future__ import annotations

import base64
import json

import pytest

from triehh_beam.io import (
    DROP_REASONS,
    bad_fraction,
    dead_letter_json,
    describe_drops,
)
from triehh_beam.io.drops import FILE_COUNTERS, RECORDS_READ, counter_name


def test_dead_letter_json_lines_are_text_with_where_the_record_was():
    # Issue 15: the line as text a person can read (base64 only when it is not UTF-8), and
    # where it is.
    line = dead_letter_json(("d/f.csv", "bad_count", "u7,kïwi,-1".encode(), 12, None))
    assert line == '{"file": "d/f.csv", "line": 12, "reason": "bad_count", "raw": "u7,kïwi,-1"}'
    assert json.loads(dead_letter_json(("f.jsonl", "malformed", b"{\xff", 3, None))) == {
        "file": "f.jsonl", "line": 3, "reason": "malformed",
        "raw_base64": base64.b64encode(b"{\xff").decode()}
    assert json.loads(dead_letter_json(("f.parquet", "bad_count", '{"count": -1}', None, 4))) == {
        "file": "f.parquet", "row_index": 4, "reason": "bad_count", "row": {"count": -1}}
    # Without a position (a record from a stream, say): file, reason and the record.
    assert json.loads(dead_letter_json(("sub", "malformed", b"{"))) == {
        "file": "sub", "reason": "malformed", "raw": "{"}


def test_bad_fraction_and_the_operator_line():
    job_counters = {"records_read": 1000, "records_malformed": 3, "records_invalid_utf8": 2,
                    "records_missing_user": 7, "files_read": 3, "files_empty": 1,
                    "users_sampled": 99}
    assert bad_fraction(job_counters) == pytest.approx(12 / 1000)
    assert bad_fraction({}) == 0.0
    assert describe_drops(job_counters) == (
        "read 1,000 records from 3 files (1 empty); dropped 12 (1.2%): malformed 3, "
        "invalid_utf8 2, missing_user 7")
    assert describe_drops({"records_read": 5, "files_read": 1}) == (
        "read 5 records from 1 file; none dropped")


def test_counter_names_follow_the_reasons():
    assert [counter_name(r) for r in DROP_REASONS[:2]] == ["records_malformed", "records_invalid_utf8"]
    assert RECORDS_READ == "records_read" and FILE_COUNTERS == ("files_read", "files_empty")
    with pytest.raises(ValueError, match="unknown drop reason 'typo'"):
        counter_name("typo")
    # bad_fraction and describe_drops read exactly these names.
    named = {RECORDS_READ: 10, **{counter_name(r): 1 for r in DROP_REASONS}}
    assert bad_fraction(named) == pytest.approx(len(DROP_REASONS) / 10)
