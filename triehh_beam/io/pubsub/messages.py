"""Device records from stream messages (Pub/Sub), one layer below Beam: ``parse_message`` turns
one message -- JSON (a record object ``{"user_id": ..., "item": ..., "count": ...}`` or a list of
them) or a ``DeviceRecords`` protobuf (protos/triehh_beam/proto/stream.proto) -- into one
normalised ``record_schema`` batch and the records it rejected, with the value rules and drop
reasons of the file readers: JSON goes through the JSON Lines reader itself (``io.records.jsonl``, one
line per record), protobuf fields through ``normalise_block``. A message that is not JSON
holding records, or not a ``DeviceRecords``, is rejected whole (``MESSAGE_REASONS``).
``dead_letter_lines`` renders what a stream rejects -- these ``DeadLetter`` entries, or rows of a
record batch (late records) -- as JSON lines for the dead letter; they hold raw user data.
"""

from __future__ import annotations

import base64
import io
import json
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa

from triehh_beam.io.drops import add_raw, dead_letter_json
from triehh_beam.io.normalise import normalise_block, single_batch
from triehh_beam.io.records import jsonl
from triehh_beam.io.records.reader import normalised_blocks
from triehh_beam.io.schema import DEFAULT_BATCH_SIZE, RecordColumns, RecordFormatError, RecordOptions
from triehh_beam.protocol.items.encoding import ItemKind

__all__ = [
    "MESSAGE_FORMATS",
    "MESSAGE_REASONS",
    "DeadLetter",
    "dead_letter_lines",
    "parse_message",
]

MESSAGE_FORMATS = ("json", "proto")
# Why a whole message is rejected (its records are not counted as records): not JSON holding
# records / not a DeviceRecords; a DeviceRecords of a layout this reader does not know; a
# timestamp attribute that is neither milliseconds nor RFC 3339 (decided in the Beam layer;
# the same name as a record's bad timestamp column value, DROP_REASONS).
MESSAGE_REASONS = ("malformed_message", "unsupported_version", "bad_timestamp")
# DeviceRecords.schema_version values read as this layout (0: the field left out).
_PROTO_VERSIONS = (0, 1)

# One line per record: compact, non-ASCII kept as it is (lone surrogates are handled at encoding).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class DeadLetter(NamedTuple):
    """A rejected message or record, as the dead letter keeps it.

    ``raw``: bytes are the exact message, or the record as one JSON line (JSON messages);
    a ``str`` is a JSON object rendering the record (protobuf records). ``message_id``: the
    Pub/Sub message id, where known. ``record``: the 1-based position of the record in its
    message; None for a whole message (and only then). ``detail``: why, in words, for a whole
    message.
    """

    reason: str
    raw: Union[bytes, str]
    message_id: Optional[str] = None
    record: Optional[int] = None
    detail: Optional[str] = None


def parse_message(
    data: bytes,
    options: RecordOptions = RecordOptions(),
    message_format: str = "json",
    columns: RecordColumns = RecordColumns(),
    message_id: Optional[str] = None,
) -> Tuple[pa.RecordBatch, List[DeadLetter]]:
    """The records of one message, normalised, and what was rejected.

    Args:
      data: the message's payload.
      options: the item kind and value checks, as for files (``RecordOptions``).
      message_format: ``"json"`` or ``"proto"`` (``MESSAGE_FORMATS``).
      columns: JSON only: the keys of a record's user id, item and count (``RecordColumns``).
      message_id: put in the dead-letter entries.

    Returns:
      ``(batch, rejected)``: the kept records in message order as one ``options.schema`` batch
      (possibly empty: ``[]`` or a DeviceRecords without records is a valid message of no
      records), and one ``DeadLetter`` per rejected record (reasons ``DROP_REASONS``, each
      record under its first) or a single one for a rejected message (``MESSAGE_REASONS``).
      Every record of a message that is not rejected whole is either kept or rejected.

    Raises:
      ValueError: an unknown ``message_format``; ``options.timestamp_column`` with protobuf
        messages, whose records have no time of their own (JSON records may: the batch then
        has their ``timestamp`` column, as a file's would).
    """
    if message_format == "json":
        return _parse_json(bytes(data), columns, options, message_id)
    if message_format == "proto":
        if options.timestamp_column is not None:
            raise ValueError(
                "DeviceRecords messages have no timestamp field: their event time is the "
                "message's (leave RecordOptions.timestamp_column unset)"
            )
        return _parse_proto(bytes(data), options, message_id)
    raise ValueError(f"message_format must be one of {MESSAGE_FORMATS}, got {message_format!r}")


def _empty(options: RecordOptions) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=options.schema)


def _rejected_message(
    data: bytes, options: RecordOptions, message_id: Optional[str], reason: str, detail: str
) -> Tuple[pa.RecordBatch, List[DeadLetter]]:
    return _empty(options), [DeadLetter(reason, data, message_id, None, detail)]


# ---- JSON ------------------------------------------------------------------------------------


def _parse_json(
    data: bytes, columns: RecordColumns, options: RecordOptions, message_id: Optional[str]
) -> Tuple[pa.RecordBatch, List[DeadLetter]]:
    # Bytes that are not UTF-8 survive the round trip as lone surrogates, so that the record
    # holding them becomes an invalid_utf8 line again, as in a JSON Lines file.
    try:
        value = json.loads(data.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError) as e:
        return _rejected_message(data, options, message_id, "malformed_message", f"not JSON: {e}")
    if isinstance(value, dict):
        records = [value]
    elif isinstance(value, list):
        records = value
    else:
        return _rejected_message(
            data, options, message_id, "malformed_message",
            f"a JSON {type(value).__name__}, not a record object or a list of them",
        )
    if not records:
        return _empty(options), []
    # One JSON line per record, for the JSON Lines reader: every value rule is its own.
    text = "\n".join(map(_ENCODER.encode, records)) + "\n"
    try:
        lines = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a "\ud800" escape: no UTF-8 form, as in a file
        lines = text.encode("utf-8", "surrogatepass")
    try:
        blocks = list(
            normalised_blocks(
                jsonl.read_jsonl(io.BytesIO(lines), columns, options, DEFAULT_BATCH_SIZE, True),
                columns, options, DEFAULT_BATCH_SIZE, True,
            )
        )
    except RecordFormatError as e:  # no record has the user (or item) key
        return _rejected_message(data, options, message_id, "malformed_message", str(e))
    batches = [block.batch for block in blocks if block.batch.num_rows]
    rejected = [
        # The reader numbers lines from 1: the record's position in the message.
        DeadLetter(row.reason, row.raw, message_id, row.line)
        for block in blocks
        for row in block.rejected
    ]
    return _concat(batches, options), rejected


def _concat(batches: List[pa.RecordBatch], options: RecordOptions) -> pa.RecordBatch:
    if not batches:
        return _empty(options)
    if len(batches) == 1:
        return batches[0]
    return single_batch(pa.Table.from_batches(batches, schema=options.schema).combine_chunks())


# ---- protobuf --------------------------------------------------------------------------------


def _parse_proto(
    data: bytes, options: RecordOptions, message_id: Optional[str]
) -> Tuple[pa.RecordBatch, List[DeadLetter]]:
    from google.protobuf.message import DecodeError

    from triehh_beam.proto import stream_pb2

    try:
        message = stream_pb2.DeviceRecords.FromString(data)
    except DecodeError as e:
        return _rejected_message(
            data, options, message_id, "malformed_message", f"not a DeviceRecords message: {e}"
        )
    if message.schema_version not in _PROTO_VERSIONS:
        return _rejected_message(
            data, options, message_id, "unsupported_version",
            f"DeviceRecords schema_version {message.schema_version}; this reader knows "
            f"{', '.join(map(str, _PROTO_VERSIONS))}",
        )
    records = message.records
    if not records:
        return _empty(options), []
    # The protobuf runtime has no columnar decoder: the fields are read record by record (C++
    # objects), and everything after that is Arrow, a group of records at a time.
    n = len(records)
    users = pa.array([r.user_id for r in records], pa.string())
    counts = pa.array([r.count if r.HasField("count") else 1 for r in records], pa.int64())
    cases = np.array([r.WhichOneof("item") or "" for r in records], dtype=object)
    # Records are normalised in groups, one per item field (one column type each), and put
    # back in message order.
    kept_batches, kept_rows, rejected = [], [], []
    for case in ("text", "data", "number", ""):
        rows = np.flatnonzero(cases == case)
        if not len(rows):
            continue
        items, mismatched = _item_column(case, [records[i] for i in rows], options)
        raw = pa.RecordBatch.from_arrays(
            [users.take(rows), items, counts.take(rows)], names=["user_id", "item", "count"]
        )
        result = normalise_block(raw, RecordColumns(), options, keep_rejected=True)
        failed = {row: reason for row, reason in result.rejected}
        if mismatched:  # what passed the checks before the item's is a bad_item
            failed.update((i, "bad_item") for i in range(len(rows)) if i not in failed)
        else:
            keep = np.ones(len(rows), dtype=bool)
            keep[list(failed)] = False
            kept_batches.append(result.batch)
            kept_rows.append(rows[keep])
        rejected.extend(
            (int(rows[i]), DeadLetter(reason, _render(records[rows[i]]), message_id, int(rows[i]) + 1))
            for i, reason in failed.items()
        )
    batch = _concat([b for b in kept_batches if b.num_rows], options)
    if len(kept_batches) > 1 and batch.num_rows:
        order = np.argsort(np.concatenate(kept_rows), kind="stable")
        batch = batch.take(pa.array(order))
    rejected.sort(key=lambda pair: pair[0])
    assert batch.num_rows + len(rejected) == n
    return batch, [entry for _, entry in rejected]


def _item_column(case: str, records: Sequence, options: RecordOptions) -> Tuple[pa.Array, bool]:
    """The raw item column of records that all set item field ``case`` ("" for none), and
    whether that field cannot hold the job's items (an integer for text or byte items, as a
    JSON number is a bad_item there): then a placeholder that passes stands in, so that the
    checks before the item's still decide those records' reasons."""
    k = len(records)
    if case == "text":
        return pa.array([r.text for r in records], pa.string()), False
    if case == "data":
        return pa.array([r.data for r in records], pa.binary()), False
    if case == "number":
        if options.item_kind is ItemKind.INT:
            return pa.array([r.number for r in records], pa.int64()), False
        return pa.array([b"0"] * k, pa.binary()), True
    return pa.nulls(k, pa.string()), False  # no item: missing_item


def _render(record) -> str:
    """A protobuf record as a JSON object (the protobuf JSON mapping: bytes in base64, 64-bit
    integers as strings), for the dead letter."""
    from google.protobuf import json_format

    return json.dumps(
        json_format.MessageToDict(record, preserving_proto_field_name=True), ensure_ascii=False
    )


# ---- dead letters ----------------------------------------------------------------------------


def dead_letter_lines(entry) -> List[Tuple[str, str]]:
    """``(reason, JSON line)`` for each rejected message or record in ``entry``.

    ``entry`` is a ``DeadLetter``; or ``(reason, batch)`` / ``(reason, batch, source)`` with a
    record batch of records rejected for ``reason`` (late records), one line per row; or a file
    reader's rejected record, ``(file, reason, raw[, line[, row_index]])``, as
    ``drops.dead_letter_json`` writes it (``WriteDeadLetters``' form). Lines::

      {"message_id": "17", "record": 3, "reason": "bad_count", "raw": "{\\"user_id\\":..."}
      {"message_id": "18", "reason": "malformed_message", "detail": "not JSON: ...",
       "raw_base64": "..."}
      {"source": "window=2026-01-01T00:00:00Z", "reason": "late", "row": {"user_id": ...}}

    ``raw`` is the exact bytes as text when they are UTF-8, ``raw_base64`` when not, ``row`` a
    rendered record (bytes values as text when UTF-8, else ``{"base64": ...}``).

    Raises:
      TypeError: for anything else.
    """
    if isinstance(entry, DeadLetter):
        return [(entry.reason, json.dumps(_letter_record(entry), ensure_ascii=False))]
    if (
        isinstance(entry, tuple) and 3 <= len(entry) <= 5 and isinstance(entry[1], str)
        and isinstance(entry[2], (bytes, str))
    ):
        return [(entry[1], dead_letter_json(entry))]
    if isinstance(entry, tuple) and len(entry) in (2, 3) and isinstance(entry[1], pa.RecordBatch):
        reason, batch = entry[0], entry[1]
        head = {"source": entry[2]} if len(entry) == 3 else {}
        return [
            (reason, json.dumps({**head, "reason": reason, "row": _row_values(row)}, ensure_ascii=False))
            for row in batch.to_pylist()
        ]
    raise TypeError(
        "a dead-letter entry is a DeadLetter, (reason, pyarrow.RecordBatch[, source]) or "
        f"(file, reason, raw[, line[, row_index]]), not {entry!r:.80}"
    )


def _letter_record(entry: DeadLetter) -> dict:
    record = {}
    if entry.message_id is not None:
        record["message_id"] = entry.message_id
    if entry.record is not None:
        record["record"] = entry.record
    record["reason"] = entry.reason
    if entry.detail:
        record["detail"] = entry.detail
    add_raw(record, entry.raw)
    return record


def _row_values(row: dict) -> dict:
    return {name: _json_value(value) for name, value in row.items()}


def _json_value(value):
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value
