"""Tests of triehh_beam.beam.read: ReadRecordBatches on the in-process FnApiRunner (never the
plain DirectRunner: it tries to download the Prism runner), its counters, dead letters,
unreadable files as values, and Parquet files split by row group."""

from __future__ import annotations

import base64
import collections
import json
import os
import re

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from triehh_beam.io import (
    DROP_REASONS,
    RecordColumns,
    RecordFormatError,
    bad_fraction,
    write_records,
)
from triehh_beam.beam.read import (
    RECORDS_TAG,
    REJECTED_TAG,
    UNREADABLE_TAG,
    ReadRecordBatches,
    WriteDeadLetters,
)
from triehh_beam.beam.read import ReadRecordFileDoFn, ReadRecordShardDoFn, SplitRecordFilesDoFn
from triehh_beam.io import parquet_row_groups
from tests.pipeline_factory import new_pipeline
from tests.io.helpers import (
    EXPECTED,
    FORMATS,
    ROWS,
    ROWS_EXPECTED,
    TEXT,
    UNREADABLE,
    batch_rows,
    corpus,
    counters,
    read_rows,
    text_ids,
)


@pytest.mark.parametrize("format", FORMATS)
def test_read_record_batches_each_format(tmp_path, format):
    path = str(tmp_path / f"records.{format}")
    write_records(path, text_ids(ROWS) if format == "parquet" else ROWS)
    with new_pipeline(test=True) as p:
        batches = p | "Read" >> ReadRecordBatches(path, batch_size=3)
        rows = batches | "Rows" >> beam.FlatMap(batch_rows)
        sizes = batches | "Sizes" >> beam.Map(lambda b: b.num_rows <= 3)
        assert_that(rows, equal_to(ROWS_EXPECTED), label="CheckRows")
        assert_that(sizes | "AllBounded" >> beam.combiners.Count.PerElement(),
                    equal_to([(True, 2)]), label="CheckSizes")


def test_read_record_batches_globs_lists_and_counters(tmp_path):
    write_records(str(tmp_path / "a-1.jsonl"), [(42, "x", 2), (None, "y", 1)])
    write_records(str(tmp_path / "a-2.jsonl.gz"), [("42", "x", 1), ("u", None, 1)])
    write_records(str(tmp_path / "b.csv"), [("007", "z", -1), ("007", "z", 5)])
    write_records(str(tmp_path / "c.parquet"), [("v", "w")])
    write_records(str(tmp_path / "ignored.csv"), [("nobody", "never")])
    pattern = f"{tmp_path}/a-*, {tmp_path}/b.csv,{tmp_path}/*.parquet,{tmp_path}/b.*"
    p = new_pipeline()
    rows = p | "Read" >> ReadRecordBatches(pattern) | "Rows" >> beam.FlatMap(batch_rows)
    expected = [(b"42", "x", 2), (b"42", "x", 1), (b"007", "z", 5), (b"v", "w", 1)]
    assert_that(rows, equal_to(expected))
    result = p.run()
    result.wait_until_finish()
    assert counters(result)["records_read"] == 7  # b.csv matched twice, read once
    assert counters(result)["records_missing_user"] == 1
    assert counters(result)["records_missing_item"] == 1
    assert counters(result)["records_bad_count"] == 1
    assert counters(result)["records_malformed"] == 0


def test_read_record_batches_custom_columns_and_no_counts(tmp_path):
    path = str(tmp_path / "c.csv")
    write_records(path, [("u", "a", 5)], columns=RecordColumns(user="who", item="what", count="n"))
    with new_pipeline(test=True) as p:
        with_counts = p | "WithCounts" >> ReadRecordBatches(
            path, user_column="who", item_column="what", count_column="n")
        without = p | "WithoutCounts" >> ReadRecordBatches(
            [path], format="csv", user_column="who", item_column="what", count_column=None)
        assert_that(with_counts | "Rows1" >> beam.FlatMap(batch_rows), equal_to([(b"u", "a", 5)]),
                    label="CheckWithCounts")
        assert_that(without | "Rows2" >> beam.FlatMap(batch_rows), equal_to([(b"u", "a", 1)]),
                    label="CheckWithoutCounts")


def test_read_record_batches_labels_are_stable(tmp_path):
    path = str(tmp_path / "r.csv")
    write_records(path, [("u", "a")])
    p = new_pipeline(test=True)
    _ = p | "ReadRecords" >> ReadRecordBatches(path)
    labels = {t.full_label for t in p.transforms_stack[0].parts[0].parts}
    assert labels == {"ReadRecords/ListFiles", "ReadRecords/SpreadFiles", "ReadRecords/SplitFiles",
                      "ReadRecords/SpreadShards", "ReadRecords/ReadShards"}
    p = new_pipeline(test=True)
    _ = p | "ReadRecords" >> ReadRecordBatches(path, dead_letter=True, unreadable=True)
    labels = {t.full_label for t in p.transforms_stack[0].parts[0].parts}
    assert "ReadRecords/UnreadableFiles" in labels


def test_nothing_matched_fails_at_construction_naming_the_pattern(tmp_path):
    write_records(str(tmp_path / "a.csv"), [("u", "a")])
    pattern = f"{tmp_path}/a.csv,{tmp_path}/missing-*.parquet"
    p = new_pipeline(test=True)
    with pytest.raises(FileNotFoundError, match=r"missing-\*\.parquet"):
        _ = p | "Read" >> ReadRecordBatches(pattern)


def test_unknown_extension_fails_at_construction(tmp_path):
    (tmp_path / "data.txt").write_text("user_id,item\nu,a\n")
    with pytest.raises(ValueError, match="data.txt"):
        _ = new_pipeline(test=True) | "Read" >> ReadRecordBatches(str(tmp_path / "*.txt"))
    with new_pipeline(test=True) as p:  # an explicit format reads it
        rows = p | "Read" >> ReadRecordBatches(str(tmp_path / "*.txt"), format="csv")
        assert_that(rows | beam.FlatMap(batch_rows), equal_to([(b"u", "a", 1)]))


def test_bad_arguments_fail_at_construction():
    with pytest.raises(ValueError, match="format"):
        ReadRecordBatches("x.csv", format="xml")
    with pytest.raises(ValueError, match="batch_size"):
        ReadRecordBatches("x.csv", batch_size=0)
    with pytest.raises(ValueError, match="non-empty"):
        ReadRecordBatches("x.csv,,y.csv")
    with pytest.raises(ValueError, match="must differ"):
        ReadRecordBatches("x.csv", user_column="item")


@pytest.mark.in_process  # a worker's exception crosses a portable runner's Fn API as text, untyped
def test_missing_column_fails_the_job_naming_the_file(tmp_path):
    write_records(str(tmp_path / "good.csv"), [("u", "a")])
    write_records(str(tmp_path / "bad.csv"), [("u", "a")], columns=RecordColumns(user="uid"))
    p = new_pipeline(test=True)
    _ = p | "Read" >> ReadRecordBatches(str(tmp_path / "*.csv"))
    with pytest.raises(Exception, match=r"bad\.csv: no user id column 'user_id'") as raised:
        p.run().wait_until_finish()
    assert isinstance(raised.value, RecordFormatError)


def test_pipeline_counts_every_kind_and_writes_dead_letters(tmp_path):
    names = [n for n in EXPECTED if EXPECTED[n][0] is TEXT]
    dead_letters = str(tmp_path / "rejected.jsonl")
    p = new_pipeline()
    outputs = p | "Read" >> ReadRecordBatches([corpus(n) for n in names], dead_letter=True)
    rows = outputs[RECORDS_TAG] | "Rows" >> beam.FlatMap(batch_rows)
    rejected = outputs[REJECTED_TAG]
    assert_that(rows, equal_to([r for n in names for r in EXPECTED[n][1]]), label="GoodRows")
    expected_rejects = [(corpus(n), reason) for n in names
                        for reason, count in EXPECTED[n][2].items() for _ in range(count)]
    assert_that(rejected | "Reasons" >> beam.Map(lambda r: (r[0], r[1])),
                equal_to(expected_rejects), label="Rejects")
    _ = rejected | "DeadLetters" >> WriteDeadLetters(dead_letters)
    result = p.run()
    result.wait_until_finish()

    totals = counters(result)
    drops = collections.Counter()
    for name in names:
        drops.update(EXPECTED[name][2])
    good = sum(len(EXPECTED[n][1]) for n in names)
    assert totals["records_read"] == good + sum(drops.values())
    for reason in DROP_REASONS:
        assert totals[f"records_{reason}"] == drops[reason], reason
    assert totals["files_read"] == len(names)
    assert totals["files_empty"] == 4  # empty.parquet, empty.jsonl, blank_lines, header_only
    assert bad_fraction(totals) == pytest.approx(sum(drops.values()) / totals["records_read"])

    written = [json.loads(line) for line in open(dead_letters, encoding="utf-8")]
    assert collections.Counter((r["file"], r["reason"]) for r in written) == collections.Counter(
        expected_rejects)
    for record in written:  # text lines with their numbers; Parquet rows with their index
        if record["file"].endswith(".parquet"):
            assert set(record) == {"file", "row_index", "reason", "row"}
            continue
        assert set(record) in ({"file", "line", "reason", "raw"},
                               {"file", "line", "reason", "raw_base64"})
        lines = open(record["file"], "rb").read().split(b"\n")
        raw = (record["raw"].encode("utf-8") if "raw" in record
               else base64.b64decode(record["raw_base64"]))
        assert lines[record["line"] - 1] == raw
        assert ("raw" in record) == (raw.decode("utf-8", "replace").encode("utf-8") == raw)


def test_without_dead_letters_the_output_is_the_batches_alone(tmp_path):
    with new_pipeline() as p:
        batches = p | "Read" >> ReadRecordBatches(corpus("bad.csv"))
        assert isinstance(batches, beam.PCollection)
        assert_that(batches | beam.FlatMap(batch_rows), equal_to(EXPECTED["bad.csv"][1]))


@pytest.mark.in_process  # a worker's exception crosses a portable runner's Fn API as text, untyped
@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_pipeline_errors_are_record_format_errors_naming_the_file(name):
    p = new_pipeline()
    _ = p | "Read" >> ReadRecordBatches(corpus(name))
    with pytest.raises(Exception, match=UNREADABLE[name]) as raised:
        p.run().wait_until_finish()
    assert isinstance(raised.value, RecordFormatError)


def test_a_glob_matching_nothing_names_the_pattern(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothing-\*\.csv"):
        _ = new_pipeline() | ReadRecordBatches(str(tmp_path / "nothing-*.csv"))


def test_empty_inputs_are_reported_not_refused(tmp_path):
    (tmp_path / "e.csv").write_bytes(b"")
    (tmp_path / "h.csv").write_bytes(b"user_id,item\n")
    empty = pa.table({"user_id": pa.array([], pa.int64()), "item": pa.array([], pa.string())})
    pq.write_table(empty, str(tmp_path / "e.parquet"))
    p = new_pipeline()
    _ = p | ReadRecordBatches(str(tmp_path / "*"), format=None)
    result = p.run()
    result.wait_until_finish()
    totals = counters(result)
    assert totals["files_read"] == 3 and totals["files_empty"] == 3
    assert totals["records_read"] == 0 and bad_fraction(totals) == 0.0


def test_write_dead_letters_refuses_bad_arguments():
    with pytest.raises(ValueError, match="non-empty"):
        WriteDeadLetters("")
    with pytest.raises(ValueError, match="num_shards"):
        WriteDeadLetters("x.jsonl", num_shards=-1)


# --- unreadable files as values ---------------------------------------------------------------


def _read_unreadable(patterns, options=None):
    """(rows, unreadable (file, message) pairs, counters) of a job with unreadable=True."""
    p = new_pipeline(options)
    outputs = p | "Read" >> ReadRecordBatches(patterns, unreadable=True)
    assert set(outputs) == {RECORDS_TAG, UNREADABLE_TAG}
    found_rows, found_unreadable = [], []
    _ = outputs[RECORDS_TAG] | "Rows" >> beam.FlatMap(batch_rows) | "KeepRows" >> beam.Map(
        found_rows.append)
    _ = outputs[UNREADABLE_TAG] | "KeepUnreadable" >> beam.Map(found_unreadable.append)
    result = p.run()
    result.wait_until_finish()
    return found_rows, found_unreadable, counters(result)


def test_unreadable_files_are_output_as_values_naming_the_file():
    names = sorted(UNREADABLE) + ["good.parquet", "bad.csv"]
    p = new_pipeline()
    outputs = p | "Read" >> ReadRecordBatches([corpus(n) for n in names], unreadable=True)
    assert_that(outputs[RECORDS_TAG] | "Rows" >> beam.FlatMap(batch_rows),
                equal_to(EXPECTED["good.parquet"][1] + EXPECTED["bad.csv"][1]), label="GoodRows")
    assert_that(outputs[UNREADABLE_TAG] | "Files" >> beam.Map(lambda u: u[0]),
                equal_to([corpus(n) for n in sorted(UNREADABLE)]), label="UnreadableFiles")
    messages_ok = (outputs[UNREADABLE_TAG]
                   | "Matches" >> beam.Map(lambda u: re.search(UNREADABLE[os.path.basename(u[0])],
                                                                u[1]) is not None))
    assert_that(messages_ok, equal_to([True] * len(UNREADABLE)), label="Messages")
    result = p.run()
    result.wait_until_finish()
    assert counters(result)["files_read"] == 2  # unreadable files are not counted as read


def test_unreadable_files_are_values_with_worker_processes_too():
    # With worker processes a raised error reaches the caller only as a RuntimeError holding a
    # traceback; as a value it arrives typed, whatever the runner.
    options = PipelineOptions(["--direct_running_mode=multi_processing", "--direct_num_workers=1"])
    p = new_pipeline(options)
    outputs = p | "Read" >> ReadRecordBatches(corpus("wrong_schema.parquet"), unreadable=True)
    assert_that(outputs[UNREADABLE_TAG], equal_to([(
        corpus("wrong_schema.parquet"),
        f"{corpus('wrong_schema.parquet')}: the user id column 'user_id' has type double; "
        "user ids are strings, integers or binary")]))
    p.run().wait_until_finish()


def test_with_unreadable_output_copies_the_transform(tmp_path):
    path = str(tmp_path / "r.csv")
    write_records(path, [("u", "a")])
    plain = ReadRecordBatches(path)
    reporting = plain.with_unreadable_output()
    with new_pipeline(test=True) as p:
        assert isinstance(p | "Plain" >> plain, beam.PCollection)  # unchanged
        outputs = p | "Reporting" >> reporting
        assert_that(outputs[UNREADABLE_TAG], equal_to([]), label="NoneUnreadable")
        assert_that(outputs[RECORDS_TAG] | beam.FlatMap(batch_rows), equal_to([(b"u", "a", 1)]))


# --- Parquet by row group ---------------------------------------------------------------------


def test_parquet_row_groups_are_read_independently_and_match_a_whole_file_read(tmp_path):
    rows = [(f"user{i % 97}", f"item{i % 13}", i % 4) for i in range(5000)]
    for at in (10, 1500, 4990):  # bad rows in three of the row groups
        rows[at:at] = [(None, "x", 1), ("u", None, 1), ("v", "y", -1)]
    path = str(tmp_path / "big.parquet")
    write_records(path, rows, row_group_size=1000)
    assert len(parquet_row_groups(path)) == 6

    whole_rows, whole_drops = read_rows(path)
    assert len(whole_rows) == 5000
    assert whole_drops == {"missing_user": 3, "missing_item": 3, "bad_count": 3}

    # The split: one work item per row group, read on their own (as any worker would).
    split = SplitRecordFilesDoFn()
    split.setup()
    shards = list(split.process(path))
    assert shards == [(path, g) for g in range(6)]
    reader = ReadRecordShardDoFn()
    reader.setup()
    per_group = [[r for b in reader.process(shard) for r in batch_rows(b)] for shard in shards]
    assert all(per_group) and sum(len(g) for g in per_group) == len(whole_rows)
    assert [r for g in per_group for r in g] == whole_rows

    # In a pipeline: the same rows and counters as the whole-file DoFn, the file counted once.
    def run(read):
        p = new_pipeline()
        got = p | read | beam.FlatMap(batch_rows)
        assert_that(got, equal_to(whole_rows))
        result = p.run()
        result.wait_until_finish()
        return counters(result)

    split_counters = run(ReadRecordBatches(path, batch_size=300))
    whole_counters = run(beam.Create([path]) | beam.ParDo(ReadRecordFileDoFn(batch_size=300)))
    assert split_counters == whole_counters
    assert split_counters["files_read"] == 1 and split_counters["files_empty"] == 0
    assert split_counters["records_read"] == len(rows)


def test_an_empty_parquet_file_is_counted_once_and_has_no_work_items(tmp_path):
    path = str(tmp_path / "e.parquet")
    pq.write_table(pa.table({"user_id": pa.array([], pa.string()), "item": pa.array([], pa.string())}),
                   path)
    split = SplitRecordFilesDoFn()
    split.setup()
    assert list(split.process(path)) == []
    rows, unreadable, totals = _read_unreadable(path)
    assert (rows, unreadable) == ([], [])
    assert totals["files_read"] == 1 and totals["files_empty"] == 1
