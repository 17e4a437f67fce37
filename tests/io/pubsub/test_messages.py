"""Records from stream messages (io/pubsub/messages.py): JSON messages follow the JSON Lines reader's
rules exactly (compared with reading the same records as a file), protobuf DeviceRecords the
same value rules per field, and whole messages that hold no records are rejected as such."""

import collections
import json
import os

import pyarrow as pa
import pytest

from tests.io.helpers import CORPUS, EXPECTED, INT32, TEXT
from triehh_beam.io import iter_record_blocks
from triehh_beam.io.pubsub.messages import DeadLetter, dead_letter_lines, parse_message
from triehh_beam.io.schema import RecordColumns, RecordOptions
from triehh_beam.proto import stream_pb2 as pb


def rows(batch):
    return [(r["user_id"], r["item"], r["count"]) for r in batch.to_pylist()]


def reasons(rejected):
    return dict(collections.Counter(entry.reason for entry in rejected))


def read_file(path, options):
    good, drops, positions = [], collections.Counter(), []
    for block in iter_record_blocks(str(path), options=options, keep_rejected=True):
        good += rows(block.batch)
        drops.update({k: v for k, v in block.drops.items() if v})
        positions += [(row.line, row.reason) for row in block.rejected]
    return good, dict(drops), sorted(positions)


def as_list_message(lines):
    """The raw JSON lines (bytes, untouched) as the elements of one JSON list message."""
    return b"[" + b",\n ".join(lines) + b"]"


def is_json(line):
    try:
        json.loads(line.decode("utf-8", "surrogateescape"))
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("name", ["bad.jsonl", "ints.jsonl"])
def test_a_list_message_gives_what_the_jsonl_reader_gives_for_the_same_records(name, tmp_path):
    options, expected_rows, expected_drops = EXPECTED[name]
    lines = [line for line in open(os.path.join(CORPUS, name), "rb").read().split(b"\n") if line.strip()]
    records = [line for line in lines if is_json(line)]  # a broken line cannot be in a list
    broken = len(lines) - len(records)
    (tmp_path / "same.jsonl").write_bytes(b"\n".join(records) + b"\n")
    file_rows, file_drops, file_positions = read_file(tmp_path / "same.jsonl", options)

    batch, rejected = parse_message(as_list_message(records), options, "json", message_id="m1")

    assert batch.schema == options.schema
    assert rows(batch) == file_rows == expected_rows
    assert reasons(rejected) == file_drops
    if broken:  # what the corpus file drops, less the line that is no JSON at all
        assert file_drops == {**expected_drops, "malformed": expected_drops["malformed"] - broken}
    assert all(entry.message_id == "m1" for entry in rejected)
    # The file has one record per line, in message order: lines and record positions agree.
    assert sorted((e.record, e.reason) for e in rejected) == file_positions
    assert batch.num_rows + len(rejected) == len(records)


def test_a_single_object_message_is_one_record_and_counts_default_to_one():
    batch, rejected = parse_message(b'{"user_id": "a", "item": "x"}')
    assert rows(batch) == [(b"a", "x", 1)] and rejected == []
    batch, _ = parse_message(b'[{"user_id": 7, "item": "x", "count": null}, {"user_id": "b", "item": "y", "count": 4}]')
    assert rows(batch) == [(b"7", "x", 1), (b"b", "y", 4)]


def test_json_keys_come_from_record_columns():
    columns = RecordColumns(user="device", item="word", count="n")
    batch, rejected = parse_message(b'[{"device": "d1", "word": "hi", "n": 2}]', TEXT, "json", columns)
    assert rows(batch) == [(b"d1", "hi", 2)] and rejected == []


def test_an_empty_list_is_a_message_of_no_records():
    for payload in (b"[]", b" [ ] "):
        batch, rejected = parse_message(payload)
        assert batch.num_rows == 0 and batch.schema == TEXT.schema and rejected == []


@pytest.mark.parametrize(
    "payload, detail",
    [
        (b"not json", "not JSON"),
        (b'{"user_id": "a", "item": ', "not JSON"),
        (b"", "not JSON"),
        (b'"a string"', "a JSON str"),
        (b"42", "a JSON int"),
        (b"[" * 100000 + b"]" * 100000, "not JSON"),  # deeper than Python's json can nest
        (b'[{"user": "a", "item": "x"}]', "no user id column 'user_id'"),
        (b'{"user_id": "a"}', "no item column 'item'"),
        (b'\xff{"user_id": "a", "item": "x"}', "not JSON"),
    ],
)
def test_a_message_holding_no_records_is_rejected_whole_with_its_bytes(payload, detail):
    batch, rejected = parse_message(payload, message_id="9")
    assert batch.num_rows == 0
    assert len(rejected) == 1
    entry = rejected[0]
    assert (entry.reason, entry.raw, entry.message_id, entry.record) == ("malformed_message", payload, "9", None)
    assert detail in entry.detail


def test_a_record_with_bytes_that_are_not_utf8_is_invalid_utf8_not_a_bad_message():
    batch, rejected = parse_message(b'[{"user_id": "a", "item": "caf\xe9"}, {"user_id": "b", "item": "ok"}]')
    assert rows(batch) == [(b"b", "ok", 1)]
    assert [(e.reason, e.raw) for e in rejected] == [("invalid_utf8", b'{"user_id":"a","item":"caf\xe9"}')]
    batch, rejected = parse_message(b'[{"user_id": "\\ud800", "item": "x"}]')
    assert batch.num_rows == 0 and reasons(rejected) == {"invalid_utf8": 1}


def test_rejected_json_records_carry_the_record_as_one_json_line():
    _, rejected = parse_message(b'[{"user_id": "c", "item": "kiwi", "count": -3}]', message_id="5")
    assert rejected == [DeadLetter("bad_count", b'{"user_id":"c","item":"kiwi","count":-3}', "5", 1)]
    _, rejected = parse_message(b'[{"user_id": "a", "item": "x"}, 5, {"user_id": "b", "item": "caf\xe9"}]')
    assert [(e.record, e.reason) for e in rejected] == [(2, "malformed"), (3, "invalid_utf8")]


def test_unknown_message_format_is_refused():
    with pytest.raises(ValueError, match="message_format"):
        parse_message(b"[]", TEXT, "xml")


def test_json_records_may_carry_a_timestamp_column_protobuf_records_may_not():
    options = RecordOptions(timestamp_column="ts")
    payload = b'[{"user_id": "a", "item": "x", "ts": 1700000000123}, {"user_id": "b", "item": "y", "ts": "soon"}]'
    batch, rejected = parse_message(payload, options)
    assert batch.to_pylist() == [{"user_id": b"a", "item": "x", "count": 1, "timestamp": 1_700_000_000_123_000}]
    assert [(e.record, e.reason) for e in rejected] == [(2, "bad_timestamp")]
    with pytest.raises(ValueError, match="no timestamp field"):
        parse_message(b"", options, "proto")


# ---- protobuf --------------------------------------------------------------------------------


def device_records(*records, version=0):
    return pb.DeviceRecords(records=list(records), schema_version=version).SerializeToString()


R = pb.DeviceRecord


def test_proto_records_keep_message_order_and_default_counts_to_one():
    payload = device_records(
        R(user_id="a", text="x"), R(user_id="b", data="y".encode(), count=3), R(user_id="c", text="z", count=0)
    )
    batch, rejected = parse_message(payload, TEXT, "proto")
    assert rows(batch) == [(b"a", "x", 1), (b"b", "y", 3), (b"c", "z", 0)] and rejected == []


def test_proto_value_rules_are_the_readers_with_reasons_in_their_order():
    payload = device_records(
        R(user_id="a", text="ok"),
        R(user_id="", text="no user"),
        R(user_id="u" * 300, text="long user"),
        R(user_id="b"),  # no item
        R(user_id="c", number=7),  # a number is no text item
        R(user_id="", number=7),  # ...but a missing user comes first
        R(user_id="d", text="x" * 4100),
        R(user_id="e", text="kiwi", count=-1),
        R(user_id="f", data=b"caf\xe9"),  # bytes that are not UTF-8, for a text item
        R(user_id="g", data=b"fine"),
    )
    batch, rejected = parse_message(payload, TEXT, "proto", message_id="p1")
    assert rows(batch) == [(b"a", "ok", 1), (b"g", "fine", 1)]
    assert [(e.record, e.reason) for e in rejected] == [
        (2, "missing_user"), (3, "oversized_user"), (4, "missing_item"), (5, "bad_item"),
        (6, "missing_user"), (7, "oversized_item"), (8, "bad_count"), (9, "invalid_utf8"),
    ]
    assert json.loads(rejected[3].raw) == {"user_id": "c", "number": "7"}
    assert all(e.message_id == "p1" and isinstance(e.raw, str) for e in rejected)


def test_proto_integer_items_from_numbers_and_decimal_text():
    payload = device_records(
        R(user_id="a", number=-5), R(user_id="b", text=" 42 "), R(user_id="c", number=2**31), R(user_id="d", text="x")
    )
    batch, rejected = parse_message(payload, INT32, "proto")
    assert rows(batch) == [(b"a", -5, 1), (b"b", 42, 1)]
    assert [(e.record, e.reason) for e in rejected] == [(3, "bad_item"), (4, "bad_item")]


def test_proto_byte_items():
    options = RecordOptions(item_kind="bytes", bytes_encoding="base64")
    payload = device_records(R(user_id="a", data=b"\x00\xff"), R(user_id="b", text="AAE="), R(user_id="c", text="!"))
    batch, rejected = parse_message(payload, options, "proto")
    assert rows(batch) == [(b"a", b"\x00\xff", 1), (b"b", b"\x00\x01", 1)]
    assert [(e.record, e.reason) for e in rejected] == [(3, "bad_item")]


def test_proto_and_json_give_the_same_batch_for_the_same_records():
    records = [("u1", "apple", 2), ("u2", "pear", None), ("u3", "fig", 1)] * 50
    as_json = json.dumps([{"user_id": u, "item": i, **({"count": c} if c is not None else {})} for u, i, c in records])
    as_proto = device_records(*[R(user_id=u, text=i, **({"count": c} if c is not None else {})) for u, i, c in records])
    from_json, _ = parse_message(as_json.encode(), TEXT, "json")
    from_proto, _ = parse_message(as_proto, TEXT, "proto")
    assert from_json.equals(from_proto)


def test_proto_versions_and_garbage():
    assert parse_message(device_records(R(user_id="a", text="x"), version=1), TEXT, "proto")[0].num_rows == 1
    batch, rejected = parse_message(device_records(version=0), TEXT, "proto")
    assert batch.num_rows == 0 and rejected == []
    payload = device_records(R(user_id="a", text="x"), version=2)
    batch, [entry] = parse_message(payload, TEXT, "proto", message_id="v")
    assert batch.num_rows == 0
    assert (entry.reason, entry.raw, entry.message_id) == ("unsupported_version", payload, "v")
    assert "schema_version 2" in entry.detail
    batch, [entry] = parse_message(b"\xff\xff\xff not protobuf", TEXT, "proto")
    assert batch.num_rows == 0 and entry.reason == "malformed_message"


# ---- dead letters ----------------------------------------------------------------------------


def test_dead_letter_lines_of_entries():
    [(reason, line)] = dead_letter_lines(DeadLetter("malformed_message", b"\xffoops", "3", None, "not JSON"))
    assert reason == "malformed_message"
    assert json.loads(line) == {"message_id": "3", "reason": "malformed_message", "detail": "not JSON",
                                "raw_base64": "/29vcHM="}
    [(_, line)] = dead_letter_lines(DeadLetter("bad_count", b'{"user_id":"c","count":-1}', "4", 2))
    assert json.loads(line) == {"message_id": "4", "record": 2, "reason": "bad_count",
                                "raw": '{"user_id":"c","count":-1}'}
    [(_, line)] = dead_letter_lines(DeadLetter("bad_item", '{"user_id": "c", "number": "7"}'))
    assert json.loads(line) == {"reason": "bad_item", "row": {"user_id": "c", "number": "7"}}


def test_dead_letter_lines_of_late_record_batches():
    batch = pa.RecordBatch.from_pylist(
        [{"user_id": b"u1", "item": "x", "count": 1}, {"user_id": b"\xff", "item": "y", "count": 2}],
        schema=TEXT.schema,
    )
    lines = dead_letter_lines(("late", batch, "window=2026-01-01T00:00:00Z"))
    assert [json.loads(line) for _, line in lines] == [
        {"source": "window=2026-01-01T00:00:00Z", "reason": "late", "row": {"user_id": "u1", "item": "x", "count": 1}},
        {"source": "window=2026-01-01T00:00:00Z", "reason": "late",
         "row": {"user_id": {"base64": "/w=="}, "item": "y", "count": 2}},
    ]
    assert [r for r, _ in dead_letter_lines(("late", batch))] == ["late", "late"]
    with pytest.raises(TypeError, match="dead-letter entry"):
        dead_letter_lines(("late", [1, 2]))


def test_dead_letter_lines_of_a_file_readers_rejected_records():
    [(reason, line)] = dead_letter_lines(("in.jsonl", "bad_count", b'{"count": -1}', 12))
    assert reason == "bad_count"
    assert json.loads(line) == {"file": "in.jsonl", "line": 12, "reason": "bad_count", "raw": '{"count": -1}'}
    [(reason, line)] = dead_letter_lines(("late for window=X", "late", '{"user_id": "u1"}'))
    assert (reason, json.loads(line)) == ("late", {"file": "late for window=X", "reason": "late", "row": {"user_id": "u1"}})
