"""Tests of triehh_beam.io.records.delimited: CSV rows, headers and lines that are not UTF-8."""

from __future__ import annotations

import collections
import csv
import random

import pytest

from triehh_beam.io import RecordFormatError
from triehh_beam.io.records import delimited
from tests.io.helpers import (
    read_blocks,
    read_rows,
)


def test_csv_rows_with_the_wrong_field_count_are_malformed(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text('user_id,item,count\nu,a,1\nv,b\nw,c,2,extra\n"x","d, with comma",4\n')
    rows, drops = read_rows(str(path))
    assert rows == [(b"u", "a", 1), (b"x", "d, with comma", 4)]
    assert drops == {"malformed": 2}


def test_csv_header_with_quotes_bom_and_other_columns(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes('\ufeffday,"item",user_id\n1,a,007\n2,"b ""q""",NA\n'.encode("utf-8"))
    assert read_rows(str(path))[0] == [(b"007", "a", 1), (b"NA", 'b "q"', 1)]


def test_csv_lines_that_are_not_utf8_anywhere_in_a_big_file(tmp_path, monkeypatch):
    monkeypatch.setattr(delimited, "_BLOCK_BYTES", 512)  # many blocks
    lines = [b"user_id,item,count"]
    expected, bad = [], []
    for i in range(400):
        if i % 37 == 5:
            lines.append(b"bad%d,caf\xe9,1" % i)
            bad.append(lines[-1])
        elif i % 53 == 7:
            lines.append(b"mal%d,\xff" % i)  # not UTF-8 and malformed: malformed first
            bad.append(lines[-1])
        else:
            lines.append(b"u%d,w\xc3\xb6rd%d,%d" % (i, i, i))
            expected.append((b"u%d" % i, "wörd%d" % i, i))
    path = tmp_path / "big.csv"
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    rows, drops, rejected = read_blocks(str(path))
    assert rows == expected
    assert drops == {"invalid_utf8": 11, "malformed": 8}
    assert [r.raw for r in rejected] == bad  # in file order
    assert [r.line for r in rejected] == [lines.index(line) + 1 for line in bad]


def test_a_csv_header_that_is_not_utf8_fails_naming_the_file(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes(b"user_id,it\xffem\nu,a\n")
    with pytest.raises(RecordFormatError, match=r"h\.csv: the header line is not UTF-8"):
        read_blocks(str(path))


@pytest.mark.parametrize("block_bytes", [64, 300, 4 << 20])
def test_csv_rejects_are_raw_records_with_line_numbers_across_blocks(tmp_path, monkeypatch,
                                                                     block_bytes):
    # Records that span lines (quoted line breaks), blank lines, both line ends, lines that
    # are not UTF-8, rows with the wrong field count and rows that fail a value check: every
    # rejected row is its exact record and the line it starts on, whatever the block size.
    monkeypatch.setattr(delimited, "_BLOCK_BYTES", block_bytes)
    rng = random.Random(7)
    records = []  # (raw record bytes, expected reason or None)
    for i in range(300):
        kind = rng.choice(["good", "good", "good", "quoted", "multiline", "malformed",
                           "not_utf8", "bad_count", "no_user", "blank"])
        if kind == "good":
            records.append((b"u%d,w%d,%d" % (i, i % 7, i % 3), None))
        elif kind == "quoted":
            records.append((b'"u%d","a, ""b""",2' % i, None))
        elif kind == "multiline":
            records.append((b'u%d,"line one\r\nline ""two""\nthree",1' % i, None))
        elif kind == "malformed":
            records.append((b"u%d,only two" % i, "malformed"))
        elif kind == "not_utf8":
            records.append((b"u%d,caf\xe9,1" % i, "invalid_utf8"))
        elif kind == "bad_count":
            records.append((b'u%d,"x\ny",-%d' % (i, i + 1), "bad_count"))
        elif kind == "no_user":
            records.append((b",item%d,1" % i, "missing_user"))
        else:
            records.append((b"", None))
    data, line, expected_rejects, expected_rows = b"user_id,item,count\r\n", 2, [], []
    for raw, reason in records:
        if reason is not None:
            expected_rejects.append((reason, line, raw))
        elif raw:
            fields = next(csv.reader([raw.decode()]))
            expected_rows.append((fields[0].encode(), fields[1], int(fields[2])))
        ending = rng.choice([b"\n", b"\r\n"])
        data += raw + ending
        line += raw.count(b"\n") + raw.count(b"\r") - raw.count(b"\r\n") + 1
    path = tmp_path / "many.csv"
    path.write_bytes(data)
    rows, _, rejected = read_blocks(str(path))
    assert rows == expected_rows
    assert [(r.reason, r.line, r.raw) for r in rejected] == expected_rejects
    # Line numbers are what an editor shows: the record starts there.
    physical = data.splitlines()
    for reason, line, raw in expected_rejects:
        assert raw.splitlines()[0] == physical[line - 1]
    # Counting alone (no dead letter) gives the same rows and counts.
    assert read_rows(str(path)) == (expected_rows, dict(collections.Counter(
        reason for reason, _, _ in expected_rejects)))


@pytest.mark.parametrize("data, rejected", [
    # A quote inside a field is a character (as Arrow and Python's csv read it).
    (b'user_id,item,count\nu1,a"b,1\nu2,c,-1\nu3,d,1\n', [("bad_count", 3, b"u2,c,-1")]),
    # A quote never closed runs to the end of the file: one malformed record of two lines.
    (b'user_id,item,count\nu1,a,1\nu2,"open,1\nu3,d,-1\n',
     [("malformed", 3, b'u2,"open,1\nu3,d,-1')]),
    (b"\xef\xbb\xbfuser_id,item,count\r\nu1,a,1\r\nu2,c,-1\r\n", [("bad_count", 3, b"u2,c,-1")]),
    (b"user_id,item,count\ru1,a,1\ru2,c,-1\r", [("bad_count", 3, b"u2,c,-1")]),
    (b"user_id,item,count\nu1,a,1\nu2,c,-1", [("bad_count", 3, b"u2,c,-1")]),
    (b"user_id,item,count\nu1,a,1\n   \n\nu2,c,-1\n",
     [("malformed", 3, b"   "), ("bad_count", 5, b"u2,c,-1")]),
])
def test_csv_dead_letters_on_odd_files(tmp_path, data, rejected):
    path = tmp_path / "odd.csv"
    path.write_bytes(data)
    rows, _, got = read_blocks(str(path))
    assert rows[0] == (b"u1", rows[0][1], 1)
    assert [(r.reason, r.line, r.raw) for r in got] == rejected
