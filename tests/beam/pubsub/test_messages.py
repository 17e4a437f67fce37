"""Tests of triehh_beam.beam.pubsub.messages: ParseMessages on the in-process FnApiRunner and, in
streaming, on the BundleBasedDirectRunner (TestStream, and real Pub/Sub through the emulator);
WriteStreamDeadLetters' files on both."""

from __future__ import annotations

import json
import pathlib
import threading
import time

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.io.gcp.pubsub import PubsubMessage
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing import test_stream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

from tests.pipeline_factory import new_pipeline
from tests.io.helpers import counters
from triehh_beam.beam.pubsub.messages import (RECORDS_TAG, REJECTED_TAG, ParseMessages,
                                              WriteStreamDeadLetters, event_time)
from triehh_beam.io.pubsub.messages import DeadLetter
from triehh_beam.io.schema import RecordOptions
from triehh_beam.proto import stream_pb2 as pb

T0 = 1_700_000_000  # seconds; a message's publish time in the batch tests


def message(payload, message_id, **attributes):
    return PubsubMessage(payload, attributes, message_id=message_id)


def stamped_rows(batch, ts=beam.DoFn.TimestampParam):
    return [(r["user_id"], r["item"], r["count"], float(ts)) for r in batch.to_pylist()]


def letters(root: pathlib.Path):
    """{reason: [entry, ...]} of every dead-letter file under root (and the file names)."""
    found, names = {}, []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            names.append(path.relative_to(root).as_posix())
            found.setdefault(path.parent.name, []).extend(json.loads(line) for line in path.read_text().splitlines())
    return found, names


MESSAGES = [
    message(b'[{"user_id": "a", "item": "x"}, {"user_id": "b", "item": "y", "count": 2}]', "1"),
    message(b'{"user_id": "c", "item": "z"}', "2", ts="1700000100000"),
    message(b'[{"user_id": "d", "item": "w", "count": -1}, {"user_id": "e", "item": "v"}]', "3",
            ts="2023-11-14T22:16:40.5Z"),
    message(b"not json", "4"),
    message(b'{"user_id": "f", "item": "u"}', "5", ts="yesterday"),
    message(b"[]", "6"),
]


def test_parse_messages_outputs_batches_with_event_times_and_dead_letters(tmp_path):
    p = new_pipeline(test=True)
    messages = (
        p
        | "Messages" >> beam.Create(MESSAGES)
        | "PublishTime" >> beam.Map(lambda m: window.TimestampedValue(m, T0))
    )
    parsed = messages | "Parse" >> ParseMessages(RecordOptions(), "json", timestamp_attribute="ts")
    rows = parsed[RECORDS_TAG] | "Rows" >> beam.FlatMap(stamped_rows)
    assert_that(rows, equal_to([
        (b"a", "x", 1, T0), (b"b", "y", 2, T0),  # no attribute: the element's own time
        (b"c", "z", 1, 1_700_000_100.0),  # milliseconds
        (b"e", "v", 1, 1_700_000_200.5),  # RFC 3339
    ]), label="rows")
    reasons = parsed[REJECTED_TAG] | "Reasons" >> beam.Map(lambda e: (e.message_id, e.reason))
    assert_that(reasons, equal_to([
        ("3", "bad_count"), ("4", "malformed_message"), ("5", "bad_timestamp"),
    ]), label="rejected")
    parsed[REJECTED_TAG] | "Dead" >> WriteStreamDeadLetters(str(tmp_path / "dead"))
    result = p.run()
    result.wait_until_finish()

    c = counters(result)
    assert c["stream.messages"] == 6
    assert c["stream.records"] == 5  # 2 + 1 + 2 + ("[]": 0); whole rejected messages hold none
    rejected = [c[f"stream.rejected.{reason}"] for reason in ("bad_count", "malformed_message", "bad_timestamp")]
    assert rejected == [1, 1, 1]
    found, names = letters(tmp_path / "dead")
    assert sorted(found) == ["bad_count", "bad_timestamp", "malformed_message"]
    assert found["malformed_message"] == [{"message_id": "4", "reason": "malformed_message",
                                           "detail": found["malformed_message"][0]["detail"], "raw": "not json"}]
    assert found["bad_timestamp"][0]["raw"] == '{"user_id": "f", "item": "u"}'
    assert "attribute ts" in found["bad_timestamp"][0]["detail"]
    assert all(name.endswith(".jsonl") and "/." not in name for name in names)  # no temporaries left


def test_parse_messages_takes_bare_payloads_and_protobuf():
    payload = pb.DeviceRecords(records=[pb.DeviceRecord(user_id="a", text="x", count=3)]).SerializeToString()
    with new_pipeline(test=True) as p:
        parsed = p | beam.Create([payload, b"\x01garbage"]) | ParseMessages(RecordOptions(), "proto")
        rows = parsed[RECORDS_TAG] | "Rows" >> beam.FlatMap(lambda b: [tuple(r.values()) for r in b.to_pylist()])
        assert_that(rows, equal_to([(b"a", "x", 3)]), label="rows")
        assert_that(parsed[REJECTED_TAG] | beam.Map(lambda e: (e.message_id, e.reason)),
                    equal_to([(None, "malformed_message")]), label="rejected")


def test_parse_messages_refuses_bad_arguments():
    with pytest.raises(ValueError, match="message_format"):
        ParseMessages(RecordOptions(), "avro")
    with pytest.raises(TypeError, match="RecordOptions"):
        ParseMessages({"item_kind": "text"})
    with pytest.raises(ValueError, match="timestamp_attribute"):
        ParseMessages(RecordOptions(), "json", timestamp_attribute="")
    with pytest.raises(ValueError, match="no timestamp field"):
        ParseMessages(RecordOptions(timestamp_column="ts"), "proto")


@pytest.mark.parametrize(
    "value, seconds",
    [("1700000000123", 1_700_000_000.123), ("-5", -0.005), ("2023-11-14T22:13:20Z", 1_700_000_000),
     ("2023-11-14T23:13:20+01:00", 1_700_000_000), ("2023-11-14T22:13:20.123456789Z", 1_700_000_000.123456)],
)
def test_event_time_reads_milliseconds_and_rfc3339(value, seconds):
    assert event_time(value) == Timestamp.of(seconds)


@pytest.mark.parametrize("value", ["yesterday", "1700000000123.5", "", "9" * 30])
def test_event_time_refuses_anything_else(value):
    with pytest.raises(ValueError, match="neither milliseconds|outside the times"):
        event_time(value)


def test_write_stream_dead_letters_writes_late_batches_one_file_per_bundle_and_reason(tmp_path):
    schema = RecordOptions().schema
    late = pa.RecordBatch.from_pylist(
        [{"user_id": b"u1", "item": "x", "count": 1}, {"user_id": b"u2", "item": "y", "count": 1}], schema=schema
    )
    entries = [("late", late, "window=2023-11-14T22:00:00Z"), DeadLetter("malformed_message", b"\xff", "7")]
    for attempt in range(2):  # a second run (a retried bundle) adds files, never replaces them
        with new_pipeline(test=True) as p:
            p | f"Entries{attempt}" >> beam.Create(entries, reshuffle=False) | WriteStreamDeadLetters(str(tmp_path))
    found, names = letters(tmp_path)
    assert len(names) == 4 and len(set(names)) == 4
    assert found["late"] == 2 * [
        {"source": "window=2023-11-14T22:00:00Z", "reason": "late", "row": {"user_id": "u1", "item": "x", "count": 1}},
        {"source": "window=2023-11-14T22:00:00Z", "reason": "late", "row": {"user_id": "u2", "item": "y", "count": 1}},
    ]
    assert found["malformed_message"] == 2 * [{"message_id": "7", "reason": "malformed_message", "raw_base64": "/w=="}]


def test_write_stream_dead_letters_are_owner_only_whatever_the_umask(tmp_path):
    # triehh stream's dead letter (in its state directory) holds raw records: under umask 022 its
    # folders were 0755 and its files 0644. A folder that was there before is left as it was.
    import os
    import stat

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    mine.chmod(0o755)
    entries = [DeadLetter("malformed_message", b"\xff", "7"), DeadLetter("bad_timestamp", b"{}", "8")]
    previous = os.umask(0o022)
    try:
        with new_pipeline(test=True) as p:
            dead = str(mine / "state" / "dead-letter")
            p | beam.Create(entries, reshuffle=False) | WriteStreamDeadLetters(dead)
    finally:
        os.umask(previous)
    made = sorted((mine / "state").rglob("*"))
    # dead-letter/, a folder per reason, a file in each
    assert sum(path.is_file() for path in made) == 2 and len(made) == 5, made
    assert [(str(path), oct(stat.S_IMODE(path.stat().st_mode))) for path in [mine / "state", *made]
            if stat.S_IMODE(path.stat().st_mode) != (0o700 if path.is_dir() else 0o600)] == []
    assert stat.S_IMODE(mine.stat().st_mode) == 0o755


def test_write_stream_dead_letters_refuses_an_empty_location():
    with pytest.raises(ValueError, match="dead-letter location"):
        WriteStreamDeadLetters("")


# ---- streaming -------------------------------------------------------------------------------


def streaming_pipeline():
    return beam.Pipeline(runner=BundleBasedDirectRunner(), options=PipelineOptions(["--streaming"]))


class _AppendRows(beam.DoFn):
    """Appends each batch's rows, its timestamp and window start to a JSON-lines file."""

    _lock = threading.Lock()

    def __init__(self, path):
        self._path = path

    def process(self, batch, ts=beam.DoFn.TimestampParam, w=beam.DoFn.WindowParam):
        start = float(w.start) if isinstance(w, window.IntervalWindow) else None
        with self._lock, open(self._path, "a") as f:
            for r in batch.to_pylist():
                f.write(json.dumps([r["user_id"].decode(), r["item"], r["count"], float(ts), start]) + "\n")


def test_parse_messages_and_dead_letters_in_streaming_on_the_bundle_based_direct_runner(tmp_path):
    out = tmp_path / "rows.jsonl"
    stream = (
        test_stream.TestStream()
        .add_elements([window.TimestampedValue(m, T0 + 5) for m in MESSAGES[:3]])
        .advance_watermark_to(T0 + 60)
        .add_elements([window.TimestampedValue(m, T0 + 65) for m in MESSAGES[3:]])
        .advance_watermark_to_infinity()
    )
    p = streaming_pipeline()
    parsed = p | stream | ParseMessages(RecordOptions(), "json", timestamp_attribute="ts")
    windowed = parsed[RECORDS_TAG] | beam.WindowInto(window.FixedWindows(60))
    windowed | beam.ParDo(_AppendRows(str(out)))
    parsed[REJECTED_TAG] | WriteStreamDeadLetters(str(tmp_path / "dead"))
    p.run().wait_until_finish()

    rows = sorted(tuple(json.loads(line)) for line in out.read_text().splitlines())
    assert rows == [
        ("a", "x", 1, T0 + 5, T0 - T0 % 60), ("b", "y", 2, T0 + 5, T0 - T0 % 60),
        ("c", "z", 1, T0 + 100, T0 + 100 - (T0 + 100) % 60),
        ("e", "v", 1, T0 + 200.5, T0 + 200 - (T0 + 200) % 60),
    ]
    found, _ = letters(tmp_path / "dead")
    assert {reason: len(entries) for reason, entries in found.items()} == {
        "bad_count": 1, "malformed_message": 1, "bad_timestamp": 1,
    }


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def _cancel(result, emulator, topic):
    """Cancels a streaming job promptly: the runner's one worker is usually blocked in a 30-s
    pull, which a message (an empty one, no records) wakes up."""
    stopper = threading.Thread(target=result.cancel, daemon=True)
    stopper.start()
    for _ in range(50):
        emulator.publish(topic, b"[]")
        stopper.join(0.2)
        if not stopper.is_alive():
            return
    raise AssertionError("cancel did not return")


def test_messages_from_the_pubsub_emulator(pubsub_emulator, tmp_path):
    paths = pubsub_emulator.topic("parse")
    out = tmp_path / "rows.jsonl"
    out.touch()
    p = streaming_pipeline()
    parsed = (
        p
        | beam.io.ReadFromPubSub(subscription=paths["subscription"], with_attributes=True)
        | ParseMessages(RecordOptions(), "json", timestamp_attribute="ts")
    )
    parsed[RECORDS_TAG] | beam.ParDo(_AppendRows(str(out)))
    parsed[REJECTED_TAG] | WriteStreamDeadLetters(str(tmp_path / "dead"))
    result = p.run()
    failures = []

    def watch():
        try:
            result.wait_until_finish()
        except Exception as e:  # the job failed: the test reports it
            failures.append(e)

    threading.Thread(target=watch, daemon=True).start()
    try:
        before = time.time()
        for m in MESSAGES:
            pubsub_emulator.publish(paths["topic"], m.data, **m.attributes)
        after = time.time()
        _wait_for(lambda: len(out.read_text().splitlines()) >= 4 or failures, 30, "the records")
        _wait_for(lambda: len(letters(tmp_path / "dead")[0]) == 3 or failures, 30, "the dead letters")
    finally:
        _cancel(result, pubsub_emulator, paths["topic"])
    assert not failures
    rows = sorted(json.loads(line) for line in out.read_text().splitlines())
    assert [r[:3] for r in rows] == [["a", "x", 1], ["b", "y", 2], ["c", "z", 1], ["e", "v", 1]]
    assert before - 1 <= rows[0][3] == rows[1][3] <= after + 1  # no attribute: the publish time
    assert (rows[2][3], rows[3][3]) == (1_700_000_100.0, 1_700_000_200.5)
    found, _ = letters(tmp_path / "dead")
    assert {reason: len(entries) for reason, entries in found.items()} == {
        "bad_count": 1, "malformed_message": 1, "bad_timestamp": 1,
    }
    ids = [entries[0]["message_id"] for entries in found.values()]
    assert len(set(ids)) == 3 and all(isinstance(i, str) and i for i in ids)  # the emulator's ids
    assert found["malformed_message"][0]["raw"] == "not json"
