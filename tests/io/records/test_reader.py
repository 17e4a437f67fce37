"""Tests of triehh_beam.io.records.reader: reading one file of any format without Beam, on the
bad-input corpus (tests/io/fixtures/bad_input) and on damaged files, which only ever raise
RecordFormatError naming the file."""

from __future__ import annotations

import bz2
import collections
import filecmp
import gzip
import importlib.util
import json
import lzma
import os
import pickle
import random
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from triehh_beam.io import (DROP_REASONS, RecordColumns, RecordFormatError, RecordOptions, RejectedRow,
                            iter_record_batches, iter_record_blocks, parquet_row_groups, write_records)
from tests.io.helpers import (
    CORPUS,
    EXPECTED,
    FORMATS,
    INT32,
    LONG_USER,
    TEXT,
    UNREADABLE,
    corpus,
    read_blocks,
    read_rows,
)


def test_leading_zeros_are_kept_in_csv_and_jsonl(tmp_path):
    for name in ("z.csv", "z.jsonl"):
        path = str(tmp_path / name)
        write_records(path, [("007", "a"), ("7", "b"), (7, "c")])
        assert [r[0] for r in read_rows(path)[0]] == [b"007", b"7", b"7"]


@pytest.mark.parametrize("format", FORMATS)
def test_missing_count_column_counts_one(tmp_path, format):
    path = str(tmp_path / f"n.{format}")
    write_records(path, [("u1", "a"), ("u2", "b")])
    assert read_rows(path)[0] == [(b"u1", "a", 1), (b"u2", "b", 1)]


@pytest.mark.parametrize("format", FORMATS)
def test_bad_rows_are_dropped_and_counted(tmp_path, format):
    path = str(tmp_path / f"b.{format}")
    write_records(path, [("u", "a", 1), (None, "b", 1), ("", "c", 1), ("v", None, 1), ("w", "", 1),
                         ("x", "d", -2), ("y", "e", 0)])
    rows, drops = read_rows(path)
    assert rows == [(b"u", "a", 1), (b"y", "e", 0)]
    assert drops == {"missing_user": 2, "missing_item": 2, "bad_count": 1}


def test_empty_null_or_missing_counts_are_one_in_every_format(tmp_path):
    # Issue 15: a CSV export that leaves the count cell empty where a row has no count lost
    # 40% of its rows as bad_count. Empty, null or missing means 1; only a present value that
    # is not a count is bad.
    for format in FORMATS:
        path = str(tmp_path / f"c.{format}")
        write_records(path, [("u", "a", None), ("v", "b", 3)])
        assert read_rows(path) == ([(b"u", "a", 1), (b"v", "b", 3)], {}), format


def test_a_csv_with_empty_count_cells_keeps_every_row(tmp_path):
    lines = ["user_id,item,count"]
    for i in range(1000):
        # Every 5th row has a count; the others leave the cell empty, some with white space.
        lines.append(f"u{i},w{i % 7},{i % 3 + 1}" if i % 5 == 0
                     else f"u{i},w{i % 7},{' ' if i % 10 == 1 else ''}")
    lines.append("bad1,w,x")  # present and not a number: bad
    lines.append("bad2,w,-1")  # negative: bad
    (tmp_path / "e.csv").write_text("\n".join(lines) + "\n")
    rows, drops = read_rows(str(tmp_path / "e.csv"))
    assert len(rows) == 1000 and drops == {"bad_count": 2}
    assert rows[1] == (b"u1", "w1", 1) and rows[5] == (b"u5", "w5", 3)
    assert sum(r[2] for r in rows) == 800 + sum(i % 3 + 1 for i in range(0, 1000, 5))


def test_empty_files_have_no_records(tmp_path):
    for name in ("e.csv", "e.jsonl"):
        (tmp_path / name).write_bytes(b"")
        assert read_rows(str(tmp_path / name)) == ([], {})
    (tmp_path / "h.csv").write_text("user_id,item\n")
    assert read_rows(str(tmp_path / "h.csv")) == ([], {})


@pytest.mark.parametrize("format", FORMATS)
def test_missing_column_names_the_file_and_column(tmp_path, format):
    path = str(tmp_path / f"nocol.{format}")
    write_records(path, [("u", "a", 1)], columns=RecordColumns(item="thing"))
    with pytest.raises(RecordFormatError, match=rf"nocol\.{format}.*item column 'item'"):
        read_rows(path)
    with pytest.raises(RecordFormatError, match=rf"nocol\.{format}.*user id column 'uid'"):
        read_rows(path, columns=RecordColumns(user="uid", item="thing"))


def test_unreadable_files_name_the_file(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(RecordFormatError, match=r"bad\.parquet: cannot read it as parquet"):
        read_rows(str(tmp_path / "bad.parquet"))
    # A line that is not UTF-8 is a counted bad row, not a failure of the whole file.
    (tmp_path / "bad.csv").write_bytes(b"user_id,item\n\xff\xfe,a\n")
    assert read_rows(str(tmp_path / "bad.csv")) == ([], {"invalid_utf8": 1})
    (tmp_path / "bad.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 10)
    with pytest.raises(RecordFormatError, match=r"bad\.jsonl\.gz: cannot read it as jsonl"):
        read_rows(str(tmp_path / "bad.jsonl.gz"))
    pq.write_table(pa.table({"user_id": [1.5], "item": ["a"]}), str(tmp_path / "f.parquet"))
    with pytest.raises(RecordFormatError, match=r"f\.parquet: the user id column 'user_id'"):
        read_rows(str(tmp_path / "f.parquet"))


def test_batches_are_bounded_and_compact(tmp_path):
    n = 10_000
    rows = [(f"user{i:05d}", "item" * 5, 1) for i in range(n)]
    for format in FORMATS:
        path = str(tmp_path / f"big.{format}")
        write_records(path, rows, row_group_size=3000 if format == "parquet" else None)
        batches = [b for b, _ in iter_record_batches(path, batch_size=1000)]
        assert all(0 < b.num_rows <= 1000 for b in batches)
        assert sum(b.num_rows for b in batches) == n
        for batch in batches:  # a slice would pickle its parent block's buffers too
            assert len(pickle.dumps(batch)) < 2 * batch.nbytes + 4096, format


def test_the_corpus_is_what_its_generator_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_corpus", corpus("make_corpus.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_corpus(str(tmp_path))
    names = sorted(os.listdir(tmp_path))
    assert names == sorted(n for n in os.listdir(CORPUS) if n != "make_corpus.py"
                           and not n.startswith((".", "__")))
    for name in names:
        if name.endswith(".parquet") and name != "not_parquet.parquet":
            ours, theirs = pq.read_table(corpus(name)), pq.read_table(str(tmp_path / name))
            assert ours.schema == theirs.schema
            as_bytes = lambda t: [pa.compute.cast(c, pa.binary()) if pa.types.is_string(c.type)
                                  else c for c in t.columns]
            assert all(a.equals(b) for a, b in zip(as_bytes(ours), as_bytes(theirs))), name
        else:
            assert filecmp.cmp(corpus(name), str(tmp_path / name), shallow=False), name
    size = sum(os.path.getsize(corpus(n)) for n in os.listdir(CORPUS))
    assert size < 50_000


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_kind_is_counted_exactly_and_good_rows_survive(name):
    options, rows, drops = EXPECTED[name]
    got_rows, got_drops, rejected = read_blocks(corpus(name), options)
    assert got_rows == rows
    assert got_drops == drops
    assert collections.Counter(r.reason for r in rejected) == collections.Counter(drops)
    assert set(drops) <= set(DROP_REASONS)


@pytest.mark.parametrize("name", ["bad.jsonl", "bad.csv"])
def test_rejected_rows_are_their_exact_raw_lines_with_their_line_numbers(name):
    # Issue 15: a dead letter a person can act on is the line, and where it is.
    options, _, drops = EXPECTED[name]
    lines = open(corpus(name), "rb").read().split(b"\n")
    _, _, rejected = read_blocks(corpus(name), options)
    assert len(rejected) == sum(drops.values())
    for row in rejected:  # every one, value checks on CSV rows included
        assert isinstance(row.raw, bytes) and row.row_index is None
        assert lines[row.line - 1] == row.raw, row
    by_reason = collections.defaultdict(list)
    for r in rejected:
        by_reason[r.reason].append(r.raw)
    if name == "bad.jsonl":
        assert sorted(by_reason["invalid_utf8"]) == sorted(
            [b'{"user_id": "v1", "item": "caf\xe9"}', b'{"user_id": "\\ud800", "item": "x"}'])
        assert by_reason["bad_user"] == [b'{"user_id": 4.5, "item": "float user"}']
    else:
        assert by_reason["malformed"] == [b"m1,too few", b"m2,too,many,fields"]
        assert by_reason["invalid_utf8"] == [b"v1,caf\xe9,1", b"\xff\xfe,x,1"]
        assert by_reason["bad_count"] == [b"c1,kiwi,-1", b"c2,kiwi,two"]
        assert by_reason["missing_user"] == [b",no user,1"]


def test_parquet_rejects_are_json_renderings_with_their_row_index():
    _, _, rejected = read_blocks(corpus("bad_rows.parquet"))
    assert all(r.line is None for r in rejected)
    rendered = {r.reason: (r.row_index, json.loads(r.raw)) for r in rejected
                if r.reason != "missing_user"}
    assert rendered["invalid_utf8"] == (1, {"user_id": "u2", "item": {"base64": "//4="},
                                            "count": 1})
    assert rendered["bad_count"] == (4, {"user_id": "u5", "item": "fine", "count": -2})
    assert rendered["oversized_user"][0] == 7
    assert rendered["oversized_user"][1]["user_id"] == LONG_USER
    assert sorted(r.row_index for r in rejected if r.reason == "missing_user") == [5, 6]


def test_parquet_row_index_counts_across_row_groups_and_batches(tmp_path):
    rows = [(f"u{i}", f"w{i % 5}", -1 if i % 97 == 3 else 1) for i in range(2500)]
    path = str(tmp_path / "g.parquet")
    write_records(path, rows, row_group_size=700)
    expected = [i for i in range(2500) if i % 97 == 3]
    whole = read_blocks(path, batch_size=300)[2]
    assert [r.row_index for r in whole] == expected
    by_group = []
    for group in range(len(parquet_row_groups(path))):
        by_group += read_blocks(path, batch_size=300, row_group=group)[2]
    assert [r.row_index for r in by_group] == expected
    assert all(json.loads(r.raw)["user_id"] == f"u{r.row_index}" for r in by_group)


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_unreadable_files_fail_naming_the_file(name):
    with pytest.raises(RecordFormatError, match=UNREADABLE[name]):
        read_blocks(corpus(name))


def test_a_file_gone_before_it_is_read_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="gone.csv"):
        read_blocks(str(tmp_path / "gone.csv"))


_COMPRESS = {
    "": lambda b: b,
    ".gz": lambda b: gzip.compress(b, mtime=0),
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": lambda b: zstandard.ZstdCompressor().compress(b),
    ".deflate": zlib.compress,
}

def test_damaged_files_raise_nothing_but_record_format_errors(tmp_path):
    """Random damage (bit flips, cuts, inserted and zeroed bytes) to every format and
    compression: each file either reads (its bad records counted) or fails with a
    RecordFormatError naming it; batches are always valid and usable."""
    rows = [(f"u{i}", "wörd" if i % 3 else "x", i % 5) for i in range(200)]
    seeds = {}
    for format in ("jsonl", "csv", "parquet"):
        path = str(tmp_path / f"seed.{format}")
        write_records(path, rows, row_group_size=64)
        seeds[format] = open(path, "rb").read()
    rng = random.Random(20240601)
    outcomes = collections.Counter()
    for i in range(240):
        format = rng.choice(sorted(seeds))
        suffix = "" if format == "parquet" else rng.choice(sorted(_COMPRESS))
        data = bytearray(_COMPRESS[suffix](seeds[format]))
        for _ in range(rng.choice([1, 1, 3, 10])):
            at = rng.randrange(len(data)) if data else 0
            damage = rng.choice(["flip", "cut", "insert", "zero"])
            if damage == "flip" and data:
                data[at] ^= 1 << rng.randrange(8)
            elif damage == "cut":
                del data[at:]
            elif damage == "insert":
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
            else:
                data[at:at + 16] = bytes(len(data[at:at + 16]))
        path = tmp_path / f"damaged-{i}.{format}{suffix}"
        path.write_bytes(bytes(data))
        options = rng.choice([TEXT, RecordOptions(item_kind="bytes"), INT32])
        try:
            for block in iter_record_blocks(str(path), options=options,
                                            keep_rejected=rng.random() < 0.5,
                                            batch_size=rng.choice([7, 65536])):
                block.batch.validate(full=True)
                assert block.batch.schema == options.schema
                block.batch.column("item").to_pylist()  # usable downstream
                assert all(isinstance(r, RejectedRow) for r in block.rejected)
            outcomes["read"] += 1
        except RecordFormatError as e:
            assert str(path) in str(e)
            outcomes["refused"] += 1
    assert outcomes["read"] > 20 and outcomes["refused"] > 20
