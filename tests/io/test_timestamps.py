"""Tests of the timestamp column (RecordOptions.timestamp_column, triehh_beam.io.timestamps):
milliseconds, RFC 3339 text and Parquet timestamps to int64 microseconds since the epoch (UTC),
checked against instants built first and rendered second; bad values dropped as bad_timestamp
in every format; files without the column refused."""

from __future__ import annotations

import calendar
import datetime
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from triehh_beam.io import (
    DROP_REASONS,
    TIMESTAMP_FIELD,
    RecordColumns,
    RecordFormatError,
    RecordOptions,
    normalise_batch,
    record_schema,
)
from triehh_beam.io.timestamps import micros_of_values, timestamp_micros
from tests.io.helpers import read_blocks

STAMPED = RecordOptions(timestamp_column="ts")
MAY_1 = calendar.timegm((2024, 5, 1, 12, 0, 0)) * 1_000_000  # 2024-05-01T12:00:00Z, in µs


def micros(array):
    values, ok = timestamp_micros(array, "ts")
    assert ok.null_count == 0 and values.type == pa.int64()
    return [v if k else None for v, k in zip(values.to_pylist(), ok.to_pylist())]


def test_rfc3339_text_with_offsets_fractions_and_case():
    texts = {
        "2024-05-01T12:00:00Z": MAY_1,
        "2024-05-01t12:00:00z": MAY_1,
        "2024-05-01 12:00:00Z": MAY_1,
        " 2024-05-01T12:00:00Z ": MAY_1,
        "2024-05-01T14:00:00+02:00": MAY_1,
        "2024-05-01T06:30:00-05:30": MAY_1,
        "2024-05-01T12:00:00.5Z": MAY_1 + 500_000,
        "2024-05-01T12:00:00.123456Z": MAY_1 + 123_456,
        "2024-05-01T12:00:00.1234569Z": MAY_1 + 123_456,  # past the microsecond: dropped
        "1969-12-31T23:59:59.999999Z": -1,
        "2016-12-31T23:59:60Z": calendar.timegm((2017, 1, 1, 0, 0, 0)) * 1_000_000 - 1,
    }
    assert micros(pa.array(list(texts))) == list(texts.values())


@pytest.mark.parametrize("bad", [
    "2024-05-01T12:00:00",  # no offset: which time zone?
    "2024-05-01T12:00Z",  # no seconds
    "2024-05-01T12:00:00+0200",  # RFC 3339 offsets have a colon
    "2024-13-01T12:00:00Z", "2024-05-01T24:00:00Z", "2024-05-01T12:00:00+24:00",
    "2024-02-30T12:00:00Z",  # the pattern lets it through, the calendar does not
    "May 1, 2024", "", "12.5.3", "0x10", "1e12", "true",
])
def test_text_that_is_not_a_timestamp_is_bad_alone_in_its_batch(bad):
    good = ["2024-05-01T12:00:00Z"] * 5
    assert micros(pa.array(good[:2] + [bad] + good[2:])) == [MAY_1] * 2 + [None] + [MAY_1] * 3


def test_random_instants_rendered_in_random_offsets_read_back_exactly():
    rng = random.Random(15)
    texts, expected = [], []
    for _ in range(2000):
        instant = rng.randrange(-2 * 10**15, 5 * 10**15)  # µs: 1906 to 2128
        offset_minutes = rng.choice([0, 60, -300, 330, 345, -570, 840, -720])
        local = datetime.datetime(1970, 1, 1) + datetime.timedelta(
            microseconds=instant + offset_minutes * 60_000_000)
        digits = rng.choice([0, 3, 6, 9])
        fraction = f".{local.microsecond:06d}{rng.randrange(1000):03d}"[: 1 + digits] if digits else ""
        if offset_minutes == 0 and rng.random() < 0.5:
            zone = rng.choice("Zz")
        else:
            sign = "-" if offset_minutes < 0 else "+"
            zone = f"{sign}{abs(offset_minutes) // 60:02d}:{abs(offset_minutes) % 60:02d}"
        texts.append(local.strftime("%Y-%m-%d") + rng.choice("Tt ") + local.strftime("%H:%M:%S")
                     + fraction + zone)
        # Fewer than 6 digits: the fraction says less than the instant, which is cut to it.
        kept = 10 ** (6 - min(digits, 6))
        expected.append(instant - (local.microsecond % kept))
    assert micros(pa.array(texts)) == expected


def test_numbers_are_milliseconds_in_any_type():
    ms = 1714564800123
    cases = [
        (pa.array([ms, -ms, 0, None], pa.int64()), [ms * 1000, -ms * 1000, 0, None]),
        (pa.array([ms, 2**62], pa.int64()), [ms * 1000, None]),  # beyond int64 microseconds
        (pa.array([ms, 2**63 + 5], pa.uint64()), [ms * 1000, None]),
        (pa.array([2**31 - 1, -7], pa.int32()), [(2**31 - 1) * 1000, -7000]),
        (pa.array([1714564800123.5, float("nan"), float("inf"), 1e17]),
         [1714564800123500, None, None, None]),
        (pa.array([str(ms), f" {-ms} ", "+5", "12.25", "1.2.3", "12a"]),
         [ms * 1000, -ms * 1000, 5000, 12250, None, None]),
    ]
    for array, expected in cases:
        assert micros(array) == expected, array.type


@pytest.mark.parametrize("unit, scale", [("s", 10**6), ("ms", 10**3), ("us", 1), ("ns", None)])
@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Paris"])
def test_parquet_timestamps_are_converted_from_their_unit(tmp_path, unit, scale, tz):
    stored = [1714564800, -3, 0, None] if unit != "ns" else [1714564800123456789, -1, -1001, None]
    array = pa.array(stored, pa.timestamp(unit, tz=tz))
    if scale is not None:
        expected = [None if v is None else v * scale for v in stored]
    else:  # nanoseconds: the microsecond they fall in
        expected = [1714564800123456, -1, -2, None]
    assert micros(array) == expected
    # Through a Parquet file: the instants, whatever the zone the column is written in.
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"user_id": ["a", "b", "c", "d"], "item": ["x"] * 4, "ts": array}), path)
    rows, drops, rejected = read_blocks(path, options=STAMPED)
    assert [r[3] for r in rows] == [e for e in expected if e is not None]
    assert drops == {"bad_timestamp": 1} and rejected[0].row_index == 3


def test_values_of_mixed_json_types_read_as_columns_of_each_type_would():
    values = [1714564800123, "2024-05-01T12:00:00Z", 1.5, "1714564800123", True, None, [1],
              "nope", 2**70]
    assert micros_of_values(values).cast(pa.int64()).to_pylist() == [
        1714564800123000, MAY_1, 1500, 1714564800123000, None, None, None, None, None]


def _expected_rows(n):
    return [(f"u{i}".encode(), f"w{i % 3}", 1, MAY_1 + i * 1000) for i in range(n)]


@pytest.mark.parametrize("form", ["number", "text", "mixed"])
def test_jsonl_timestamps_as_numbers_text_or_both(tmp_path, form):
    lines = []
    for i in range(200):
        as_text = form == "text" or (form == "mixed" and i % 2)
        stamp = (datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.timezone.utc)
                 + datetime.timedelta(milliseconds=i)).isoformat().replace("+00:00", "Z")
        lines.append({"user_id": f"u{i}", "item": f"w{i % 3}",
                      "ts": stamp if as_text else MAY_1 // 1000 + i})
    lines.insert(50, {"user_id": "bad1", "item": "x"})  # no timestamp
    lines.insert(90, {"user_id": "bad2", "item": "x", "ts": "yesterday"})
    lines.insert(120, {"user_id": "bad3", "item": "x", "ts": None, "count": -1})  # count first
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    rows, drops, rejected = read_blocks(str(path), options=STAMPED)
    assert rows == _expected_rows(200)
    assert drops == {"bad_timestamp": 2, "bad_count": 1}
    assert [(r.reason, r.line) for r in rejected] == [
        ("bad_timestamp", 51), ("bad_timestamp", 91), ("bad_count", 121)]


def test_csv_timestamps_are_text_milliseconds_or_rfc3339(tmp_path):
    path = tmp_path / "t.csv"
    body = ["user_id,item,ts,count"]
    for i in range(200):
        stamp = str(MAY_1 // 1000 + i) if i % 2 else (
            "2024-05-01T14:00:00.%03d+02:00" % i)
        body.append(f"u{i},w{i % 3},{stamp},")
    body.insert(30, "bad1,x,,1")  # an empty timestamp is missing
    body.insert(60, "bad2,x,2024-05-01,1")
    path.write_text("\n".join(body) + "\n")
    rows, drops, rejected = read_blocks(str(path), options=STAMPED)
    assert rows == _expected_rows(200)
    assert drops == {"bad_timestamp": 2}
    assert [(r.line, r.raw) for r in rejected] == [(31, b"bad1,x,,1"), (61, b"bad2,x,2024-05-01,1")]


def test_parquet_text_and_millisecond_columns(tmp_path):
    for stamps in (pa.array([MAY_1 // 1000 + i for i in range(200)]),
                   pa.array([f"2024-05-01T12:00:00.{i:03d}Z" for i in range(200)])):
        path = str(tmp_path / "t.parquet")
        pq.write_table(pa.table({"user_id": [f"u{i}" for i in range(200)],
                                 "item": [f"w{i % 3}" for i in range(200)], "ts": stamps}), path)
        assert read_blocks(path, options=STAMPED)[:2] == (_expected_rows(200), {})


def test_schema_and_options():
    assert STAMPED.schema == record_schema("text", timestamps=True)
    assert STAMPED.schema.names == ["user_id", "item", "count", TIMESTAMP_FIELD]
    assert STAMPED.schema.field(TIMESTAMP_FIELD).type == pa.int64()
    assert RecordOptions().schema.names == ["user_id", "item", "count"]  # unchanged by default
    assert DROP_REASONS[-1] == "bad_timestamp"
    for bad in ("", 5):
        with pytest.raises(ValueError, match="timestamp_column"):
            RecordOptions(timestamp_column=bad)
    batch = pa.record_batch({"user_id": ["a"], "item": ["x"], "count": [1]})
    with pytest.raises(ValueError, match="timestamp column 'count' must differ"):
        read_blocks("never-read.csv", options=RecordOptions(timestamp_column="count"))
    with pytest.raises(RecordFormatError, match="no timestamp column 'ts'"):
        normalise_batch(batch, RecordColumns(), STAMPED)
    with pytest.raises(RecordFormatError, match="timestamp column 'ts' has type bool"):
        normalise_batch(batch.append_column("ts", pa.array([True])), RecordColumns(), STAMPED)


@pytest.mark.parametrize("format", ["jsonl", "csv", "parquet"])
def test_a_file_without_the_timestamp_column_is_refused_naming_it(tmp_path, format):
    from triehh_beam.io import write_records
    path = str(tmp_path / f"n.{format}")
    write_records(path, [("u", "a", 1)])
    with pytest.raises(RecordFormatError, match=rf"n\.{format}: no timestamp column 'ts'"):
        read_blocks(path, options=STAMPED)
