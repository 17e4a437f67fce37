"""The stream input in Beam (docs/stream_input.md): ``ParseMessages`` turns Pub/Sub messages into
normalised record batches, one per message, with rejected messages and records on a tagged
output, and ``WriteStreamDeadLetters`` writes such entries (and late records) as JSON-lines files
published atomically, one per bundle and reason."""

from __future__ import annotations

import collections
import datetime
import os
import uuid
from typing import Dict, List, Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP, Timestamp

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.io.drops import DROP_REASONS
from triehh_beam.io.pubsub.messages import (MESSAGE_FORMATS, MESSAGE_REASONS, DeadLetter,
                                            dead_letter_lines, parse_message)
from triehh_beam.io.schema import RecordColumns, RecordOptions

__all__ = [
    "RECORDS_TAG",
    "REJECTED_TAG",
    "ParseMessages",
    "WriteStreamDeadLetters",
    "event_time",
    "publish_file",
]

RECORDS_TAG = "records"
REJECTED_TAG = "rejected"


def event_time(value: str) -> Timestamp:
    """A timestamp attribute as an event time, by the rule of Beam's Pub/Sub reader: an integer
    is milliseconds since the Unix epoch, anything else RFC 3339 (``Z`` or an offset; digits
    past microseconds are dropped).

    Raises:
      ValueError: neither, or outside the times Beam can hold.
    """
    try:
        timestamp = Timestamp(micros=int(value) * 1000)
    except ValueError:
        try:
            timestamp = Timestamp.from_rfc3339(value)
        except ValueError as e:
            raise ValueError(f"{value!r} is neither milliseconds since the epoch nor RFC 3339") from e
    if not MIN_TIMESTAMP <= timestamp <= MAX_TIMESTAMP:
        raise ValueError(f"{value!r} is outside the times Beam can hold")
    if timestamp.precision() > Timestamp.MICROS_PRECISION:
        timestamp = timestamp.to_precision(Timestamp.MICROS_PRECISION, allow_lossy_conversion=True)
    return timestamp


class _ParseMessagesDoFn(beam.DoFn):
    """One message in: its records as one batch (none if it kept none), and its rejects."""

    def __init__(
        self,
        options: RecordOptions,
        message_format: str,
        columns: RecordColumns,
        timestamp_attribute: Optional[str],
    ):
        super().__init__()
        self._options = options
        self._format = message_format
        self._columns = columns
        self._attribute = timestamp_attribute

    def setup(self) -> None:
        self._messages = Metrics.counter(METRICS_NAMESPACE, "stream.messages")
        self._records = Metrics.counter(METRICS_NAMESPACE, "stream.records")
        self._rejected = {
            reason: Metrics.counter(METRICS_NAMESPACE, f"stream.rejected.{reason}")
            for reason in dict.fromkeys(DROP_REASONS + MESSAGE_REASONS)
        }

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        data, attributes, message_id = _unpack(element)
        self._messages.inc()
        restamp = None
        if self._attribute is not None and self._attribute in attributes:
            try:
                restamp = event_time(attributes[self._attribute])
            except ValueError as e:
                self._rejected["bad_timestamp"].inc()
                yield beam.pvalue.TaggedOutput(
                    REJECTED_TAG,
                    DeadLetter("bad_timestamp", data, message_id, None, f"attribute {self._attribute}: {e}"),
                )
                return
        batch, rejected = parse_message(data, self._options, self._format, self._columns, message_id)
        records = batch.num_rows
        for entry in rejected:
            self._rejected[entry.reason].inc()
            records += entry.record is not None  # a record, not a whole message
            yield beam.pvalue.TaggedOutput(REJECTED_TAG, entry)
        self._records.inc(records)
        if batch.num_rows:
            yield batch if restamp is None else beam.window.TimestampedValue(batch, restamp)


def _unpack(element):
    """(payload, attributes, message id) of a PubsubMessage or a bare payload."""
    if isinstance(element, (bytes, bytearray, memoryview)):
        return bytes(element), {}, None
    data = getattr(element, "data", None)
    if data is None and not hasattr(element, "attributes"):
        raise TypeError(f"ParseMessages takes PubsubMessage or bytes elements, not {type(element).__name__}")
    return data or b"", dict(element.attributes or {}), getattr(element, "message_id", None)


class ParseMessages(beam.PTransform):
    """Stream messages -> normalised record batches, and dead-letter entries.

    Args:
      options: the item kind and value checks, as for files (``RecordOptions``).
      message_format: ``"json"`` (a record object or a list of them) or ``"proto"`` (a
        ``DeviceRecords``); ``io.pubsub.messages.parse_message`` states the rules.
      columns: JSON only: the keys of a record's user id, item and count.
      timestamp_attribute: None (the default) keeps each element's timestamp (what
        ``ReadFromPubSub`` set). A name: a message carrying that attribute gets its records
        stamped with it (``event_time``: milliseconds or RFC 3339), one without it keeps its
        timestamp (its publish time), and one whose attribute is neither is rejected whole as
        ``bad_timestamp``. Prefer this to ``ReadFromPubSub(timestamp_attribute=...)``, which
        fails the pipeline on such a message instead (Beam 2.77's Python DirectRunner does).

    Input: ``apache_beam.io.gcp.pubsub.PubsubMessage`` or ``bytes`` elements.

    Output: a ``DoOutputsTuple``: ``[RECORDS_TAG]`` one ``pa.RecordBatch`` (``options.schema``)
    per message that kept records, with that message's timestamp and window; ``[REJECTED_TAG]``
    one ``io.pubsub.messages.DeadLetter`` per rejected record or message, for
    ``WriteStreamDeadLetters``.

    Counters (namespace ``triehh``): ``stream.messages`` (messages in), ``stream.records``
    (records read from messages not rejected whole: kept + rejected), ``stream.rejected.<reason>``
    (``DROP_REASONS`` per record, ``MESSAGE_REASONS`` per message).
    """

    def __init__(
        self,
        options: RecordOptions = RecordOptions(),
        message_format: str = "json",
        columns: RecordColumns = RecordColumns(),
        timestamp_attribute: Optional[str] = None,
    ):
        super().__init__()
        if not isinstance(options, RecordOptions):
            raise TypeError(f"options must be RecordOptions, got {type(options).__name__}")
        if message_format not in MESSAGE_FORMATS:
            raise ValueError(f"message_format must be one of {MESSAGE_FORMATS}, got {message_format!r}")
        if message_format == "proto" and options.timestamp_column is not None:
            raise ValueError(
                "protobuf messages have no timestamp field: leave RecordOptions.timestamp_column unset"
            )
        attribute = timestamp_attribute
        if attribute is not None and (not isinstance(attribute, str) or not attribute):
            raise ValueError(f"timestamp_attribute must be a non-empty string or None, got {attribute!r}")
        self._options = options
        self._format = message_format
        self._columns = columns
        self._attribute = timestamp_attribute

    def expand(self, messages: beam.PCollection):
        return messages | "ParseMessage" >> beam.ParDo(
            _ParseMessagesDoFn(self._options, self._format, self._columns, self._attribute)
        ).with_outputs(REJECTED_TAG, main=RECORDS_TAG)


class _WriteLettersDoFn(beam.DoFn):
    """Collects a bundle's dead-letter lines by reason; writes one file per reason at its end."""

    def __init__(self, uri: str):
        super().__init__()
        self._uri = uri.rstrip("/")

    def start_bundle(self) -> None:
        self._lines: Dict[str, List[str]] = collections.defaultdict(list)

    def process(self, entry) -> None:
        for reason, line in dead_letter_lines(entry):
            self._lines[reason].append(line)

    def finish_bundle(self) -> None:
        for reason, lines in self._lines.items():
            _publish(self._uri, reason, "".join(line + "\n" for line in lines).encode("utf-8"))
        self._lines.clear()


def _publish(uri: str, reason: str, data: bytes) -> str:
    """Writes ``uri/<reason>/<UTC time>-<random>.jsonl`` (``publish_file``)."""
    _make_owner_only_dirs(uri)
    return publish_file(FileSystems.join(uri, reason), data)


def _make_owner_only_dirs(directory: str) -> None:
    """Creates a local ``directory`` and its missing parents owner-only (0700) whatever the
    umask (what is written there holds raw records or votes); a directory that exists is left
    as it is (it may be the operator's), and a ``scheme://`` path to its store's access control."""
    if "://" in directory:
        return
    missing = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        directory = os.path.dirname(directory.rstrip("/"))
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # another bundle made it first
            continue
        os.chmod(path, 0o700)


def publish_file(directory: str, data: bytes) -> str:
    """Writes ``directory/<UTC time>-<random>.jsonl`` atomically (a hidden temporary, then a
    rename): a reader sees the whole file or none, no two writes share a name, and names sort by
    the time they were written. Returns the path. A local file is owner-only (0600), in
    directories this makes owner-only (0700), whatever the umask."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    name = f"{stamp}-{uuid.uuid4().hex[:16]}.jsonl"
    temporary = FileSystems.join(directory, f".{name}.tmp")
    path = FileSystems.join(directory, name)
    _make_owner_only_dirs(directory)
    with FileSystems.create(temporary, compression_type="uncompressed") as f:
        f.write(data)
    if "://" not in temporary:
        os.chmod(temporary, 0o600)
    FileSystems.rename([temporary], [path])
    return path


class WriteStreamDeadLetters(beam.PTransform):
    """Writes dead-letter entries as JSON-lines files under ``uri/<reason>/``.

    Each bundle writes one file per reason it holds, ``<UTC time>-<random>.jsonl``, published
    atomically (a hidden temporary renamed into place), so readers never see a partial file;
    a bundle that is retried writes new files (its lines may then appear twice, never not at
    all). Works on batch and streaming runners (no windowing or triggers needed). The lines hold
    raw user data: put ``uri`` where the input may be read, never next to published outputs.

    Args:
      uri: a local directory or any Beam filesystem prefix (``gs://bucket/dead``).

    Input: ``io.pubsub.messages.DeadLetter`` entries (``ParseMessages``' ``[REJECTED_TAG]``);
    ``(reason, pa.RecordBatch)`` or ``(reason, pa.RecordBatch, source)`` for records rejected
    after parsing (late records), one line per row; and a file reader's rejected records,
    ``(file, reason, raw[, line[, row_index]])`` (``io.pubsub.messages.dead_letter_lines``).

    Output: an empty PCollection (the files are the result).
    """

    def __init__(self, uri: str):
        super().__init__()
        if not isinstance(uri, str) or not uri:
            raise ValueError(f"the dead-letter location must be a non-empty string, got {uri!r}")
        self._uri = uri

    def expand(self, entries: beam.PCollection) -> beam.PCollection:
        return entries | "WriteDeadLetterFiles" >> beam.ParDo(_WriteLettersDoFn(self._uri))
