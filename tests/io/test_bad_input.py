"""Bad input is counted, never fatal, and never lost: each kind of bad record in each format is
dropped and counted under its reason, good records survive intact, rejected records reach the
dead-letter output as they were, and a file that cannot be read at all fails with a
RecordFormatError naming it. Beam runs use the in-process FnApiRunner (never the plain
DirectRunner, which tries to download the Prism runner).

The corpus in tests/fixtures/bad_input/ is written by make_corpus.py there (checked below)."""

from __future__ import annotations

import base64
import bz2
import collections
import filecmp
import gzip
import importlib.util
import json
import lzma
import os
import random
import re
import zlib

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to

from triehh_beam.beam import record_io
from triehh_beam.beam.record_io import (
    DROP_REASONS,
    REJECTED_TAG,
    RECORDS_TAG,
    ReadRecordBatches,
    RecordFormatError,
    RecordOptions,
    RejectedRow,
    WriteDeadLetters,
    bad_fraction,
    dead_letter_json,
    describe_drops,
    iter_record_blocks,
    normalise_batch,
    record_format_error_from,
    write_records,
)

CORPUS = os.path.join(os.path.dirname(__file__), "fixtures", "bad_input")
LONG_USER = "u" * 300
LONG_ITEM = "x" * 4100

TEXT = RecordOptions()
BASE64 = RecordOptions(item_kind="bytes", bytes_encoding="base64")
INT32 = RecordOptions(item_kind="int", int_bits=32)

# file -> (options, good rows, drops per reason)
EXPECTED = {
    "bad.jsonl": (
        TEXT,
        [(b"u1", "apple", 2), (b"42", "pear", 1), (b"u3", "ünïcödé 🍐", 1), (b"u5", "fig", 0)],
        {"malformed": 2, "invalid_utf8": 2, "missing_user": 2, "bad_user": 1,
         "oversized_user": 1, "missing_item": 2, "bad_item": 1, "oversized_item": 1,
         "bad_count": 2},
    ),
    "bad.csv": (
        TEXT,
        [(b"u1", "apple", 2), (b"42", "pear", 1), (b"u3", "ünïcödé 🍐", 1),
         (b"u,4", "item, with comma", 3), (b"u5", "fig", 0)],
        {"malformed": 2, "invalid_utf8": 2, "missing_user": 1, "oversized_user": 1,
         "missing_item": 1, "oversized_item": 1, "bad_count": 3},
    ),
    "bad_rows.parquet": (
        TEXT,
        [(b"u1", "ok", 1), (b"u10", "e", 3)],
        {"invalid_utf8": 1, "missing_user": 2, "oversized_user": 1, "missing_item": 1,
         "oversized_item": 1, "bad_count": 2},
    ),
    "good.parquet": (TEXT, [(b"1", "a", 1), (b"2", "b", 2), (b"3", "ü", 3)], {}),
    "empty.parquet": (TEXT, [], {}),
    "empty.jsonl": (TEXT, [], {}),
    "blank_lines.jsonl": (TEXT, [], {}),
    "header_only.csv": (TEXT, [], {}),
    "bytes_base64.csv": (
        BASE64, [(b"u1", b"\x00\x01\x02", 1), (b"u2", b"\xff", 1)],
        {"bad_item": 2, "missing_item": 1},
    ),
    "ints.jsonl": (
        INT32, [(b"u1", 7, 1), (b"u2", -(2**31), 1), (b"u3", 42, 1)], {"bad_item": 4},
    ),
}

UNREADABLE = {
    "wrong_schema.parquet": r"wrong_schema\.parquet: the user id column 'user_id' has type double",
    "wrong_item_type.parquet": r"wrong_item_type\.parquet: the item column 'item' has type list",
    "not_parquet.parquet": r"not_parquet\.parquet: cannot read it as parquet",
    "truncated.jsonl.gz": r"truncated\.jsonl\.gz: the compressed stream ends before its end marker",
}


def _corpus(name):
    return os.path.join(CORPUS, name)


def _read(path, options=TEXT, keep_rejected=True, **kwargs):
    """(rows, nonzero drops, rejected rows) of one file, read without Beam."""
    rows, drops, rejected = [], collections.Counter(), []
    for block in iter_record_blocks(path, options=options, keep_rejected=keep_rejected, **kwargs):
        assert block.batch.schema == options.schema
        block.batch.validate(full=True)
        rows.extend(zip(*(c.to_pylist() for c in block.batch.columns)))
        drops.update({k: v for k, v in block.drops.items() if v})
        rejected.extend(block.rejected)
    return rows, dict(drops), rejected


def _counters(result):
    found = result.metrics().query(MetricsFilter().with_namespace("triehh"))["counters"]
    totals = collections.Counter()
    for counter in found:
        totals[counter.key.metric.name] += counter.committed
    return totals


def _rows(batch):
    return list(zip(*(c.to_pylist() for c in batch.columns)))


# --- the corpus -------------------------------------------------------------------------------


def test_the_corpus_is_what_its_generator_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_corpus", _corpus("make_corpus.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_corpus(str(tmp_path))
    names = sorted(os.listdir(tmp_path))
    assert names == sorted(n for n in os.listdir(CORPUS) if n != "make_corpus.py"
                           and not n.startswith((".", "__")))
    for name in names:
        if name.endswith(".parquet") and name != "not_parquet.parquet":
            ours, theirs = pq.read_table(_corpus(name)), pq.read_table(str(tmp_path / name))
            assert ours.schema == theirs.schema
            as_bytes = lambda t: [pa.compute.cast(c, pa.binary()) if pa.types.is_string(c.type)
                                  else c for c in t.columns]
            assert all(a.equals(b) for a, b in zip(as_bytes(ours), as_bytes(theirs))), name
        else:
            assert filecmp.cmp(_corpus(name), str(tmp_path / name), shallow=False), name
    size = sum(os.path.getsize(_corpus(n)) for n in os.listdir(CORPUS))
    assert size < 50_000


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_kind_is_counted_exactly_and_good_rows_survive(name):
    options, rows, drops = EXPECTED[name]
    got_rows, got_drops, rejected = _read(_corpus(name), options)
    assert got_rows == rows
    assert got_drops == drops
    assert collections.Counter(r.reason for r in rejected) == collections.Counter(drops)
    assert set(drops) <= set(DROP_REASONS)


@pytest.mark.parametrize("name", ["bad.jsonl", "bad.csv"])
def test_rejected_lines_are_the_exact_raw_lines(name):
    options, _, _ = EXPECTED[name]
    lines = open(_corpus(name), "rb").read().split(b"\n")
    _, _, rejected = _read(_corpus(name), options)
    raw = [r for r in rejected if isinstance(r.raw, bytes)]
    assert all(r.raw in lines for r in raw)
    if name == "bad.jsonl":  # JSON Lines: every rejected record is its exact line
        assert len(raw) == len(rejected)
        by_reason = collections.defaultdict(list)
        for r in rejected:
            by_reason[r.reason].append(r.raw)
        assert sorted(by_reason["invalid_utf8"]) == sorted(
            [b'{"user_id": "v1", "item": "caf\xe9"}', b'{"user_id": "\\ud800", "item": "x"}'])
        assert by_reason["bad_user"] == [b'{"user_id": 4.5, "item": "float user"}']
    else:  # CSV: lines for parser and UTF-8 rejects, renderings for value checks
        assert sorted(r.raw for r in raw) == sorted(
            [b"m1,too few", b"m2,too,many,fields", b"v1,caf\xe9,1", b"\xff\xfe,x,1"])
        rendered = [json.loads(r.raw) for r in rejected if isinstance(r.raw, str)]
        assert {"user_id": "c2", "item": "kiwi", "count": "two"} in rendered
        assert {"user_id": "", "item": "no user", "count": "1"} in rendered


def test_parquet_rejects_are_json_renderings():
    _, _, rejected = _read(_corpus("bad_rows.parquet"))
    rendered = {r.reason: json.loads(r.raw) for r in rejected if r.reason != "missing_user"}
    assert rendered["invalid_utf8"] == {"user_id": "u2", "item": {"base64": "//4="}, "count": 1}
    assert rendered["bad_count"] in ({"user_id": "u5", "item": "fine", "count": -2},
                                     {"user_id": "u9", "item": "d", "count": None})
    assert rendered["oversized_user"]["user_id"] == LONG_USER


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_unreadable_files_fail_naming_the_file(name):
    with pytest.raises(RecordFormatError, match=UNREADABLE[name]):
        _read(_corpus(name))


# --- in a pipeline: counters, dead letters, errors --------------------------------------------


def test_pipeline_counts_every_kind_and_writes_dead_letters(tmp_path):
    names = [n for n in EXPECTED if EXPECTED[n][0] is TEXT]
    dead_letters = str(tmp_path / "rejected.jsonl")
    p = beam.Pipeline(runner=FnApiRunner())
    outputs = p | "Read" >> ReadRecordBatches([_corpus(n) for n in names], dead_letter=True)
    rows = outputs[RECORDS_TAG] | "Rows" >> beam.FlatMap(_rows)
    rejected = outputs[REJECTED_TAG]
    assert_that(rows, equal_to([r for n in names for r in EXPECTED[n][1]]), label="GoodRows")
    expected_rejects = [(_corpus(n), reason) for n in names
                        for reason, count in EXPECTED[n][2].items() for _ in range(count)]
    assert_that(rejected | "Reasons" >> beam.Map(lambda r: (r[0], r[1])),
                equal_to(expected_rejects), label="Rejects")
    _ = rejected | "DeadLetters" >> WriteDeadLetters(dead_letters)
    result = p.run()
    result.wait_until_finish()

    counters = _counters(result)
    drops = collections.Counter()
    for name in names:
        drops.update(EXPECTED[name][2])
    good = sum(len(EXPECTED[n][1]) for n in names)
    assert counters["records_read"] == good + sum(drops.values())
    for reason in DROP_REASONS:
        assert counters[f"records_{reason}"] == drops[reason], reason
    assert counters["files_read"] == len(names)
    assert counters["files_empty"] == 4  # empty.parquet, empty.jsonl, blank_lines, header_only
    assert bad_fraction(counters) == pytest.approx(sum(drops.values()) / counters["records_read"])

    written = [json.loads(line) for line in open(dead_letters, encoding="utf-8")]
    assert collections.Counter((r["file"], r["reason"]) for r in written) == collections.Counter(
        expected_rejects)
    jsonl_lines = open(_corpus("bad.jsonl"), "rb").read().split(b"\n")
    for record in written:
        assert set(record) in ({"file", "reason", "raw_base64"}, {"file", "reason", "row"})
        if record["file"].endswith("bad.jsonl"):
            assert base64.b64decode(record["raw_base64"]) in jsonl_lines


def test_without_dead_letters_the_output_is_the_batches_alone(tmp_path):
    with beam.Pipeline(runner=FnApiRunner()) as p:
        batches = p | "Read" >> ReadRecordBatches(_corpus("bad.csv"))
        assert isinstance(batches, beam.PCollection)
        assert_that(batches | beam.FlatMap(_rows), equal_to(EXPECTED["bad.csv"][1]))


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_pipeline_errors_are_record_format_errors_naming_the_file(name):
    p = beam.Pipeline(runner=FnApiRunner())
    _ = p | "Read" >> ReadRecordBatches(_corpus(name))
    with pytest.raises(Exception, match=UNREADABLE[name]) as raised:
        p.run().wait_until_finish()
    assert isinstance(raised.value, RecordFormatError)


def test_a_worker_process_error_is_recovered_as_a_record_format_error():
    # With worker processes the runner raises a RuntimeError holding the worker's traceback;
    # record_format_error_from gives the caller the one-line message back.
    options = PipelineOptions(["--direct_running_mode=multi_processing", "--direct_num_workers=1"])
    p = beam.Pipeline(runner=FnApiRunner(), options=options)
    _ = p | "Read" >> ReadRecordBatches(_corpus("wrong_schema.parquet"))
    with pytest.raises(Exception) as raised:
        p.run().wait_until_finish()
    error = record_format_error_from(raised.value)
    assert isinstance(error, RecordFormatError)
    assert re.fullmatch(r".*wrong_schema\.parquet: the user id column 'user_id' has type double; "
                        r"user ids are strings, integers or binary", str(error))
    assert record_format_error_from(RuntimeError("out of memory")) is None
    same = RecordFormatError("x.csv: bad")
    assert record_format_error_from(same) is same


def test_a_glob_matching_nothing_names_the_pattern(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothing-\*\.csv"):
        _ = beam.Pipeline(runner=FnApiRunner()) | ReadRecordBatches(str(tmp_path / "nothing-*.csv"))


def test_a_file_gone_before_it_is_read_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="gone.csv"):
        _read(str(tmp_path / "gone.csv"))


def test_dead_letter_json_lines():
    assert json.loads(dead_letter_json(("f.jsonl", "malformed", b"{\xff"))) == {
        "file": "f.jsonl", "reason": "malformed", "raw_base64": base64.b64encode(b"{\xff").decode()}
    assert json.loads(dead_letter_json(("f.parquet", "bad_count", '{"count": -1}'))) == {
        "file": "f.parquet", "reason": "bad_count", "row": {"count": -1}}
    with pytest.raises(ValueError):
        WriteDeadLetters("")


def test_bad_fraction_and_the_operator_line():
    counters = {"records_read": 1000, "records_malformed": 3, "records_invalid_utf8": 2,
                "records_missing_user": 7, "files_read": 3, "files_empty": 1,
                "users_sampled": 99}
    assert bad_fraction(counters) == pytest.approx(12 / 1000)
    assert bad_fraction({}) == 0.0
    assert describe_drops(counters) == (
        "read 1,000 records from 3 files (1 empty); dropped 12 (1.2%): malformed 3, "
        "invalid_utf8 2, missing_user 7")
    assert describe_drops({"records_read": 5, "files_read": 1}) == (
        "read 5 records from 1 file; none dropped")


# --- each reader's paths ----------------------------------------------------------------------


def test_jsonl_value_checks_on_the_arrow_path_keep_the_raw_lines(tmp_path):
    lines = [
        b'{"user_id": "a", "item": "x", "count": 1}',
        b"",
        b'{"user_id": "", "item": "x", "count": 1}',
        b"   ",
        b'{"user_id": "' + LONG_USER.encode() + b'", "item": "x"}',
        b'{"user_id": "b", "item": "x", "count": -5}',
        b'{"user_id": "c", "item": "' + LONG_ITEM.encode() + b'"}',
        b'{"user_id": "d", "item": null}',
        b'{"user_id": "e", "item": "y"}',
    ]
    path = tmp_path / "typed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows, drops, rejected = _read(str(path))
    assert rows == [(b"a", "x", 1), (b"e", "y", 1)]
    assert drops == {"missing_user": 1, "oversized_user": 1, "bad_count": 1,
                     "oversized_item": 1, "missing_item": 1}
    assert [r.raw for r in rejected] == [lines[2], lines[4], lines[5], lines[6], lines[7]]


def test_one_broken_line_in_a_big_jsonl_file_costs_one_sub_block(tmp_path, monkeypatch):
    n = 6000
    lines = [json.dumps({"user_id": f"user{i:05d}", "item": f"item{i % 97}"}).encode()
             for i in range(n)]
    lines[3000] = b'{"user_id": "broken", "item": '
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    slow_lines = []
    parse_with_json = record_io._JsonLinesParser._parse_with_json

    def spy(self, chunk):
        slow_lines.append(chunk.count(b"\n") + 1)
        return parse_with_json(self, chunk)

    monkeypatch.setattr(record_io._JsonLinesParser, "_parse_with_json", spy)
    blocks = list(iter_record_blocks(str(path), keep_rejected=True, batch_size=4096))
    rows = [r for b in blocks for r in _rows(b.batch)]
    assert len(rows) == n - 1 and rows[0] == (b"user00000", "item0", 1)
    assert [r.raw for b in blocks for r in b.rejected] == [lines[3000]]
    assert sum(slow_lines) < 2000  # one ~64 KiB sub-block, not the whole 270 KB block
    assert all(b.batch.num_rows >= 1024 for b in blocks[:-1])  # sub-blocks are merged


def test_mixed_id_types_in_jsonl_still_read_every_record(tmp_path):
    rows = [(i, "a") if i % 2 else (f"s{i}", "b") for i in range(3000)]
    path = str(tmp_path / "mixed.jsonl")
    write_records(path, rows)
    got, drops, _ = _read(path)
    assert sorted(got) == sorted((str(u).encode(), item, 1) for u, item in rows) and drops == {}


def test_csv_lines_that_are_not_utf8_anywhere_in_a_big_file(tmp_path, monkeypatch):
    monkeypatch.setattr(record_io, "_BLOCK_BYTES", 512)  # many blocks
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
    rows, drops, rejected = _read(str(path))
    assert rows == expected
    assert drops == {"invalid_utf8": 11, "malformed": 8}
    assert sorted(r.raw for r in rejected) == sorted(bad)


def test_a_csv_header_that_is_not_utf8_fails_naming_the_file(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes(b"user_id,it\xffem\nu,a\n")
    with pytest.raises(RecordFormatError, match=r"h\.csv: the header line is not UTF-8"):
        _read(str(path))


def test_parquet_text_that_is_not_utf8_is_counted(tmp_path):
    users = pa.array([b"a", b"\xc3", b"c"], pa.binary())
    users = pa.Array.from_buffers(pa.string(), 3, users.buffers())
    path = str(tmp_path / "u.parquet")
    pq.write_table(pa.table({"user_id": users, "item": pa.array([b"x", b"y", b"\xff"])}), path)
    rows, drops, _ = _read(path)
    assert rows == [(b"a", "x", 1)] and drops == {"invalid_utf8": 2}


def test_field_limits_are_configurable():
    batch = pa.record_batch({"user_id": ["abc", "abcd", "ab"], "item": ["wxyz", "w", "wxyzv"]})
    options = RecordOptions(max_user_bytes=3, max_item_bytes=4)
    good, drops = normalise_batch(batch, options=options)
    assert good.column("user_id").to_pylist() == [b"abc"]
    assert drops == {"missing_user": 0, "missing_item": 0, "bad_count": 0,
                     "oversized_user": 1, "oversized_item": 1}
    # A multi-byte character counts its UTF-8 bytes.
    good, drops = normalise_batch(pa.record_batch({"user_id": ["a"], "item": ["éé"]}),
                                  options=RecordOptions(max_item_bytes=3))
    assert good.num_rows == 0 and drops["oversized_item"] == 1


def test_empty_inputs_are_reported_not_refused(tmp_path):
    (tmp_path / "e.csv").write_bytes(b"")
    (tmp_path / "h.csv").write_bytes(b"user_id,item\n")
    empty = pa.table({"user_id": pa.array([], pa.int64()), "item": pa.array([], pa.string())})
    pq.write_table(empty, str(tmp_path / "e.parquet"))
    p = beam.Pipeline(runner=FnApiRunner())
    _ = p | ReadRecordBatches(str(tmp_path / "*"), format=None)
    result = p.run()
    result.wait_until_finish()
    counters = _counters(result)
    assert counters["files_read"] == 3 and counters["files_empty"] == 3
    assert counters["records_read"] == 0 and bad_fraction(counters) == 0.0


# --- nothing but RecordFormatError ------------------------------------------------------------

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
