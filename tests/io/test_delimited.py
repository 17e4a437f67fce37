"""Tests of triehh_beam.io.delimited: CSV rows, headers and lines that are not UTF-8."""

from __future__ import annotations

import pytest

from triehh_beam.io import (
    RecordFormatError,
)
from triehh_beam.io import delimited
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
    assert sorted(r.raw for r in rejected) == sorted(bad)


def test_a_csv_header_that_is_not_utf8_fails_naming_the_file(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes(b"user_id,it\xffem\nu,a\n")
    with pytest.raises(RecordFormatError, match=r"h\.csv: the header line is not UTF-8"):
        read_blocks(str(path))
