"""Tests of triehh_beam.beam.record_io: the pure normalisation, the buffers, each file format,
and ReadRecordBatches on the in-process FnApiRunner (never the plain DirectRunner: it tries to
download the Prism runner)."""

from __future__ import annotations

import gzip
import pickle

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from triehh_beam.protocol import keyed_hash, sampling
from triehh_beam.beam import record_io
from triehh_beam.beam.record_io import (
    RECORD_SCHEMA,
    ReadRecordBatches,
    RecordColumns,
    RecordFormatError,
    binary_buffers,
    infer_format,
    iter_record_batches,
    normalise_batch,
    write_records,
)

FORMATS = ["jsonl", "csv", "parquet"]


def _rows(batches):
    """(user bytes, item, count) rows of a list of normalised batches."""
    rows = []
    for batch in batches:
        assert batch.schema == RECORD_SCHEMA
        rows.extend(zip(*(batch.column(i).to_pylist() for i in range(3))))
    return rows


def _read(path, **kwargs):
    """(rows, summed drop counts) of one file, read without Beam."""
    batches, drops = [], {}
    for batch, batch_drops in iter_record_batches(path, **kwargs):
        batches.append(batch)
        for reason, n in batch_drops.items():
            drops[reason] = drops.get(reason, 0) + n
    return _rows(batches), {reason: n for reason, n in drops.items() if n}


def _batch_rows(batch):
    return list(zip(*(batch.column(i).to_pylist() for i in range(3))))


def _pipeline():
    return test_pipeline.TestPipeline(runner=FnApiRunner())


def _counter(result, name):
    query = MetricsFilter().with_namespace("triehh").with_name(name)
    found = result.metrics().query(query)["counters"]
    return sum(c.committed for c in found)


# --- binary_buffers -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [pa.binary(), pa.string(), pa.large_binary(), pa.large_string()])
def test_binary_buffers_whole_and_sliced(kind):
    values = ["", "a", "héllo", "xyz" * 10, "", "007", "42"]
    array = pa.array(values, kind)
    for start, length in [(0, 7), (1, 3), (2, 5), (4, 0), (6, 1), (0, 0)]:
        part = array.slice(start, length)
        data, offsets = binary_buffers(part)
        assert data.dtype == np.uint8 and offsets.dtype == np.int64
        assert len(offsets) == length + 1 and offsets[0] == 0
        got = [bytes(data[offsets[i] : offsets[i + 1]]) for i in range(length)]
        assert got == [v.encode() for v in values[start : start + length]]
        expected_data, expected_offsets = keyed_hash.pack_messages(got)
        np.testing.assert_array_equal(offsets, expected_offsets)
        np.testing.assert_array_equal(data, expected_data)


def test_binary_buffers_is_zero_copy_for_the_data():
    array = pa.array([b"abc", b"defg", b"hi"], pa.binary()).slice(1, 2)
    data, offsets = binary_buffers(array)
    assert bytes(data) == b"defghi"
    assert data.ctypes.data == array.buffers()[2].address + 3  # a view into Arrow's buffer
    assert not data.flags.writeable


def test_binary_buffers_hashes_like_the_reference():
    key = keyed_hash.derive_key(b"s" * 16, b"test")
    users = pa.array([b"u%d" % i for i in range(50)], pa.binary()).slice(7, 30)
    expected = [keyed_hash.siphash24(key, u) for u in users.to_pylist()]
    assert keyed_hash.siphash24_batch(key, *binary_buffers(users)).tolist() == expected


def test_binary_buffers_takes_chunked_arrays_and_refuses_other_types():
    chunked = pa.chunked_array([pa.array(["a", "bc"]), pa.array(["d"])])
    data, offsets = binary_buffers(chunked)
    assert bytes(data) == b"abcd" and offsets.tolist() == [0, 1, 3, 4]
    with pytest.raises(TypeError, match="binary or string"):
        binary_buffers(pa.array([1, 2]))


# --- normalise_batch ------------------------------------------------------------------------


def test_normalise_matches_sampling_user_id_bytes():
    ids = [42, 0, -5, 2**62, 7]
    batch = pa.record_batch({"user_id": pa.array(ids), "item": pa.array(["i"] * 5)})
    good, drops = normalise_batch(batch)
    assert good.column("user_id").to_pylist() == [sampling.user_id_bytes(u) for u in ids]
    assert good.column("count").to_pylist() == [1] * 5  # no count column
    assert drops == {"missing_user": 0, "missing_item": 0, "bad_count": 0}
    texts = ["42", "007", "héllo", "ユーザー"]
    batch = pa.record_batch({"user_id": pa.array(texts), "item": pa.array(["i"] * 4)})
    assert normalise_batch(batch)[0].column("user_id").to_pylist() == [
        sampling.user_id_bytes(u) for u in texts
    ]


def test_normalise_int_and_string_ids_are_the_same_user():
    as_int = pa.record_batch({"user_id": pa.array([42], pa.uint32()), "item": ["a"]})
    as_text = pa.record_batch({"user_id": pa.array(["42"]), "item": ["a"]})
    as_bytes = pa.record_batch({"user_id": pa.array([b"42"]), "item": ["a"]})
    results = [
        normalise_batch(b)[0].column("user_id").to_pylist() for b in (as_int, as_text, as_bytes)
    ]
    assert results == [[b"42"]] * 3


def test_normalise_drops_and_counts_bad_rows_once_each():
    batch = pa.record_batch(
        {
            "user_id": pa.array(["a", None, "", "b", "c", "d", "e", None, "f"]),
            "item": pa.array(["x", "x", "x", None, "", "y", "y", None, "z"]),
            "count": pa.array([3, 1, 1, 1, 1, -1, None, -4, 0], pa.int64()),
        }
    )
    good, drops = normalise_batch(batch)
    assert _batch_rows(good) == [(b"a", "x", 3), (b"f", "z", 0)]
    # The row with no user, no item and a negative count is one missing user.
    assert drops == {"missing_user": 3, "missing_item": 2, "bad_count": 2}
    assert good.schema == RECORD_SCHEMA


def test_normalise_text_counts_as_in_csv():
    counts = ["3", " 4 ", "007", "-1", "1.5", "x", "", None, "99999999999999999999"]
    batch = pa.record_batch(
        {"user_id": pa.array(["u"] * len(counts)), "item": pa.array(["i"] * len(counts)),
         "count": pa.array(counts)}
    )
    good, drops = normalise_batch(batch)
    assert good.column("count").to_pylist() == [3, 4, 7]
    assert drops["bad_count"] == 6


def test_normalise_unsigned_counts_beyond_int64_are_bad():
    batch = pa.record_batch(
        {"user_id": ["a", "b"], "item": ["i", "i"], "count": pa.array([5, 2**63], pa.uint64())}
    )
    good, drops = normalise_batch(batch)
    assert _batch_rows(good) == [(b"a", "i", 5)] and drops["bad_count"] == 1


def test_normalise_custom_columns_dictionaries_and_tables():
    table = pa.Table.from_batches(
        [
            pa.record_batch({"uid": pa.array(["a", "b"]).dictionary_encode(), "q": ["x", "y"],
                             "n": pa.array([1, 2], pa.int32()), "other": [1.0, 2.0]}),
            pa.record_batch({"uid": pa.array(["c", ""]).dictionary_encode(), "q": ["z", "w"],
                             "n": pa.array([3, 4], pa.int32()), "other": [1.0, 2.0]}),
        ]
    )
    good, drops = normalise_batch(table, RecordColumns(user="uid", item="q", count="n"))
    assert _batch_rows(good) == [(b"a", "x", 1), (b"b", "y", 2), (b"c", "z", 3)]
    assert drops == {"missing_user": 1, "missing_item": 0, "bad_count": 0}
    ignored = normalise_batch(table, RecordColumns(user="uid", item="q", count=None))[0]
    assert ignored.column("count").to_pylist() == [1, 1, 1]


def test_normalise_refuses_missing_columns_and_wrong_types():
    with pytest.raises(RecordFormatError, match="'item'"):
        normalise_batch(pa.record_batch({"user_id": ["a"], "thing": ["x"]}))
    with pytest.raises(RecordFormatError, match="user id column 'user_id' has type double"):
        normalise_batch(pa.record_batch({"user_id": [1.5], "item": ["x"]}))
    with pytest.raises(RecordFormatError, match="count column 'count' has type double"):
        normalise_batch(pa.record_batch({"user_id": ["a"], "item": ["x"], "count": [1.0]}))
    with pytest.raises(RecordFormatError, match="items are strings"):
        normalise_batch(pa.record_batch({"user_id": ["a"], "item": [3]}))


def test_normalise_keeps_buffers_when_nothing_is_dropped():
    batch = pa.record_batch({"user_id": pa.array(["a", "b"]), "item": ["x", "y"]})
    good, _ = normalise_batch(batch)
    data_address = batch.column("user_id").buffers()[2].address
    assert good.column("user_id").buffers()[2].address == data_address


def test_record_columns_are_validated():
    with pytest.raises(ValueError, match="must differ"):
        RecordColumns(user="a", item="a")
    with pytest.raises(ValueError, match="non-empty"):
        RecordColumns(user="")


# --- reading files without Beam ---------------------------------------------------------------

ROWS = [(42, "apple", 2), ("007", "pear", 1), ("42", "fig", 3), ("ü", "kiwi", 1)]
EXPECTED = [(b"42", "apple", 2), (b"007", "pear", 1), (b"42", "fig", 3), ("ü".encode(), "kiwi", 1)]


def _text_ids(rows):
    """Parquet columns have one type: the same rows with every user id as text."""
    return [(str(r[0]) if isinstance(r[0], int) else r[0],) + tuple(r[1:]) for r in rows]


@pytest.mark.parametrize("name", ["r.jsonl", "r.csv", "r.jsonl.gz", "r.csv.gz", "r.ndjson", "r.pq"])
def test_every_format_round_trips(tmp_path, name):
    path = str(tmp_path / name)
    rows = _text_ids(ROWS) if name.endswith(".pq") else ROWS
    write_records(path, rows)
    assert _read(path) == (EXPECTED, {})


def test_compressed_files_are_really_compressed(tmp_path):
    path = str(tmp_path / "r.csv.gz")
    write_records(path, ROWS)
    assert gzip.decompress(open(path, "rb").read()).startswith(b'"user_id"')


def test_leading_zeros_are_kept_in_csv_and_jsonl(tmp_path):
    for name in ("z.csv", "z.jsonl"):
        path = str(tmp_path / name)
        write_records(path, [("007", "a"), ("7", "b"), (7, "c")])
        assert [r[0] for r in _read(path)[0]] == [b"007", b"7", b"7"]


def test_integer_parquet_ids_are_decimal_text(tmp_path):
    path = str(tmp_path / "i.parquet")
    write_records(path, [(42, "a", 1), (10**15, "b", 2)])
    assert pq.read_schema(path).field("user_id").type == pa.int64()
    assert _read(path)[0] == [(b"42", "a", 1), (b"1000000000000000", "b", 2)]


@pytest.mark.parametrize("format", FORMATS)
def test_missing_count_column_counts_one(tmp_path, format):
    path = str(tmp_path / f"n.{format}")
    write_records(path, [("u1", "a"), ("u2", "b")])
    assert _read(path)[0] == [(b"u1", "a", 1), (b"u2", "b", 1)]


@pytest.mark.parametrize("format", FORMATS)
def test_bad_rows_are_dropped_and_counted(tmp_path, format):
    path = str(tmp_path / f"b.{format}")
    write_records(path, [("u", "a", 1), (None, "b", 1), ("", "c", 1), ("v", None, 1), ("w", "", 1),
                         ("x", "d", -2), ("y", "e", 0)])
    rows, drops = _read(path)
    assert rows == [(b"u", "a", 1), (b"y", "e", 0)]
    assert drops == {"missing_user": 2, "missing_item": 2, "bad_count": 1}


def test_null_counts_are_bad_in_csv_and_parquet_but_one_in_jsonl(tmp_path):
    for format, expected in [("csv", ([], {"bad_count": 1})), ("parquet", ([], {"bad_count": 1})),
                             ("jsonl", ([(b"u", "a", 1)], {}))]:
        path = str(tmp_path / f"c.{format}")
        write_records(path, [("u", "a", None)])
        assert _read(path) == expected, format


def test_jsonl_mixed_types_take_the_slow_path_with_the_same_result(tmp_path):
    path = tmp_path / "m.jsonl"
    lines = [
        '{"user_id": 42, "item": "a"}',
        '{"user_id": "42", "item": "b", "count": 3, "extra": [1, {"x": null}]}',
        '{"user_id": 99999999999999999999, "item": "c", "count": null}',
        '{"user_id": 4.5, "item": "d"}',  # bad user
        '{"user_id": true, "item": "d"}',  # bad user
        '{"user_id": "u", "item": 5}',  # bad item
        '{"user_id": "u", "item": "e", "count": 2.0}',  # bad count
        '{"user_id": "u", "item": "e", "count": "2"}',  # bad count
        '{"user_id": "u", "item": "e", "count": 9223372036854775808}',  # bad count
        '{"item": "f"}',  # missing user
        '{"user_id": "", "item": 5}',  # missing user (checked before the item's type)
        '{"user_id": "v", "item": ""}',  # missing item
        "not json",  # malformed
        "[1, 2]",  # malformed
        "",
        "   ",
        '{"user_id": "w", "item": "ü", "count": 0}',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows, drops = _read(str(path))
    assert rows == [(b"42", "a", 1), (b"42", "b", 3), (b"99999999999999999999", "c", 1),
                    (b"w", "ü", 0)]
    assert drops == {"bad_user": 2, "bad_item": 1, "bad_count": 3, "missing_user": 2,
                     "missing_item": 1, "malformed": 2}


def test_jsonl_blocks_switch_between_id_types(tmp_path, monkeypatch):
    # Small blocks: one holds integer ids, the next string ids, the last a mixture.
    monkeypatch.setattr(record_io, "_BLOCK_BYTES", 256)
    rows = [(i, f"item{i}") for i in range(20)] + [(f"s{i}", "x") for i in range(20)]
    rows += [(1, "a"), ("1", "b")] * 5
    path = str(tmp_path / "s.jsonl")
    write_records(path, rows)
    got, drops = _read(path, batch_size=7)
    assert got == [(sampling.user_id_bytes(u), item, 1) for u, item in rows] and drops == {}


def test_csv_rows_with_the_wrong_field_count_are_malformed(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text('user_id,item,count\nu,a,1\nv,b\nw,c,2,extra\n"x","d, with comma",4\n')
    rows, drops = _read(str(path))
    assert rows == [(b"u", "a", 1), (b"x", "d, with comma", 4)]
    assert drops == {"malformed": 2}


def test_csv_header_with_quotes_bom_and_other_columns(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes('\ufeffday,"item",user_id\n1,a,007\n2,"b ""q""",NA\n'.encode("utf-8"))
    assert _read(str(path))[0] == [(b"007", "a", 1), (b"NA", 'b "q"', 1)]


def test_empty_files_have_no_records(tmp_path):
    for name in ("e.csv", "e.jsonl"):
        (tmp_path / name).write_bytes(b"")
        assert _read(str(tmp_path / name)) == ([], {})
    (tmp_path / "h.csv").write_text("user_id,item\n")
    assert _read(str(tmp_path / "h.csv")) == ([], {})


@pytest.mark.parametrize("format", FORMATS)
def test_missing_column_names_the_file_and_column(tmp_path, format):
    path = str(tmp_path / f"nocol.{format}")
    write_records(path, [("u", "a", 1)], columns=RecordColumns(item="thing"))
    with pytest.raises(RecordFormatError, match=rf"nocol\.{format}.*item column 'item'"):
        _read(path)
    with pytest.raises(RecordFormatError, match=rf"nocol\.{format}.*user id column 'uid'"):
        _read(path, columns=RecordColumns(user="uid", item="thing"))


def test_unreadable_files_name_the_file(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(RecordFormatError, match=r"bad\.parquet: cannot read it as parquet"):
        _read(str(tmp_path / "bad.parquet"))
    # A line that is not UTF-8 is a counted bad row, not a failure of the whole file.
    (tmp_path / "bad.csv").write_bytes(b"user_id,item\n\xff\xfe,a\n")
    assert _read(str(tmp_path / "bad.csv")) == ([], {"invalid_utf8": 1})
    (tmp_path / "bad.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 10)
    with pytest.raises(RecordFormatError, match=r"bad\.jsonl\.gz: cannot read it as jsonl"):
        _read(str(tmp_path / "bad.jsonl.gz"))
    pq.write_table(pa.table({"user_id": [1.5], "item": ["a"]}), str(tmp_path / "f.parquet"))
    with pytest.raises(RecordFormatError, match=r"f\.parquet: the user id column 'user_id'"):
        _read(str(tmp_path / "f.parquet"))


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


def test_format_inference():
    assert [infer_format(p) for p in ("a.jsonl", "b.JSON", "c.ndjson.gz", "d.csv.bz2", "e.pq",
                                      "gs://b/f.parquet")] == ["jsonl", "jsonl", "jsonl", "csv",
                                                               "parquet", "parquet"]
    with pytest.raises(ValueError, match="cannot tell the format of 'x.txt'"):
        infer_format("x.txt")


def test_write_records_refuses_what_it_cannot_write(tmp_path):
    with pytest.raises(ValueError, match="all"):
        write_records(str(tmp_path / "x.csv"), [("u", "a"), ("v", "b", 1)])
    with pytest.raises(ValueError, match="mix types"):
        write_records(str(tmp_path / "x.parquet"), [(1, "a"), ("v", "b")])
    with pytest.raises(TypeError, match="text format"):
        write_records(str(tmp_path / "x.jsonl"), [(b"u", "a")])
    with pytest.raises(ValueError, match="compress internally"):
        write_records(str(tmp_path / "x.parquet.gz"), [("u", "a")])


# --- ReadRecordBatches ----------------------------------------------------------------------


@pytest.mark.parametrize("format", FORMATS)
def test_read_record_batches_each_format(tmp_path, format):
    path = str(tmp_path / f"records.{format}")
    write_records(path, _text_ids(ROWS) if format == "parquet" else ROWS)
    with _pipeline() as p:
        batches = p | "Read" >> ReadRecordBatches(path, batch_size=3)
        rows = batches | "Rows" >> beam.FlatMap(_batch_rows)
        sizes = batches | "Sizes" >> beam.Map(lambda b: b.num_rows <= 3)
        assert_that(rows, equal_to(EXPECTED), label="CheckRows")
        assert_that(sizes | "AllBounded" >> beam.combiners.Count.PerElement(),
                    equal_to([(True, 2)]), label="CheckSizes")


def test_read_record_batches_globs_lists_and_counters(tmp_path):
    write_records(str(tmp_path / "a-1.jsonl"), [(42, "x", 2), (None, "y", 1)])
    write_records(str(tmp_path / "a-2.jsonl.gz"), [("42", "x", 1), ("u", None, 1)])
    write_records(str(tmp_path / "b.csv"), [("007", "z", -1), ("007", "z", 5)])
    write_records(str(tmp_path / "c.parquet"), [("v", "w")])
    write_records(str(tmp_path / "ignored.csv"), [("nobody", "never")])
    pattern = f"{tmp_path}/a-*, {tmp_path}/b.csv,{tmp_path}/*.parquet,{tmp_path}/b.*"
    p = beam.Pipeline(runner=FnApiRunner())
    rows = p | "Read" >> ReadRecordBatches(pattern) | "Rows" >> beam.FlatMap(_batch_rows)
    expected = [(b"42", "x", 2), (b"42", "x", 1), (b"007", "z", 5), (b"v", "w", 1)]
    assert_that(rows, equal_to(expected))
    result = p.run()
    result.wait_until_finish()
    assert _counter(result, "records_read") == 7  # b.csv matched twice, read once
    assert _counter(result, "records_missing_user") == 1
    assert _counter(result, "records_missing_item") == 1
    assert _counter(result, "records_bad_count") == 1
    assert _counter(result, "records_malformed") == 0


def test_read_record_batches_custom_columns_and_no_counts(tmp_path):
    path = str(tmp_path / "c.csv")
    write_records(path, [("u", "a", 5)], columns=RecordColumns(user="who", item="what", count="n"))
    with _pipeline() as p:
        with_counts = p | "WithCounts" >> ReadRecordBatches(
            path, user_column="who", item_column="what", count_column="n")
        without = p | "WithoutCounts" >> ReadRecordBatches(
            [path], format="csv", user_column="who", item_column="what", count_column=None)
        assert_that(with_counts | "Rows1" >> beam.FlatMap(_batch_rows), equal_to([(b"u", "a", 5)]),
                    label="CheckWithCounts")
        assert_that(without | "Rows2" >> beam.FlatMap(_batch_rows), equal_to([(b"u", "a", 1)]),
                    label="CheckWithoutCounts")


def test_read_record_batches_labels_are_stable(tmp_path):
    path = str(tmp_path / "r.csv")
    write_records(path, [("u", "a")])
    p = _pipeline()
    _ = p | "ReadRecords" >> ReadRecordBatches(path)
    labels = {t.full_label for t in p.transforms_stack[0].parts[0].parts}
    assert labels == {"ReadRecords/ListFiles", "ReadRecords/SpreadFiles", "ReadRecords/ReadFiles"}


def test_nothing_matched_fails_at_construction_naming_the_pattern(tmp_path):
    write_records(str(tmp_path / "a.csv"), [("u", "a")])
    pattern = f"{tmp_path}/a.csv,{tmp_path}/missing-*.parquet"
    p = _pipeline()
    with pytest.raises(FileNotFoundError, match=r"missing-\*\.parquet"):
        _ = p | "Read" >> ReadRecordBatches(pattern)


def test_unknown_extension_fails_at_construction(tmp_path):
    (tmp_path / "data.txt").write_text("user_id,item\nu,a\n")
    with pytest.raises(ValueError, match="data.txt"):
        _ = _pipeline() | "Read" >> ReadRecordBatches(str(tmp_path / "*.txt"))
    with _pipeline() as p:  # an explicit format reads it
        rows = p | "Read" >> ReadRecordBatches(str(tmp_path / "*.txt"), format="csv")
        assert_that(rows | beam.FlatMap(_batch_rows), equal_to([(b"u", "a", 1)]))


def test_bad_arguments_fail_at_construction():
    with pytest.raises(ValueError, match="format"):
        ReadRecordBatches("x.csv", format="xml")
    with pytest.raises(ValueError, match="batch_size"):
        ReadRecordBatches("x.csv", batch_size=0)
    with pytest.raises(ValueError, match="non-empty"):
        ReadRecordBatches("x.csv,,y.csv")
    with pytest.raises(ValueError, match="must differ"):
        ReadRecordBatches("x.csv", user_column="item")


def test_missing_column_fails_the_job_naming_the_file(tmp_path):
    write_records(str(tmp_path / "good.csv"), [("u", "a")])
    write_records(str(tmp_path / "bad.csv"), [("u", "a")], columns=RecordColumns(user="uid"))
    p = _pipeline()
    _ = p | "Read" >> ReadRecordBatches(str(tmp_path / "*.csv"))
    with pytest.raises(Exception, match=r"bad\.csv: no user id column 'user_id'") as raised:
        p.run().wait_until_finish()
    assert isinstance(raised.value, RecordFormatError)
