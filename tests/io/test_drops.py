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


def test_dead_letter_json_lines():
    assert json.loads(dead_letter_json(("f.jsonl", "malformed", b"{\xff"))) == {
        "file": "f.jsonl", "reason": "malformed", "raw_base64": base64.b64encode(b"{\xff").decode()}
    assert json.loads(dead_letter_json(("f.parquet", "bad_count", '{"count": -1}'))) == {
        "file": "f.parquet", "reason": "bad_count", "row": {"count": -1}}


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
