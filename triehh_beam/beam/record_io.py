"""Device records in, normalised Arrow record batches out; bad records counted, never fatal.

Device records are ``(user_id, item[, count])`` rows in JSON Lines, CSV or Parquet files, local
or on ``gs://`` (every path goes through Beam's ``FileSystems``). ``ReadRecordBatches`` reads
them as ``pyarrow.RecordBatch`` elements of at most ``batch_size`` rows, all with one schema,
``record_schema(kind)`` (``RECORD_SCHEMA`` for text items):

* ``user_id: binary`` -- the user's canonical id bytes, exactly ``sampling.user_id_bytes``:
  strings as UTF-8, integers as their decimal digits (so ``42`` and ``"42"`` are one user),
  binary as is. CSV cells are text, so a CSV ``007`` is the user ``"007"``, never ``7``.
* ``item`` -- by the item kind (``RecordOptions.item_kind``, the encoder's kind):
  ``string`` for text items (as read); ``binary`` for byte items (Parquet binary as is; text
  cells decoded from base64 or hex with ``bytes_encoding``, or their UTF-8 bytes without it);
  ``int64`` for integer items (Parquet/JSON integers, or decimal text: ``" -42 "``, ``"+7"``).
* ``count: int64`` -- the record's local count, ``1`` where the file has no count column.

**Bad records.** Each record is checked in this order, and a record that fails is dropped and
counted under the first reason it fails (``DROP_REASONS``; Beam counters
``triehh/records_<reason>``, next to ``triehh/records_read``), so ``records_read`` is the rows
output plus all the drops:

* ``malformed``: a JSON line that is not a JSON object, a CSV row with the wrong number of
  fields;
* ``invalid_utf8``: a JSON Lines or CSV line that is not UTF-8, a JSON string with a lone
  surrogate escape (``"\\ud800"``), a Parquet string column value that is not UTF-8, or a
  Parquet binary item that is not UTF-8 when items are text;
* ``missing_user`` / ``bad_user`` / ``oversized_user``: no, a null or an empty user id / a JSON
  user id that is neither a string nor an integer (a float, a boolean, an object) / an id of
  more than ``max_user_bytes`` bytes (default 256);
* ``missing_item`` / ``bad_item`` / ``oversized_item``: no, a null or an empty item / an item
  of the wrong JSON type (not a string; for integer items not an integer or decimal string),
  invalid base64 or hex, or an integer that is not one or outside the ``int_bits`` range / an
  item of more than ``max_item_bytes`` bytes (default 4096; UTF-8 bytes of a text item, the
  decoded bytes of a byte item);
* ``bad_count``: a null (CSV, Parquet), negative, non-integer or out-of-range (>= 2^63) count.

Whole files are counted too: ``triehh/files_read`` and ``triehh/files_empty`` (a file with no
records at all -- zero bytes, a header only, zero Parquet rows -- is not an error, it is
reported). ``bad_fraction`` turns the counters of a job into the share of bad records, and
``describe_drops`` into one line for an operator; counters never carry content.

**Dead letters.** ``ReadRecordBatches(..., dead_letter=True)`` also outputs every rejected
record, tagged ``REJECTED_TAG``, as ``(file, reason, raw)``: ``raw`` is the exact line (bytes)
for JSON Lines and for CSV rows rejected by the parser or for UTF-8, and a JSON rendering of
the parsed row (str) for Parquet rows and CSV rows rejected by a value check.
``WriteDeadLetters`` writes them as JSON lines. Dead letters hold raw user data: protect them
like the input. Only rejected rows are rendered in Python; the good path stays vectorised.

**Unreadable files.** A file is refused with ``RecordFormatError`` (a ``ValueError``) naming it
when it cannot be parsed in its format at all (not Parquet, a corrupt or truncated compressed
stream, a CSV header that is not UTF-8), lacks the user or item column, or has a column of a
type that cannot hold ids, items or counts (a float user id column, a float count column); the
message names the column. A missing file raises ``FileNotFoundError``. Nothing else escapes
for bad input: Arrow, zlib, lzma, bz2, zstd, csv and decoding errors are all turned into
``RecordFormatError``. Runners with worker processes re-raise it as a ``RuntimeError`` holding
the worker's traceback: ``record_format_error_from`` recovers the one-line message.

The conversion is vectorised (``pyarrow.compute``, numpy), per batch. Only JSON Lines blocks
that Arrow cannot parse (mixed id types, a broken line) take a per-line Python path, and only
for the 64 KiB sub-blocks that hold the problem (see ``_JsonLinesParser``); CSV blocks holding a
line that is not UTF-8 take one per-line pass to take such lines out. ``normalise_batch`` is the
pure core, usable without Beam; ``iter_record_batches`` (and ``iter_record_blocks``, which also
returns the rejected rows) reads one file without Beam; ``binary_buffers`` hands a batch's
``user_id`` column to the numpy hashing (``keyed_hash.siphash24_batch``) without copying the
bytes.
"""

from __future__ import annotations

import base64
import codecs
import collections
import csv
import dataclasses
import functools
import io
import json
import lzma
import math
import os
import re
import struct
import threading
import zlib
from typing import (
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from triehh_beam.protocol.encoding import ItemEncoder, ItemKind

try:  # Beam's zstd support; its errors are not OSError or ValueError.
    from zstandard import ZstdError as _ZstdError
except ImportError:  # pragma: no cover - zstandard is a Beam dependency
    _ZstdError = zlib.error

__all__ = [
    "BYTES_ENCODINGS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_ITEM_BYTES",
    "DEFAULT_MAX_USER_BYTES",
    "DROP_REASONS",
    "FILE_COUNTERS",
    "FORMATS",
    "RECORDS_TAG",
    "RECORD_SCHEMA",
    "REJECTED_TAG",
    "ReadRecordBatches",
    "ReadRecordFileDoFn",
    "RecordBlock",
    "RecordColumns",
    "RecordFormatError",
    "RecordOptions",
    "RejectedRow",
    "WriteDeadLetters",
    "bad_fraction",
    "binary_buffers",
    "dead_letter_json",
    "describe_drops",
    "record_format_error_from",
    "infer_format",
    "iter_record_batches",
    "iter_record_blocks",
    "normalise_batch",
    "record_schema",
    "write_records",
]

METRICS_NAMESPACE = "triehh"
DEFAULT_BATCH_SIZE = 65536
FORMATS = ("jsonl", "csv", "parquet")
BYTES_ENCODINGS = ("base64", "hex")
DEFAULT_MAX_USER_BYTES = 256
DEFAULT_MAX_ITEM_BYTES = 4096

# In the order records are checked; a dropped record is counted under its first reason.
DROP_REASONS = (
    "malformed",
    "invalid_utf8",
    "missing_user",
    "bad_user",
    "oversized_user",
    "missing_item",
    "bad_item",
    "oversized_item",
    "bad_count",
)
# Per-file counters (not records, never bad: an empty file is reported, not refused).
FILE_COUNTERS = ("files_read", "files_empty")

# The tags of ReadRecordBatches' outputs with dead_letter=True.
RECORDS_TAG = "records"
REJECTED_TAG = "rejected"

_ITEM_TYPES = {ItemKind.TEXT: pa.string(), ItemKind.BYTES: pa.binary(), ItemKind.INT: pa.int64()}


def record_schema(item_kind: Union[ItemKind, str] = ItemKind.TEXT) -> pa.Schema:
    """The schema of normalised batches for items of ``item_kind`` (item string/binary/int64)."""
    return _record_schema(ItemKind(item_kind))


@functools.lru_cache(maxsize=None)
def _record_schema(item_kind: ItemKind) -> pa.Schema:
    return pa.schema(
        [
            pa.field("user_id", pa.binary(), nullable=False),
            pa.field("item", _ITEM_TYPES[item_kind], nullable=False),
            pa.field("count", pa.int64(), nullable=False),
        ]
    )


RECORD_SCHEMA = record_schema(ItemKind.TEXT)

_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}

# CSV and JSON Lines files are parsed this many bytes at a time (then cut to batch_size rows).
_BLOCK_BYTES = 4 << 20
# A JSON Lines block Arrow refuses is retried in sub-blocks of about this size.
_SUB_BLOCK_BYTES = 64 << 10
_PEEK_BYTES = 64 << 10
_INT64_MAX = 2**63 - 1
# Decimal strings of up to 18 digits always fit in int64.
_COUNT_TEXT = r"^[0-9]{1,18}$"
_INT_TEXT = r"^[+-]?[0-9]+$"
# The characters JSON counts as white space (a line of only these is skipped).
_JSON_SPACE = b" \t\r"


class RecordFormatError(ValueError):
    """A records file that cannot be read as device records; the message names the file."""


_REMOTE_ERROR = re.compile(r"RecordFormatError: (.+?)(?: \[while running '[^']*'\])?\s*$", re.M)


def record_format_error_from(error: BaseException) -> Optional[RecordFormatError]:
    """The RecordFormatError behind a failed Beam job, or None if it failed for another reason.

    In-process runners re-raise a worker's RecordFormatError as it is; runners with separate
    worker processes (``--direct_running_mode=multi_processing``, the portable runner, Flink,
    Dataflow) raise a ``RuntimeError`` whose text holds the worker's traceback. Either way this
    returns a RecordFormatError with the worker's message (naming the file), for the caller to
    report in one line instead of a traceback; ``None`` when ``error`` is about something else.
    """
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, RecordFormatError):
            return error
        found = _REMOTE_ERROR.findall(str(error).replace("\\n", "\n"))
        if found:
            return RecordFormatError(found[-1].replace("\\'", "'"))
        error = error.__cause__ or error.__context__
    return None


@dataclasses.dataclass(frozen=True)
class RecordColumns:
    """The names of the record columns in the input files.

    Args:
      user: the user id column (required in every file).
      item: the item column (required in every file).
      count: the optional local-count column; ``None`` to ignore counts (every record is 1).

    Raises:
      ValueError: for empty or repeated names.
    """

    user: str = "user_id"
    item: str = "item"
    count: Optional[str] = "count"

    def __post_init__(self):
        for role, name in (("user", self.user), ("item", self.item), ("count", self.count)):
            if name is None and role == "count":
                continue
            if not isinstance(name, str) or not name:
                raise ValueError(f"the {role} column name must be a non-empty string, got {name!r}")
        names = [n for n in (self.user, self.item, self.count) if n is not None]
        if len(set(names)) != len(names):
            raise ValueError(f"the user, item and count columns must differ, got {names}")


@dataclasses.dataclass(frozen=True)
class RecordOptions:
    """How record values are read and which are too big (what the reader checks).

    Args:
      item_kind: ``ItemKind.TEXT``, ``BYTES`` or ``INT``: the type of the output item column
        (``record_schema``). Use ``for_encoder`` to match an ``ItemEncoder``.
      int_bits: integer items only: values outside ``[-2^(w-1), 2^(w-1) - 1]`` are
        ``bad_item`` (default 64, the whole int64 range).
      bytes_encoding: byte items only: ``"base64"`` (RFC 4648 standard alphabet, padded to a
        multiple of 4 characters with at most two ``=`` at the end, no white space: stricter
        than Python's decoder, which ignores extra padding) or ``"hex"`` (an even number of hex
        digits, either case, no separators) to decode items
        given as text (every CSV and JSON item, a Parquet string column); ``None`` takes a text
        item's UTF-8 bytes. Binary Parquet columns are always taken as they are. Text that does
        not decode is ``bad_item``.
      max_user_bytes: ids longer than this (canonical bytes) are ``oversized_user``.
      max_item_bytes: items longer than this (UTF-8 bytes of text, decoded bytes) are
        ``oversized_item``.

    Raises:
      ValueError: for an unknown kind or encoding, an encoding for items that are not bytes,
        ``int_bits`` outside 1..64 or given for items that are not integers, limits below 1.
    """

    item_kind: ItemKind = ItemKind.TEXT
    int_bits: Optional[int] = None
    bytes_encoding: Optional[str] = None
    max_user_bytes: int = DEFAULT_MAX_USER_BYTES
    max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES

    def __post_init__(self):
        kind = ItemKind(self.item_kind)
        object.__setattr__(self, "item_kind", kind)
        if self.bytes_encoding is not None:
            if self.bytes_encoding not in BYTES_ENCODINGS:
                raise ValueError(
                    f"bytes_encoding must be one of {BYTES_ENCODINGS} or None, "
                    f"got {self.bytes_encoding!r}"
                )
            if kind is not ItemKind.BYTES:
                raise ValueError(f"bytes_encoding applies to byte items only, not {kind.value}")
        if kind is ItemKind.INT:
            bits = 64 if self.int_bits is None else self.int_bits
            if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 64:
                raise ValueError(f"int_bits must be an integer from 1 to 64, got {bits!r}")
            object.__setattr__(self, "int_bits", bits)
        elif self.int_bits not in (None, 0):
            raise ValueError(f"int_bits applies to integer items only, not {kind.value}")
        else:
            object.__setattr__(self, "int_bits", None)
        for name in ("max_user_bytes", "max_item_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    @classmethod
    def for_encoder(
        cls,
        encoder: ItemEncoder,
        bytes_encoding: Optional[str] = None,
        max_user_bytes: int = DEFAULT_MAX_USER_BYTES,
        max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES,
    ) -> "RecordOptions":
        """The options that read items of ``encoder``'s kind (and integer width)."""
        return cls(
            item_kind=encoder.kind,
            int_bits=encoder.int_bits,
            bytes_encoding=bytes_encoding,
            max_user_bytes=max_user_bytes,
            max_item_bytes=max_item_bytes,
        )

    @property
    def schema(self) -> pa.Schema:
        return record_schema(self.item_kind)


class RejectedRow(NamedTuple):
    """A record dropped by the reader: why, and the record itself.

    ``raw`` is the exact input line (``bytes``, without its line break) where the reader has
    it, or a JSON object rendering the parsed row (``str``) where it does not (Parquet rows, CSV
    rows rejected by a value check): strings as strings, binary and text that is not UTF-8 as
    ``{"base64": ...}``.
    """

    reason: str
    raw: Union[bytes, str]


class RecordBlock(NamedTuple):
    """What ``iter_record_blocks`` yields: good rows, drop counts, and the rejected rows."""

    batch: pa.RecordBatch
    drops: Dict[str, int]
    rejected: Tuple[RejectedRow, ...]


# ---------------------------------------------------------------------------------------------
# Buffers for the numpy hashing.


def binary_buffers(array: Union[pa.Array, pa.ChunkedArray]) -> Tuple[np.ndarray, np.ndarray]:
    """Arrow-layout buffers of a binary or string array: ``(data uint8, offsets int64)``.

    Value ``i`` is ``data[offsets[i]:offsets[i + 1]]``, ``offsets[0] == 0`` and ``len(offsets)
    == len(array) + 1`` -- also for a slice of a larger array, whose buffers start before and end
    after its values. ``data`` is a read-only view of the Arrow buffer (no copy); ``offsets`` is
    a view for an unsliced ``large_binary``/``large_string`` array and a small copy otherwise
    (int32 offsets are widened, a slice's are rebased to 0). A null value spans whatever its
    offsets say (normally nothing); normalised batches hold none.

    Raises:
      TypeError: for an array that is not binary or string.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    kind = array.type
    if pa.types.is_binary(kind) or pa.types.is_string(kind):
        offset_type = np.int32
    elif pa.types.is_large_binary(kind) or pa.types.is_large_string(kind):
        offset_type = np.int64
    elif _is_view(kind):
        array, offset_type = array.cast(pa.large_binary()), np.int64
    else:
        raise TypeError(f"binary_buffers needs a binary or string array, not {kind}")
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64)
    _, offsets_buffer, data_buffer = array.buffers()
    itemsize = np.dtype(offset_type).itemsize
    offsets = np.frombuffer(
        offsets_buffer, dtype=offset_type, count=n + 1, offset=array.offset * itemsize
    )
    start, end = int(offsets[0]), int(offsets[-1])
    if end > start:
        data = np.frombuffer(data_buffer, dtype=np.uint8, count=end - start, offset=start)
    else:
        data = np.zeros(0, dtype=np.uint8)
    offsets = offsets.astype(np.int64, copy=False)
    if start:
        offsets = offsets - start
    # Arrow arrays are immutable, but their buffers can be exported writable: guard the views.
    data.flags.writeable = False
    offsets.flags.writeable = False
    return data, offsets


def _is_view(kind: pa.DataType) -> bool:
    # binary_view/string_view exist from pyarrow 16; setup.py allows 15.
    checks = (getattr(pa.types, "is_binary_view", None), getattr(pa.types, "is_string_view", None))
    return any(check is not None and check(kind) for check in checks)


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or (
        _is_view(kind) and "string" in str(kind)
    )


def _is_bytes(kind: pa.DataType) -> bool:
    return (
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
        or (_is_view(kind) and "binary" in str(kind))
    )


# ---------------------------------------------------------------------------------------------
# The pure core: raw columns -> normalised columns and drop counts.


def normalise_batch(
    data: Union[pa.RecordBatch, pa.Table],
    columns: RecordColumns = RecordColumns(),
    options: RecordOptions = RecordOptions(),
) -> Tuple[pa.RecordBatch, Dict[str, int]]:
    """A batch of raw records as a ``record_schema`` batch, and how many rows were dropped why.

    Args:
      data: raw records; the user and item columns must be present, the count column may be
        absent (every count is then 1). User ids may be integers, strings or binary; items
        strings (or binary holding UTF-8) for text, binary or strings for bytes, integers or
        decimal strings for integers; counts integers or decimal text (CSV). Dictionary
        columns are decoded. Other columns are ignored.
      columns: the column names.
      options: the item kind and the checks (``RecordOptions``).

    Returns:
      ``(batch, drops)``: the kept rows, in input order, and the number of dropped rows per
      reason, each dropped row counted under its first reason (``DROP_REASONS`` order). The
      keys ``missing_user``, ``missing_item`` and ``bad_count`` are always there; the other
      reasons a batch can fail (``invalid_utf8``, ``oversized_user``, ``bad_item``,
      ``oversized_item``) appear when their count is not zero. When nothing is dropped, the
      output shares the input's buffers where the types allow.

    Raises:
      RecordFormatError: a required column is missing, or a column has a type that cannot hold
        what it should (a float user id, a float count); the message names the column.
    """
    parts, drops = [], collections.Counter()
    for batch in _as_batches(data):
        part = _normalise_one(batch, columns, options)
        parts.append(part.batch)
        drops.update(part.drops)
    if len(parts) == 1:
        batch = parts[0]
    else:
        table = pa.Table.from_batches(parts, schema=options.schema).combine_chunks()
        batch = _single_batch(table)
    report = {reason: drops[reason] for reason in _ALWAYS_REPORTED}
    report.update({r: drops[r] for r in DROP_REASONS if drops[r] and r not in report})
    return batch, report


_ALWAYS_REPORTED = ("missing_user", "missing_item", "bad_count")


def _as_batches(data) -> List[pa.RecordBatch]:
    if isinstance(data, pa.RecordBatch):
        return [data]
    if isinstance(data, pa.Table):
        return data.to_batches() or [pa.RecordBatch.from_pylist([], schema=data.schema)]
    raise TypeError(f"expected a pyarrow RecordBatch or Table, not {type(data).__name__}")


def _single_batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    if len(batches) > 1:  # only past 2 GiB of ids or items in one table
        raise ValueError("too much data for one record batch; normalise the batches one by one")
    return batches[0]


def _require_columns(names: Sequence[str], columns: RecordColumns) -> None:
    for role, name in (("user id", columns.user), ("item", columns.item)):
        if name not in names:
            raise RecordFormatError(f"no {role} column {name!r} (the columns are {list(names)})")


def _check_column_types(schema: pa.Schema, columns: RecordColumns, options: RecordOptions) -> None:
    """Refuses a schema whose user, item or count column cannot hold what it should.

    Raises:
      RecordFormatError: a missing user or item column, or a column of an unusable type (the
        message names the column and its type).
    """
    _require_columns(schema.names, columns)
    _check_user_type(_value_type(schema.field(columns.user).type), columns.user)
    _check_item_type(_value_type(schema.field(columns.item).type), columns.item, options)
    if columns.count is not None and columns.count in schema.names:
        _check_count_type(_value_type(schema.field(columns.count).type), columns.count)


def _value_type(kind: pa.DataType) -> pa.DataType:
    return kind.value_type if pa.types.is_dictionary(kind) else kind


def _check_user_type(kind: pa.DataType, name: str) -> None:
    usable = pa.types.is_null(kind) or pa.types.is_integer(kind)
    if not (usable or _is_text(kind) or _is_bytes(kind)):
        raise RecordFormatError(
            f"the user id column {name!r} has type {kind}; user ids are strings, integers or binary"
        )


def _check_item_type(kind: pa.DataType, name: str, options: RecordOptions) -> None:
    if pa.types.is_null(kind):
        return
    item_kind = options.item_kind
    if item_kind is ItemKind.TEXT and not (_is_text(kind) or _is_bytes(kind)):
        raise RecordFormatError(f"the item column {name!r} has type {kind}; items are strings")
    if item_kind is ItemKind.BYTES and not (_is_text(kind) or _is_bytes(kind)):
        raise RecordFormatError(
            f"the item column {name!r} has type {kind}; byte items are binary, or text "
            f"(base64 or hex with bytes_encoding)"
        )
    if item_kind is ItemKind.INT and not (
        pa.types.is_integer(kind) or _is_text(kind) or _is_bytes(kind)
    ):
        raise RecordFormatError(
            f"the item column {name!r} has type {kind}; integer items are integers or decimal text"
        )


def _check_count_type(kind: pa.DataType, name: str) -> None:
    if not (pa.types.is_null(kind) or pa.types.is_integer(kind) or _is_text(kind)):
        raise RecordFormatError(f"the count column {name!r} has type {kind}; counts are integers")


class _Normalised(NamedTuple):
    batch: pa.RecordBatch
    drops: Dict[str, int]  # every reason the normalisation checks, zeros included
    rejected: List[Tuple[int, str]]  # (row index, reason), when asked for


# (reason, ok mask or None for "all rows pass") in the order the checks apply.
_Checks = List[Tuple[str, Optional[pa.Array]]]


def _normalise_one(
    batch: pa.RecordBatch,
    columns: RecordColumns,
    options: RecordOptions = RecordOptions(),
    keep_rejected: bool = False,
    utf8_checked: bool = False,
) -> _Normalised:
    """Normalises one batch; ``utf8_checked``: its text is known to be UTF-8 (CSV, JSON)."""
    names = batch.schema.names
    _require_columns(names, columns)
    n = batch.num_rows
    user_raw = _decoded(batch.column(columns.user))
    item_raw = _decoded(batch.column(columns.item))
    has_count = columns.count is not None and columns.count in names
    count_raw = _decoded(batch.column(columns.count)) if has_count else None

    # Arrow's Parquet reader does not check UTF-8; the CSV and JSON Lines readers take out the
    # lines that are not UTF-8, so their batches need no second check.
    utf8_ok = None if utf8_checked else _text_utf8_ok(user_raw, item_raw, count_raw, options)
    users = _normalise_users(user_raw, columns.user)
    items, item_present, item_ok = _normalise_items(item_raw, columns.item, options)
    if has_count:
        counts, count_ok = _normalise_counts(count_raw, columns.count)
    else:
        counts, count_ok = pa.array(np.ones(n, dtype=np.int64)), None
    item_size_ok = None
    if options.item_kind is not ItemKind.INT:
        item_size_ok = _at_most(items, options.max_item_bytes)

    checks: _Checks = [
        ("invalid_utf8", utf8_ok),
        ("missing_user", _nonempty(users)),
        ("oversized_user", _at_most(users, options.max_user_bytes)),
        ("missing_item", item_present),
        ("bad_item", item_ok),
        ("oversized_item", item_size_ok),
        ("bad_count", count_ok),
    ]
    # Each dropped row is counted once, under the first check it fails.
    drops = {}
    keep, kept = None, n
    for reason, ok in checks:
        if ok is None:
            drops[reason] = 0
            continue
        if ok.null_count:
            ok = pc.fill_null(ok, False)
        keep = ok if keep is None else pc.and_(keep, ok)
        now_kept = _true_count(keep)
        drops[reason], kept = kept - now_kept, now_kept
    arrays = [users, items, counts]
    rejected: List[Tuple[int, str]] = []
    if kept < n:
        arrays = [pc.filter(array, keep) for array in arrays]
        if keep_rejected:
            rejected = _first_failures(checks, n)
    good = pa.RecordBatch.from_arrays(arrays, schema=options.schema)
    return _Normalised(good, drops, rejected)


def _text_utf8_ok(
    users: pa.Array, items: pa.Array, counts: Optional[pa.Array], options: RecordOptions
) -> Optional[pa.Array]:
    """True where every text value of the row is UTF-8 (None if all rows are): string columns,
    and a binary item column when items are text."""
    text_items = _is_text(items.type) or (
        options.item_kind is ItemKind.TEXT and _is_bytes(items.type)
    )
    result = None
    for array, is_text in (
        (users, _is_text(users.type)),
        (items, text_items),
        (counts, counts is not None and _is_text(counts.type)),
    ):
        ok = _utf8_ok(array) if is_text else None
        if ok is not None:
            result = ok if result is None else pc.and_(result, ok)
    return result


def _first_failures(checks: _Checks, n: int) -> List[Tuple[int, str]]:
    """(row, first failing reason) of every row that fails a check, in row order."""
    reason_of = np.full(n, -1, dtype=np.int16)
    for index, (_, ok) in enumerate(checks):
        if ok is None:
            continue
        failed = ~pc.fill_null(ok, False).to_numpy(zero_copy_only=False)
        reason_of[failed & (reason_of < 0)] = index
    rows = np.flatnonzero(reason_of >= 0)
    return [(int(i), checks[reason_of[i]][0]) for i in rows]


def _true_count(mask: pa.Array) -> int:
    return int(pc.sum(mask).as_py() or 0)


def _decoded(array: pa.Array) -> pa.Array:
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _nonempty(array: pa.Array) -> pa.Array:
    """True where the value is non-null and non-empty (binary or string)."""
    return pc.fill_null(pc.greater(pc.binary_length(array), 0), False)


def _at_most(array: pa.Array, limit: int) -> Optional[pa.Array]:
    """True where the value has at most ``limit`` bytes (or is null); None if all do."""
    lengths = pc.binary_length(array)
    longest = pc.max(lengths).as_py()
    if longest is None or longest <= limit:
        return None
    return pc.fill_null(pc.less_equal(lengths, limit), True)


def _as_binary(array: pa.Array) -> pa.Array:
    """A string or binary array as ``binary`` (a zero-copy cast for string and binary)."""
    if pa.types.is_binary(array.type):
        return array
    if pa.types.is_fixed_size_binary(array.type):
        return pc.cast(array, pa.binary())
    if pa.types.is_string(array.type):
        return array.view(pa.binary())
    return pc.cast(array, pa.binary())


def _utf8_ok(array: pa.Array) -> Optional[pa.Array]:
    """True where a string/binary value is valid UTF-8 (or null); None if every value is.

    Arrow checks the whole array in one cast; only an array that fails is checked value by
    value (in Python), to find which rows are bad.
    """
    binary = _as_binary(array)
    if _is_ascii(binary):  # numpy's max is faster than Arrow's UTF-8 check
        return None
    try:
        pc.cast(binary, pa.string())
        return None
    except pa.ArrowInvalid:
        pass
    return pa.array([v is None or _is_utf8(v) for v in binary.to_pylist()], pa.bool_())


def _is_ascii(binary: pa.Array) -> bool:
    """Whether every byte of a binary array's values is ASCII (so the values are UTF-8)."""
    if len(binary) == 0:
        return True
    _, offsets, data = binary.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32, count=len(binary) + 1, offset=binary.offset * 4)
    start, end = int(bounds[0]), int(bounds[-1])
    if end <= start:
        return True
    return int(np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start).max()) < 0x80


def _is_utf8(value) -> bool:
    """Whether bytes (or a buffer) are valid UTF-8."""
    try:
        codecs.utf_8_decode(value, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


def _as_text(array: pa.Array) -> pa.Array:
    """A string or binary array as ``string``, without checking UTF-8 (``_utf8_ok`` does)."""
    if pa.types.is_string(array.type):
        return array
    return _as_binary(array).view(pa.string())


def _normalise_users(array: pa.Array, name: str) -> pa.Array:
    """Canonical id bytes: what ``sampling.user_id_bytes`` does, column at a time."""
    kind = array.type
    _check_user_type(kind, name)
    if pa.types.is_null(kind):
        return pa.nulls(len(array), pa.binary())
    if pa.types.is_integer(kind):
        return pc.cast(pc.cast(array, pa.string()), pa.binary())  # decimal digits, e.g. "-5"
    return _as_binary(array)  # strings are UTF-8 already: no copy


def _normalise_items(
    array: pa.Array, name: str, options: RecordOptions
) -> Tuple[pa.Array, pa.Array, Optional[pa.Array]]:
    """(items of the output type, present mask, valid mask or None if all present ones are)."""
    kind = array.type
    _check_item_type(kind, name, options)
    item_kind = options.item_kind
    out_type = _ITEM_TYPES[item_kind]
    if pa.types.is_null(kind):
        return pa.nulls(len(array), out_type), pa.array(np.zeros(len(array), dtype=bool)), None
    if item_kind is ItemKind.TEXT:
        items = _as_text(array)
        return items, _nonempty(items), None
    if item_kind is ItemKind.BYTES:
        if _is_bytes(kind) or options.bytes_encoding is None:
            items = _as_binary(array)
            return items, _nonempty(items), None
        present = _nonempty(array)
        decode = _decode_base64 if options.bytes_encoding == "base64" else _decode_hex
        items, ok = decode(_as_binary(array))
        return items, present, ok
    # Integers.
    if pa.types.is_integer(kind):
        present = pc.is_valid(array)
        if kind == pa.uint64():
            ok = pc.less_equal(array, pa.scalar(_INT64_MAX, kind))
            values = pc.cast(array, pa.int64(), safe=False)  # wrapped values fail `ok`
        else:
            ok, values = None, pc.cast(array, pa.int64())
    else:
        present = _nonempty(array)
        values, ok = _parse_integers(_as_text(array))
    in_range = _int_range_ok(values, options.int_bits)
    if in_range is not None:
        ok = in_range if ok is None else pc.and_(ok, in_range)
    return values, present, ok


def _int_range_ok(values: pa.Array, bits: int) -> Optional[pa.Array]:
    if bits >= 64:
        return None
    half = 1 << (bits - 1)
    return pc.and_(pc.greater_equal(values, -half), pc.less_equal(values, half - 1))


def _parse_integers(text: pa.Array) -> Tuple[pa.Array, pa.Array]:
    """(int64 values, ok mask) of decimal text: optional sign, ASCII digits, spaces around."""
    text = pc.utf8_trim_whitespace(text)
    ok = pc.fill_null(pc.match_substring_regex(text, _INT_TEXT), False)
    # "+7" is 7; Arrow's cast does not take the plus sign.
    unsigned = pc.replace_substring_regex(text, r"^\+", "")
    candidates = pc.if_else(ok, unsigned, pa.scalar(None, pa.string()))
    try:
        return pc.cast(candidates, pa.int64()), ok
    except pa.ArrowInvalid:  # some value overflows int64 (or has many leading zeros)
        pass
    values, oks = [], []
    for value in candidates.to_pylist():
        number = int(value) if value is not None else None
        fits = number is not None and -(2**63) <= number <= _INT64_MAX
        values.append(number if fits else None)
        oks.append(fits)
    return pa.array(values, pa.int64()), pa.array(oks, pa.bool_())


def _normalise_counts(array: pa.Array, name: str) -> Tuple[pa.Array, pa.Array]:
    """(int64 counts, ok mask): ok where the count is a non-null integer in [0, 2^63)."""
    kind = array.type
    _check_count_type(kind, name)
    if pa.types.is_null(kind):
        return pa.nulls(len(array), pa.int64()), pa.array(np.zeros(len(array), dtype=bool))
    if pa.types.is_unsigned_integer(kind):
        if kind == pa.uint64():
            ok = pc.less_equal(array, pa.scalar(_INT64_MAX, kind))
        else:
            ok = pc.is_valid(array)
        counts = pc.cast(array, pa.int64(), safe=False)  # wrapped values are dropped by `ok`
    elif pa.types.is_signed_integer(kind):
        counts = pc.cast(array, pa.int64())
        ok = pc.greater_equal(counts, 0)
    else:
        # CSV counts arrive as text so that one bad cell is a dropped record, not a failed file.
        text = pc.utf8_trim_whitespace(_as_text(array))
        ok = pc.fill_null(pc.match_substring_regex(text, _COUNT_TEXT), False)
        counts = pc.cast(pc.if_else(ok, text, pa.scalar(None, pa.string())), pa.int64())
    return counts, pc.fill_null(ok, False)


# ---- text-encoded bytes, vectorised ----------------------------------------------------------

_HEX_VALUES = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX_VALUES[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX_VALUES[_c] = 10 + _i

_BASE64_VALUES = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):
    _BASE64_VALUES[_c] = _i
_PAD = 64
_BASE64_VALUES[ord("=")] = _PAD


def _per_row_any(flags: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """For values spanning ``offsets``, whether any of their bytes has its flag set."""
    total = np.concatenate(([0], np.cumsum(flags, dtype=np.int64)))
    return total[offsets[1:]] > total[offsets[:-1]]


def _binary_from_parts(data: np.ndarray, lengths: np.ndarray, valid: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    array = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        len(lengths),
        [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))],
    )
    array = pc.cast(array, pa.binary())
    return pc.if_else(pa.array(valid), array, pa.scalar(None, pa.binary()))


def _decode_hex(text: pa.Array) -> Tuple[pa.Array, pa.Array]:
    """(bytes, ok mask) of hex text; a value that is not hex is null with ok False."""
    data, offsets = binary_buffers(text)
    lengths = np.diff(offsets)
    values = _HEX_VALUES[data]
    ok = (
        text.is_valid().to_numpy(zero_copy_only=False)
        & (lengths % 2 == 0)
        & ~_per_row_any(values == 255, offsets)
    )
    take = np.repeat(ok, lengths)
    pairs = values[take].reshape(-1, 2)
    decoded = (pairs[:, 0] << 4) | pairs[:, 1]
    return _binary_from_parts(decoded, np.where(ok, lengths // 2, 0), ok), pa.array(ok)


def _decode_base64(text: pa.Array) -> Tuple[pa.Array, pa.Array]:
    """(bytes, ok mask) of base64 text; a value that is not base64 is null with ok False.

    Accepts what ``base64.b64decode(value, validate=True)`` accepts for values whose length is
    a multiple of 4 (the standard alphabet, at most two ``=``, only at the end), nothing else.
    """
    data, offsets = binary_buffers(text)
    lengths = np.diff(offsets)
    values = _BASE64_VALUES[data]
    is_pad = values == _PAD
    pads = np.diff(np.concatenate(([0], np.cumsum(is_pad, dtype=np.int64)))[offsets])
    ends = offsets[1:]
    last_is_pad = np.zeros(len(lengths), dtype=bool)
    second_is_pad = np.zeros(len(lengths), dtype=bool)
    long_enough = lengths >= 2
    if len(data):
        last_is_pad[lengths >= 1] = is_pad[ends[lengths >= 1] - 1]
        second_is_pad[long_enough] = is_pad[ends[long_enough] - 2]
    pads_at_end = (pads == 0) | ((pads == 1) & last_is_pad) | (
        (pads == 2) & last_is_pad & second_is_pad
    )
    ok = (
        text.is_valid().to_numpy(zero_copy_only=False)
        & (lengths % 4 == 0)
        & ~_per_row_any(values == 255, offsets)
        & pads_at_end
    )
    take = np.repeat(ok, lengths)
    quads = values[take].reshape(-1, 4).astype(np.uint32)
    quad_pads = (quads == _PAD).sum(axis=1)
    quads[quads == _PAD] = 0
    word = (quads[:, 0] << 18) | (quads[:, 1] << 12) | (quads[:, 2] << 6) | quads[:, 3]
    triples = np.stack([(word >> 16) & 255, (word >> 8) & 255, word & 255], axis=1).astype(np.uint8)
    keep = np.ones(triples.shape, dtype=bool)
    keep[:, 2] = quad_pads < 1
    keep[:, 1] = quad_pads < 2
    decoded = triples[keep]
    out_lengths = np.where(ok, lengths // 4 * 3 - pads, 0)
    return _binary_from_parts(decoded, out_lengths, ok), pa.array(ok)


# ---------------------------------------------------------------------------------------------
# Reading one file.


def infer_format(path: str) -> str:
    """The records format of a path from its extension, ignoring a compression suffix (.gz ...).

    Raises:
      ValueError: for an extension that is not .jsonl/.json/.ndjson, .csv or .parquet/.pq.
    """
    stem = path
    if CompressionTypes.detect_compression_type(path) != CompressionTypes.UNCOMPRESSED:
        stem = os.path.splitext(path)[0]
    extension = os.path.splitext(stem)[1].lower()
    if extension not in _EXTENSIONS:
        raise ValueError(
            f"cannot tell the format of {path!r} from its extension; name files *.jsonl, *.csv or "
            f"*.parquet (optionally compressed, e.g. *.jsonl.gz) or pass format= one of {FORMATS}"
        )
    return _EXTENSIONS[extension]


def _compression(path: str, format: str) -> str:
    compression = CompressionTypes.detect_compression_type(path)
    if format == "parquet" and compression != CompressionTypes.UNCOMPRESSED:
        raise ValueError(
            f"{path!r}: Parquet files compress internally; cannot read a {compression} Parquet file"
        )
    return compression


def iter_record_batches(
    path: str,
    format: Optional[str] = None,
    columns: RecordColumns = RecordColumns(),
    batch_size: int = DEFAULT_BATCH_SIZE,
    options: RecordOptions = RecordOptions(),
) -> Iterator[Tuple[pa.RecordBatch, Dict[str, int]]]:
    """Reads one records file as normalised batches, without loading it whole.

    Args:
      path: a local or ``gs://`` path (anything ``FileSystems`` opens). JSON Lines and CSV may be
        compressed (.gz, .bz2, .zst, .deflate, .xz: the suffix says which).
      format: ``"jsonl"``, ``"csv"``, ``"parquet"``, or ``None`` to infer it from the extension.
      columns: the column names.
      batch_size: the largest number of rows in a yielded batch.
      options: the item kind and the checks (``RecordOptions``).

    Yields:
      ``(batch, drops)``: a ``record_schema`` batch of at most ``batch_size`` rows (possibly
      none, when a whole block was dropped) and the rows dropped per reason (``DROP_REASONS``)
      since the previous yield. Batches own compact buffers (not views of a larger block), so
      that serialising one costs its own size.

    Raises:
      RecordFormatError: the file cannot be parsed in its format, lacks a required column, or
        has a column of the wrong type; the message names the file. For JSON Lines the
        missing-column check can only be made at the end of the file, after its batches were
        yielded (in Beam the bundle fails, so they are never committed).
      FileNotFoundError: the file does not exist.
      ValueError: the format cannot be inferred, or a compressed Parquet file.
    """
    for block in iter_record_blocks(path, format, columns, batch_size, options):
        yield block.batch, block.drops


def iter_record_blocks(
    path: str,
    format: Optional[str] = None,
    columns: RecordColumns = RecordColumns(),
    batch_size: int = DEFAULT_BATCH_SIZE,
    options: RecordOptions = RecordOptions(),
    keep_rejected: bool = False,
) -> Iterator[RecordBlock]:
    """``iter_record_batches`` that also returns the rejected rows (``keep_rejected=True``).

    Yields:
      ``RecordBlock(batch, drops, rejected)``: as ``iter_record_batches``, and the rows
      dropped since the previous yield as ``RejectedRow(reason, raw)`` (always empty unless
      ``keep_rejected``). Keeping them costs only for the rejected rows.

    Raises:
      As ``iter_record_batches``.
    """
    format = format or infer_format(path)
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    compression = _compression(path, format)
    read_raw = {"jsonl": _read_jsonl, "csv": _read_csv, "parquet": _read_parquet}[format]
    try:
        with FileSystems.open(
            path, "application/octet-stream", compression_type=compression
        ) as f:
            blocks = read_raw(f, columns, options, batch_size, keep_rejected)
            yield from _normalised_blocks(blocks, columns, options, batch_size, keep_rejected)
            _check_stream_complete(f)
    except RecordFormatError as e:
        raise RecordFormatError(f"{path}: {e}") from e
    except FileNotFoundError:
        raise
    except _UNREADABLE as e:
        raise RecordFormatError(f"{path}: cannot read it as {format}: {_describe(e)}") from e


# What reading a file that is not in its format raises (a missing file stays FileNotFoundError):
# Arrow's parse errors, a corrupt gzip/deflate (zlib), xz (lzma), bz2 (OSError) or zstd stream,
# a truncated one (EOFError), and OS-level read errors, which name no file by themselves.
_UNREADABLE = (
    pa.ArrowException,
    zlib.error,
    lzma.LZMAError,
    _ZstdError,
    EOFError,
    OSError,
    UnicodeError,
    struct.error,
    csv.Error,
)


def _check_stream_complete(f) -> None:
    """Refuses a compressed file whose stream stops before its end marker (a truncated file).

    Beam's ``CompressedFile`` reads a truncated gzip, bzip2, xz or zstd stream as a shorter
    file without complaint; its decompressor knows better (``eof``).
    """
    decompressor = getattr(f, "_decompressor", None)
    if decompressor is None or getattr(decompressor, "eof", True):
        return
    raw = getattr(f, "_file", None)
    if raw is not None and raw.tell() == 0:
        return  # an empty file: no stream at all, nothing cut short
    raise RecordFormatError(
        "the compressed stream ends before its end marker: the file is truncated or corrupt"
    )


def _describe(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text if len(text) <= 300 else text[:300] + "..."


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def _pieces(batch: pa.RecordBatch, batch_size: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, batch.num_rows, batch_size):
        piece = batch.slice(start, batch_size)
        # A slice pickles with all of its parent's buffers: copy it when it holds little of them.
        if piece.get_total_buffer_size() > 2 * piece.nbytes + 4096:
            piece = pa.RecordBatch.from_arrays(
                [pa.concat_arrays([column]) for column in piece.columns], schema=batch.schema
            )
        yield piece


# A raw block of a file: raw columns as found in the file, the drops (and rejected rows) the
# reader saw, and how to get the raw form of row i of the block (None: render the parsed row).
class _RawBlock(NamedTuple):
    data: Union[pa.RecordBatch, pa.Table]
    drops: Dict[str, int]
    rejected: List[RejectedRow]
    raw_row: Optional[Callable[[int], bytes]] = None
    utf8_checked: bool = False  # the reader made sure its text is UTF-8


def _normalised_blocks(
    blocks: Iterable[_RawBlock],
    columns: RecordColumns,
    options: RecordOptions,
    batch_size: int,
    keep_rejected: bool,
) -> Iterator[RecordBlock]:
    """Normalises raw blocks and cuts them to batch_size rows; small batches are merged.

    A good batch of fewer than batch_size / 4 rows (left by heavy dropping, or by the JSON Lines
    sub-blocks) waits to be merged with the next ones, so that the output is not a stream of
    tiny batches; larger batches pass unchanged (the good path copies nothing).
    """
    schema = options.schema
    small = max(1, batch_size // 4)
    drops: Dict[str, int] = collections.Counter()
    rejected: List[RejectedRow] = []
    waiting: List[pa.RecordBatch] = []
    waiting_rows = 0

    def flush_waiting() -> Iterator[RecordBlock]:
        nonlocal waiting, waiting_rows
        if not waiting:
            return
        merged = waiting[0] if len(waiting) == 1 else _concat(waiting, schema)
        waiting, waiting_rows = [], 0
        for piece in _pieces(merged, batch_size):
            yield _take(piece)

    def _take(batch: pa.RecordBatch) -> RecordBlock:
        block = RecordBlock(batch, dict(drops), tuple(rejected))
        drops.clear()
        rejected.clear()
        return block

    for raw in blocks:
        drops.update(raw.drops)
        rejected.extend(raw.rejected)
        offset = 0
        for raw_batch in _as_batches(raw.data):
            result = _normalise_one(raw_batch, columns, options, keep_rejected, raw.utf8_checked)
            drops.update(result.drops)
            for row, reason in result.rejected:
                rejected.append(RejectedRow(reason, _raw_form(raw, raw_batch, offset, row)))
            offset += raw_batch.num_rows
            good = result.batch
            if good.num_rows == 0:
                continue
            if good.num_rows < small:
                waiting.append(good)
                waiting_rows += good.num_rows
                if waiting_rows >= small:
                    yield from flush_waiting()
                continue
            yield from flush_waiting()
            for piece in _pieces(good, batch_size):
                yield _take(piece)
    yield from flush_waiting()
    if any(drops.values()) or rejected:  # what was dropped after the last batch
        yield _take(_empty_batch(schema))


def _concat(batches: List[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    return _single_batch(pa.Table.from_batches(batches, schema=schema).combine_chunks())


def _raw_form(raw: _RawBlock, batch: pa.RecordBatch, offset: int, row: int) -> Union[bytes, str]:
    if raw.raw_row is not None:
        found = raw.raw_row(offset + row)
        if found is not None:
            return found
    return _render_row(batch, row)


def _render_row(batch: pa.RecordBatch, row: int) -> str:
    """Row ``row`` of a raw batch as a JSON object (str): the dead-letter form of a parsed row.

    Strings that are valid UTF-8 stay strings; binary values and strings that are not UTF-8
    become ``{"base64": ...}``; numbers stay numbers (non-finite floats become strings); other
    values become their ``str``.
    """
    rendered = {}
    for name, column in zip(batch.schema.names, batch.columns):
        column = _decoded(column.slice(row, 1))
        if _is_text(column.type):
            value = _as_binary(column)[0].as_py()
            if value is not None:
                value = value.decode("utf-8") if _is_utf8(value) else _base64_of(value)
        elif _is_bytes(column.type):
            value = column[0].as_py()
            value = None if value is None else _base64_of(value)
        else:
            value = column[0].as_py()
            if isinstance(value, float) and not math.isfinite(value):
                value = str(value)
        rendered[name] = value
    return json.dumps(rendered, ensure_ascii=False, default=str)


def _base64_of(value: bytes) -> Dict[str, str]:
    return {"base64": base64.b64encode(value).decode("ascii")}


class _Rejects:
    """Rows a reader takes out, counted per reason (and kept, if asked), safe across threads.

    Arrow's CSV reader calls its invalid-row handler, and reads the file, from its own threads
    while the batches are consumed in this one.
    """

    def __init__(self, keep: bool):
        self.keep = keep
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = collections.Counter()
        self._rows: List[RejectedRow] = []

    def add(self, reason: str, raw: Optional[bytes] = None) -> None:
        with self._lock:
            self._counts[reason] += 1
            if self.keep and raw is not None:
                self._rows.append(RejectedRow(reason, raw))

    def take(self) -> Tuple[Dict[str, int], List[RejectedRow]]:
        with self._lock:
            counts, rows = dict(self._counts), self._rows
            self._counts, self._rows = collections.Counter(), []
        return counts, rows


def _split_non_utf8_lines(
    data: bytes, rejects: _Rejects, classify: Callable[[bytes], str], csv_lines: bool = False
) -> bytes:
    """``data`` (whole lines) without the lines that are not UTF-8, which go to ``rejects``.

    ``classify`` says under which reason a bad line is counted (``malformed`` if it is broken
    anyway, else ``invalid_utf8``). Valid blocks are returned as they are, after one check.
    Lines end at ``\n`` (JSON Lines) or, with ``csv_lines``, also at a lone ``\r`` (as Arrow's
    CSV parser reads them).
    """
    if data.isascii() or _is_utf8(data):
        return data
    kept = []
    pieces = data.splitlines(keepends=True) if csv_lines else data.split(b"\n")
    for piece in pieces:
        if _is_utf8(piece):
            kept.append(piece)
        else:
            line = piece.rstrip(b"\r\n") if csv_lines else piece
            rejects.add(classify(line), line)
    return b"".join(kept) if csv_lines else b"\n".join(kept)


def _read_parquet(
    f, columns: RecordColumns, options: RecordOptions, batch_size: int, keep_rejected: bool
) -> Iterator[_RawBlock]:
    parquet = pq.ParquetFile(f)
    schema = parquet.schema_arrow
    _check_column_types(schema, columns, options)  # also for a file without rows
    wanted = [columns.user, columns.item]
    if columns.count is not None and columns.count in schema.names:
        wanted.append(columns.count)
    # Row group by row group, batch_size rows at a time: the file is never loaded whole.
    for batch in parquet.iter_batches(batch_size=batch_size, columns=wanted):
        yield _RawBlock(batch, {}, [])


class _FullReads(io.RawIOBase):
    """A raw stream whose reads return as many bytes as asked for, fewer only at the end.

    Arrow's streaming CSV reader takes each read as one block: a short read in the middle of
    a file (a 1-byte block holding the "\n" of a "\r\n") can make it lose rows without an
    error, or fail. Subclasses implement ``_read_some`` (b"" only at the end).
    """

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view):
            data = self._read_some(len(view) - filled)
            if not len(data):
                break
            view[filled : filled + len(data)] = data
            filled += len(data)
        return filled

    def _read_some(self, n: int):
        raise NotImplementedError


class _PrefixedStream(_FullReads):
    """Bytes already read from a file, then the rest of the file: lets us peek at a header."""

    def __init__(self, prefix: bytes, rest):
        super().__init__()
        self._prefix = memoryview(prefix)
        self._rest = rest

    def _read_some(self, n: int):
        if len(self._prefix):
            data, self._prefix = self._prefix[:n], self._prefix[n:]
            return data
        return self._rest.read(n)


class _Utf8LineFilter(_FullReads):
    """A CSV file's bytes, whole lines at a time, without its lines that are not UTF-8.

    Arrow's CSV reader refuses a whole file for one such line (and cannot even report a
    malformed row holding one), so those lines are taken out before it sees them and counted
    in ``rejects``: ``malformed`` if the row has the wrong number of fields anyway, else
    ``invalid_utf8``. A block that is valid UTF-8 (the normal case) passes after one check.
    """

    def __init__(self, raw, rejects: _Rejects, fields: int):
        super().__init__()
        self._raw = raw
        self._rejects = rejects
        self._fields = fields
        self._carry = b""
        self._out = memoryview(b"")
        self._eof = False

    def _read_some(self, n: int):
        while not len(self._out) and not self._eof:
            self._fill()
        data, self._out = self._out[:n], self._out[n:]
        return data

    def _fill(self) -> None:
        block = self._raw.read(_BLOCK_BYTES)
        if not block:
            self._eof = True
            data, cut, self._carry = self._carry, len(self._carry), b""
        else:
            data = self._carry + block if self._carry else block
            cut = data.rfind(b"\n") + 1
            self._carry = data[cut:]
        if not cut:
            return
        whole_lines = memoryview(data)[:cut]
        if data.isascii() or _is_utf8(whole_lines):
            self._out = whole_lines  # the normal case: no copy
        else:
            self._out = memoryview(
                _split_non_utf8_lines(bytes(whole_lines), self._rejects, self._classify, True)
            )

    def _classify(self, line: bytes) -> str:
        text = line.decode("utf-8", "surrogateescape")
        try:
            fields = next(csv.reader([text]), [])
        except csv.Error:  # e.g. a NUL byte
            return "malformed"
        return "invalid_utf8" if len(fields) == self._fields else "malformed"


def _peek_csv_header(f) -> Tuple[bytes, Optional[List[str]]]:
    """(the bytes read, the header's column names or None for an empty file).

    Raises:
      RecordFormatError: the header line is not UTF-8.
    """
    prefix = b""
    while True:
        chunk = f.read(_PEEK_BYTES)
        prefix += chunk
        if not chunk or b"\n" in chunk or b"\r" in chunk:
            break
    if not prefix.strip():
        return prefix, None
    first_line = re.split(rb"[\r\n]", prefix, maxsplit=1)[0]
    try:
        text = first_line.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RecordFormatError("the header line is not UTF-8") from None
    try:
        return prefix, next(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise RecordFormatError(f"cannot parse the header line: {e}") from None


def _read_csv(
    f, columns: RecordColumns, options: RecordOptions, batch_size: int, keep_rejected: bool
) -> Iterator[_RawBlock]:
    # The header is read first: it says whether the optional count column is there, and so
    # which columns to type as text (a count column that is absent must not become all-null).
    prefix, header = _peek_csv_header(f)
    if header is None:
        return
    _require_columns(header, columns)
    wanted = [columns.user, columns.item]
    if columns.count is not None and columns.count in header:
        wanted.append(columns.count)
    rejects = _Rejects(keep_rejected)

    def skip_malformed(row) -> str:
        rejects.add("malformed", row.text.encode("utf-8") if rejects.keep else None)
        return "skip"

    reader = pa_csv.open_csv(
        _Utf8LineFilter(_PrefixedStream(prefix, f), rejects, len(header)),
        read_options=pa_csv.ReadOptions(block_size=_BLOCK_BYTES),
        parse_options=pa_csv.ParseOptions(invalid_row_handler=skip_malformed),
        # All text: a user "007" stays "007" and a bad count cell is one dropped record.
        convert_options=pa_csv.ConvertOptions(
            column_types={name: pa.string() for name in wanted}, include_columns=wanted
        ),
    )
    for batch in reader:  # Arrow checks that string columns are UTF-8
        counts, rows = rejects.take()
        yield _RawBlock(batch, counts, rows, utf8_checked=True)
    # The parser runs ahead of the batches: rows it skipped after the last one are counted here.
    counts, rows = rejects.take()
    if counts:
        empty = pa.RecordBatch.from_pylist([], schema=reader.schema)
        yield _RawBlock(empty, counts, rows, utf8_checked=True)


def _read_jsonl(
    f, columns: RecordColumns, options: RecordOptions, batch_size: int, keep_rejected: bool
) -> Iterator[_RawBlock]:
    parser = _JsonLinesParser(columns, options, keep_rejected)
    carry = b""
    while True:
        block = f.read(_BLOCK_BYTES)
        if not block:
            break
        data = carry + block if carry else block
        cut = data.rfind(b"\n") + 1  # parse whole lines; the rest waits for the next block
        carry = data[cut:]
        if cut:
            yield from parser.parse(data[:cut])
    if carry.strip(_JSON_SPACE + b"\n"):
        yield from parser.parse(carry)
    parser.check_columns_seen()


def _nonblank_lines(data: bytes) -> List[bytes]:
    """The lines Arrow's JSON reader reads a row from (it skips blank ones)."""
    return [line for line in data.split(b"\n") if line.strip(_JSON_SPACE)]


def _cut_lines(data: bytes, size: int) -> Iterator[bytes]:
    """``data`` (whole lines) in pieces of about ``size`` bytes, cut after a line break."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", min(start + size, len(data)) - 1)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


class _JsonLinesParser:
    """Parses blocks of JSON lines into raw (user, item, count) tables, one file at a time.

    Lines that are not UTF-8 are taken out first (Arrow would take them as they are). Arrow's
    JSON reader is fast but needs one type per column, fixed for the whole block (it refuses a
    block whose user ids are ``42`` on one line and ``"42"`` on another, or whose item is a
    number somewhere, or one broken line), and it cannot be asked to read "a string or an
    integer". So each block is first parsed by Arrow with explicit types -- items text (integers
    for integer items), counts int64, user ids text or int64, whichever worked for the previous
    block first. A block Arrow refuses with both is parsed again in sub-blocks of about 64 KiB,
    each by Arrow if it can, and only a sub-block Arrow refuses is parsed line by line with
    ``json``, where each value's type is checked on its own (and a broken line is one malformed
    record, not a failed file). Typical files, one id type throughout, never take the slow path.

    A missing or null count is 1 in JSON Lines: the count is an optional field of a record
    (Arrow's reader cannot tell an absent key from an explicit null).
    """

    def __init__(self, columns: RecordColumns, options: RecordOptions, keep_rejected: bool):
        self._columns = columns
        self._options = options
        self._rejects = _Rejects(keep_rejected)
        self._user_types = [pa.string(), pa.int64()]
        self._item_type = pa.int64() if options.item_kind is ItemKind.INT else pa.string()
        # Whether some record of the file has the key (files lacking a required key are refused).
        self._seen = {columns.user: False, columns.item: False}
        self._keys = {n: json.dumps(n, ensure_ascii=False).encode("utf-8") for n in self._seen}
        self._records = 0

    def parse(self, chunk: bytes) -> Iterator[_RawBlock]:
        chunk = _split_non_utf8_lines(chunk, self._rejects, self._classify_non_utf8)
        table = self._parse_with_arrow(chunk)
        if table is not None:
            yield self._arrow_block(table, chunk)
            return
        pieces = [chunk]
        if len(chunk) > _SUB_BLOCK_BYTES:
            pieces = list(_cut_lines(chunk, _SUB_BLOCK_BYTES))
        for piece in pieces:
            table = self._parse_with_arrow(piece) if len(pieces) > 1 else None
            if table is not None:
                yield self._arrow_block(table, piece)
            else:
                yield self._parse_with_json(piece)

    def _arrow_block(self, table: pa.Table, chunk: bytes) -> _RawBlock:
        counts, rows = self._rejects.take()
        lines: List[bytes] = []

        def raw_row(i: int) -> Optional[bytes]:
            if not lines:
                lines.extend(_nonblank_lines(chunk))
            # One row per non-blank line; if Arrow saw it otherwise, render the row instead.
            return lines[i] if len(lines) == table.num_rows else None

        # The chunk is UTF-8 (bad lines were taken out) and Arrow refuses bad escapes: no check.
        return _RawBlock(table, counts, rows, raw_row, utf8_checked=True)

    def _parse_with_arrow(self, chunk: bytes) -> Optional[pa.Table]:
        for user_type in list(self._user_types):
            try:
                table = self._arrow_table(chunk, user_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                continue
            if user_type != self._user_types[0]:
                self._user_types.reverse()
            return table
        return None

    def _arrow_table(self, chunk: bytes, user_type: pa.DataType) -> pa.Table:
        c = self._columns
        fields = [(c.user, user_type), (c.item, self._item_type)]
        if c.count:
            fields.append((c.count, pa.int64()))
        table = pa_json.read_json(
            pa.BufferReader(chunk),
            parse_options=pa_json.ParseOptions(
                explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore"
            ),
        )
        self._records += table.num_rows
        for name in self._seen:
            if not self._seen[name]:
                column = table.column(name)
                # Null values of a present key look like an absent key: look for the key too.
                self._seen[name] = column.null_count < len(column) or self._keys[name] in chunk
        if c.count:
            index = table.schema.get_field_index(c.count)
            table = table.set_column(index, c.count, pc.fill_null(table.column(index), 1))
        return table

    def _parse_with_json(self, chunk: bytes) -> _RawBlock:
        c = self._columns
        users: List[Optional[bytes]] = []
        items: List[Optional[str]] = []
        counts: List[int] = []
        lines: List[bytes] = []  # the line of each row passed on
        rejects = self._rejects
        for line in chunk.split(b"\n"):
            if not line.strip(_JSON_SPACE):
                continue
            self._records += 1
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, or nested too deep for Python
                rejects.add("malformed", line)
                continue
            if not isinstance(record, dict):
                rejects.add("malformed", line)
                continue
            for name in self._seen:
                self._seen[name] = self._seen[name] or name in record
            reason, row = _json_row(record, c, self._options)
            if reason:
                rejects.add(reason, line)
            else:
                users.append(row[0])
                items.append(row[1])
                counts.append(row[2])
                lines.append(line)
        table = pa.table(
            {
                c.user: pa.array(users, pa.binary()),
                c.item: pa.array(items, pa.string()),
                **({c.count: pa.array(counts, pa.int64())} if c.count else {}),
            }
        )
        drops, rows = rejects.take()
        return _RawBlock(table, drops, rows, lines.__getitem__, utf8_checked=True)

    def _classify_non_utf8(self, line: bytes) -> str:
        """A line that is not UTF-8: ``malformed`` if it is no JSON object either."""
        self._records += 1
        try:
            record = json.loads(line.decode("utf-8", "surrogateescape"))
        except (ValueError, RecursionError):
            return "malformed"
        if not isinstance(record, dict):
            return "malformed"
        for name in self._seen:
            self._seen[name] = self._seen[name] or name in record
        return "invalid_utf8"

    def check_columns_seen(self) -> None:
        """Raises RecordFormatError if the file had records but none had the user/item key."""
        if not self._records:
            return
        for role, name in (("user id", self._columns.user), ("item", self._columns.item)):
            if not self._seen[name]:
                raise RecordFormatError(f"no {role} column {name!r}: no record has that key")


def _not_utf8(value) -> bool:
    """A str holding a lone surrogate (from a ``"\\ud800"`` escape) has no UTF-8 form."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _json_row(
    record: dict, c: RecordColumns, options: RecordOptions
) -> Tuple[Optional[str], Tuple]:
    """(drop reason or None, (user bytes, item text, count)) for one JSON record.

    The reasons only Python sees (a lone surrogate, a value of the wrong JSON type, an
    oversized user id, which comes before them in the order) are decided here, in the order
    of ``DROP_REASONS``; missing users and items are passed on as None, a bad count as -1 and
    an integer item as its decimal text, for ``normalise_batch`` to count in the same order.
    """
    user, item = record.get(c.user), record.get(c.item)
    if _not_utf8(user) or _not_utf8(item):
        return "invalid_utf8", ()
    if user is None or user == "":
        return None, (None, None, 1)
    if isinstance(user, bool) or not isinstance(user, (str, int)):
        return "bad_user", ()
    user = user.encode("utf-8") if isinstance(user, str) else str(user).encode("ascii")
    if len(user) > options.max_user_bytes:
        return "oversized_user", ()
    if item is None or item == "":
        return None, (user, None, 1)
    if options.item_kind is ItemKind.INT and isinstance(item, int) and not isinstance(item, bool):
        item = str(item)
    if not isinstance(item, str):
        return "bad_item", ()
    count = record.get(c.count) if c.count else None
    if count is None:
        count = 1
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= _INT64_MAX:
        count = -1
    return None, (user, item, count)


# ---------------------------------------------------------------------------------------------
# Reports over the counters.


def bad_fraction(counters: Dict[str, int]) -> float:
    """The share of the records read that were dropped as bad, from a job's counters.

    Args:
      counters: counter name -> value in the ``triehh`` namespace, as a job reports them
        (``records_read`` and ``records_<reason>``; other names are ignored).

    Returns:
      (sum of ``records_<reason>`` over every ``DROP_REASONS`` reason) / ``records_read``:
      every dropped record is bad, whatever the reason (a record with no user id or no item is
      as unusable as a malformed one). ``files_empty`` is not bad. 0.0 when nothing was read.
    """
    read = int(counters.get("records_read", 0) or 0)
    if read <= 0:
        return 0.0
    bad = sum(int(counters.get(f"records_{reason}", 0) or 0) for reason in DROP_REASONS)
    return bad / read


def describe_drops(counters: Dict[str, int]) -> str:
    """One line for an operator: records read, dropped (with the share) and why, empty files.

    Only counts, never content, e.g. ``"read 1,000 records from 3 files (1 empty); dropped 12
    (1.2%): malformed 3, invalid_utf8 2, missing_user 7"``.
    """
    read = int(counters.get("records_read", 0) or 0)
    files = int(counters.get("files_read", 0) or 0)
    empty = int(counters.get("files_empty", 0) or 0)
    line = f"read {read:,} records"
    if files:
        line += f" from {files:,} file{'s' if files != 1 else ''}"
        if empty:
            line += f" ({empty:,} empty)"
    reasons = [
        (reason, int(counters.get(f"records_{reason}", 0) or 0)) for reason in DROP_REASONS
    ]
    dropped = sum(n for _, n in reasons)
    if not dropped:
        return line + "; none dropped"
    share = f"{100 * bad_fraction(counters):.3g}%"
    details = ", ".join(f"{reason} {n:,}" for reason, n in reasons if n)
    return f"{line}; dropped {dropped:,} ({share}): {details}"


# ---------------------------------------------------------------------------------------------
# Beam.


@beam.typehints.with_input_types(str)
@beam.typehints.with_output_types(pa.RecordBatch)
class ReadRecordFileDoFn(beam.DoFn):
    """A file path -> its records as ``record_schema`` batches, counting what is dropped.

    Counters (namespace ``triehh``): ``records_read``, ``records_<reason>`` for each of
    ``DROP_REASONS``, ``files_read`` and ``files_empty``. With ``dead_letter=True`` every
    rejected record is also output with tag ``REJECTED_TAG`` as ``(path, reason, raw)`` (see
    ``RejectedRow``). Raises ``RecordFormatError`` (naming the file) as
    ``iter_record_batches``. Usable on its own after any transform that yields paths (e.g.
    ``fileio.MatchContinuously``).
    """

    def __init__(
        self,
        format: Optional[str] = None,
        columns: RecordColumns = RecordColumns(),
        batch_size: int = DEFAULT_BATCH_SIZE,
        options: RecordOptions = RecordOptions(),
        dead_letter: bool = False,
    ):
        if format is not None and format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS} or None, got {format!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(options, RecordOptions):
            raise TypeError(f"options must be RecordOptions, got {type(options).__name__}")
        self._format = format
        self._columns = columns
        self._batch_size = batch_size
        self._options = options
        self._dead_letter = bool(dead_letter)

    def setup(self):
        self._records_read = Metrics.counter(METRICS_NAMESPACE, "records_read")
        self._dropped = {
            reason: Metrics.counter(METRICS_NAMESPACE, f"records_{reason}")
            for reason in DROP_REASONS
        }
        self._files_read = Metrics.counter(METRICS_NAMESPACE, "files_read")
        self._files_empty = Metrics.counter(METRICS_NAMESPACE, "files_empty")

    def process(self, path: str) -> Iterator[pa.RecordBatch]:
        blocks = iter_record_blocks(
            path, self._format, self._columns, self._batch_size, self._options, self._dead_letter
        )
        total = 0
        for batch, drops, rejected in blocks:
            read = batch.num_rows
            for reason, n in drops.items():
                if n:
                    self._dropped[reason].inc(n)
                    read += n
            if read:
                self._records_read.inc(read)
                total += read
            if batch.num_rows:
                yield batch
            for row in rejected:
                yield beam.pvalue.TaggedOutput(REJECTED_TAG, (path, row.reason, row.raw))
        self._files_read.inc()
        if not total:
            self._files_empty.inc()


def _split_patterns(file_pattern: Union[str, Sequence[str]]) -> Tuple[str, ...]:
    if isinstance(file_pattern, str):
        patterns = file_pattern.split(",")
    elif isinstance(file_pattern, (list, tuple)):
        patterns = list(file_pattern)
    else:
        raise TypeError(
            f"file_pattern must be a string or a list of strings, not {type(file_pattern).__name__}"
        )
    patterns = [p.strip() if isinstance(p, str) else p for p in patterns]
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise ValueError(f"file_pattern must name non-empty patterns, got {file_pattern!r}")
    return tuple(patterns)


def _match_files(patterns: Sequence[str]) -> List[str]:
    """The sorted, distinct paths the patterns match; every pattern must match something."""
    paths = set()
    for pattern in patterns:
        matched = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
        if not matched:
            raise FileNotFoundError(f"no records files match {pattern!r}")
        paths.update(matched)
    return sorted(paths)


class ReadRecordBatches(beam.PTransform):
    """Reads device records from files as ``record_schema`` ``pyarrow.RecordBatch`` elements.

    The patterns are expanded when the transform is applied (``FileSystems.match``, at pipeline
    construction), so a pattern that matches nothing, or a file whose format cannot be inferred,
    is an error before any job starts; the files are then fixed in the job graph (files added
    later are not read). Each file is read by one worker, in bounded blocks (never whole), so a
    job parallelises over files: shard large inputs into many files. A file matched by several
    patterns is read once.

    Args:
      file_pattern: a path or glob (``data/*.parquet``, ``gs://bucket/records-*.csv.gz``), several
        separated by commas, or a list of them (for paths that contain commas).
      format: ``"jsonl"``, ``"csv"``, ``"parquet"``, or ``None`` (or "") to infer each file's
        format from its extension (.jsonl/.json/.ndjson, .csv, .parquet/.pq; JSON Lines and CSV
        may be compressed, .gz etc.).
      user_column, item_column: the required columns.
      count_column: the optional count column (records count 1 where a file has none); ``None``
        (or "") to ignore counts.
      batch_size: the largest number of rows in an output batch.
      options: the item kind and the checks (``RecordOptions``; ``RecordOptions.for_encoder``).
      dead_letter: also output the rejected records (see Output).

    Raises (when applied):
      FileNotFoundError: a pattern matches no file; the message names it.
      ValueError: a bad argument, or a file whose format cannot be inferred.
    Raises (when run): RecordFormatError naming the file (see ``iter_record_batches``).

    Output: ``pyarrow.RecordBatch`` elements with schema ``options.schema``, none empty. With
    ``dead_letter=True``, a ``DoOutputsTuple`` instead: ``outputs[RECORDS_TAG]`` the batches,
    ``outputs[REJECTED_TAG]`` a ``(file path, reason, raw)`` per rejected record (``raw``:
    ``RejectedRow``), for ``WriteDeadLetters``.
    """

    def __init__(
        self,
        file_pattern: Union[str, Sequence[str]],
        format: Optional[str] = None,
        user_column: str = "user_id",
        item_column: str = "item",
        count_column: Optional[str] = "count",
        batch_size: int = DEFAULT_BATCH_SIZE,
        options: RecordOptions = RecordOptions(),
        dead_letter: bool = False,
    ):
        super().__init__()
        self._patterns = _split_patterns(file_pattern)
        self._format = format or None
        self._columns = RecordColumns(user_column, item_column, count_column or None)
        self._dead_letter = bool(dead_letter)
        # Validates format, batch_size and options now, before any graph is built.
        self._read_fn = ReadRecordFileDoFn(
            self._format, self._columns, batch_size, options, self._dead_letter
        )

    def expand(self, pbegin: beam.pvalue.PBegin):
        paths = _match_files(self._patterns)
        for path in paths:
            _compression(path, self._format or infer_format(path))
        files = (
            pbegin
            | "ListFiles" >> beam.Create(paths).with_output_types(str)
            # Spreads the files over workers (Create may hand them all to one).
            | "SpreadFiles" >> beam.Reshuffle()
        )
        read = beam.ParDo(self._read_fn)
        if self._dead_letter:
            read = read.with_outputs(REJECTED_TAG, main=RECORDS_TAG)
        return files | "ReadFiles" >> read


def dead_letter_json(rejected: Tuple[str, str, Union[bytes, str]]) -> str:
    """One rejected record as a JSON line (without the line break).

    ``{"file": ..., "reason": ..., "raw_base64": ...}`` for a raw input line (base64 of its
    exact bytes), ``{"file": ..., "reason": ..., "row": {...}}`` for a rendered row.
    """
    path, reason, raw = rejected
    record = {"file": path, "reason": reason}
    if isinstance(raw, (bytes, bytearray, memoryview)):
        record["raw_base64"] = base64.b64encode(bytes(raw)).decode("ascii")
    else:
        record["row"] = json.loads(raw)
    return json.dumps(record, ensure_ascii=False, sort_keys=False)


class WriteDeadLetters(beam.PTransform):
    """Writes rejected records (``ReadRecordBatches(..., dead_letter=True)``) as JSON lines.

    One line per record, ``dead_letter_json``: the file it came from, the reason
    (``DROP_REASONS``) and the record, raw bytes as base64. The lines hold raw user data: write
    them where the input may be read, never next to published outputs.

    Args:
      path: with ``num_shards=1`` (the default) the file to write, exactly (local or any Beam
        filesystem); otherwise the prefix of ``path-SSSSS-of-NNNNN`` shards (0: the runner
        decides how many).
      num_shards: see ``path``.

    Output: the written file names (``WriteToText``'s output).
    """

    def __init__(self, path: str, num_shards: int = 1):
        super().__init__()
        if not isinstance(path, str) or not path:
            raise ValueError(f"the dead-letter path must be a non-empty string, got {path!r}")
        if not isinstance(num_shards, int) or num_shards < 0:
            raise ValueError(f"num_shards must be an integer >= 0, got {num_shards!r}")
        self._path = path
        self._num_shards = num_shards

    def expand(self, rejected):
        lines = rejected | "ToJson" >> beam.Map(dead_letter_json).with_output_types(str)
        if self._num_shards == 1:
            write = beam.io.WriteToText(self._path, num_shards=1, shard_name_template="")
        else:
            write = beam.io.WriteToText(self._path, num_shards=self._num_shards)
        return lines | "Write" >> write


# ---------------------------------------------------------------------------------------------
# Fixtures.


def write_records(
    path: str,
    rows: Iterable[Sequence],
    format: Optional[str] = None,
    columns: RecordColumns = RecordColumns(),
    row_group_size: Optional[int] = None,
) -> None:
    """Writes ``(user_id, item[, count])`` rows to a local records file (tests, benchmarks).

    Rows are all pairs (no count column) or all triples. Values are written as given, ``None``
    as null (an empty CSV cell), so files with bad records can be made too. JSON Lines keeps
    integer user ids as numbers; CSV writes everything as text; a Parquet user column takes the
    rows' one type (int64, string or binary), and so does its item column (string, int64 for
    integer items, binary for byte items). A compression suffix (.gz, .bz2, .zst) compresses
    JSON Lines and CSV.

    Args:
      path: a local path; its extension gives the format when ``format`` is None.
      rows: the records.
      format: ``"jsonl"``, ``"csv"`` or ``"parquet"``.
      columns: the column names to write.
      row_group_size: Parquet rows per row group (pyarrow's default when None).

    Raises:
      ValueError: rows of mixed lengths, or user ids or items of mixed types for Parquet.
      TypeError: bytes user ids or items for JSON Lines or CSV (they are text formats).
    """
    rows = [tuple(row) for row in rows]
    lengths = {len(row) for row in rows}
    if not lengths <= {2} and not lengths <= {3}:
        raise ValueError(
            "rows must all be (user_id, item) or all (user_id, item, count), "
            f"got lengths {sorted(lengths)}"
        )
    with_count = lengths == {3} and columns.count is not None
    format = format or infer_format(path)
    users = [row[0] for row in rows]
    items = [row[1] for row in rows]
    counts = [row[2] for row in rows] if with_count else None
    if format != "parquet" and any(isinstance(u, bytes) for u in users):
        raise TypeError(f"{format} is a text format: give user ids as str or int, not bytes")
    if format != "parquet" and any(isinstance(i, bytes) for i in items):
        raise TypeError(f"{format} is a text format: give items as str or int, not bytes")
    if format == "jsonl":
        with pa.output_stream(path, compression="detect") as out:
            for i, (user, item) in enumerate(zip(users, items)):
                record = {columns.user: user, columns.item: item}
                if with_count:
                    record[columns.count] = counts[i]
                out.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
        return
    if format == "csv":
        as_text = [u if u is None or isinstance(u, str) else str(u) for u in users]
        user_array = pa.array(as_text, pa.string())
        item_array = pa.array([i if i is None or isinstance(i, str) else str(i) for i in items],
                              pa.string())
    elif format == "parquet":
        try:
            user_array = pa.array(users) if users else pa.array([], pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ValueError(f"a Parquet column has one type; these user ids mix types: {e}") from e
        if pa.types.is_null(user_array.type):
            user_array = user_array.cast(pa.string())
        try:
            item_array = pa.array(items) if items else pa.array([], pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ValueError(f"a Parquet column has one type; these items mix types: {e}") from e
        if pa.types.is_null(item_array.type):
            item_array = item_array.cast(pa.string())
    else:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    arrays = {columns.user: user_array, columns.item: item_array}
    if with_count:
        arrays[columns.count] = pa.array(counts, pa.int64())
    table = pa.table(arrays)
    if format == "csv":
        with pa.output_stream(path, compression="detect") as out:
            pa_csv.write_csv(table, out)
    else:
        _compression(path, "parquet")
        pq.write_table(table, path, row_group_size=row_group_size)
