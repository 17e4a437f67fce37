"""Device records in, normalised Arrow record batches out.

Device records are ``(user_id, item[, count])`` rows in JSON Lines, CSV or Parquet files, local
or on ``gs://`` (every path goes through Beam's ``FileSystems``). ``ReadRecordBatches`` reads
them as ``pyarrow.RecordBatch`` elements of at most ``batch_size`` rows, all with one schema
(``RECORD_SCHEMA``):

* ``user_id: binary`` -- the user's canonical id bytes, exactly ``sampling.user_id_bytes``:
  strings as UTF-8, integers as their decimal digits (so ``42`` and ``"42"`` are one user),
  binary as is. CSV cells are text, so a CSV ``007`` is the user ``"007"``, never ``7``.
* ``item: string`` -- the item text as read.
* ``count: int64`` -- the record's local count, ``1`` where the file has no count column.

Each record is checked in this order, and a record that fails is dropped and counted under the
first reason it fails (``DROP_REASONS``; Beam counters ``triehh/records_<reason>``, next to
``triehh/records_read``), so ``records_read`` is the rows output plus all the drops:

* ``malformed``: a JSON line that is not a JSON object, a CSV row with the wrong number of
  fields;
* ``missing_user`` / ``bad_user``: no, a null or an empty user id / a JSON user id that is
  neither a string nor an integer (a float, a boolean, an object);
* ``missing_item`` / ``bad_item``: no, a null or an empty item / a JSON item that is not a
  string;
* ``bad_count``: a null, negative, non-integer or out-of-range (>= 2^63) count.

A file is refused with ``RecordFormatError`` (a ``ValueError``) naming it when it cannot be
parsed in its format, lacks the user or item column, or has a column of a type that cannot
hold ids, items or counts (a float user id column, a float count column).

The conversion is vectorised (``pyarrow.compute``), per batch; only JSON Lines files whose
records mix types in a column take a per-line Python path (see ``_JsonLinesParser``).
``normalise_batch`` is the pure core, usable without Beam; ``iter_record_batches`` reads one
file without Beam; ``binary_buffers`` hands a batch's ``user_id`` column to the numpy hashing
(``keyed_hash.siphash24_batch``) without copying the bytes.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import io
import json
import lzma
import os
import threading
import zlib
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

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

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DROP_REASONS",
    "FORMATS",
    "RECORD_SCHEMA",
    "ReadRecordBatches",
    "ReadRecordFileDoFn",
    "RecordColumns",
    "RecordFormatError",
    "binary_buffers",
    "infer_format",
    "iter_record_batches",
    "normalise_batch",
    "write_records",
]

METRICS_NAMESPACE = "triehh"
DEFAULT_BATCH_SIZE = 65536
FORMATS = ("jsonl", "csv", "parquet")

RECORD_SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.binary(), nullable=False),
        pa.field("item", pa.string(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
    ]
)

# In the order records are checked; a dropped record is counted under its first reason.
DROP_REASONS = ("malformed", "missing_user", "bad_user", "missing_item", "bad_item", "bad_count")

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
_PEEK_BYTES = 64 << 10
_INT64_MAX = 2**63 - 1
# Decimal strings of up to 18 digits always fit in int64.
_COUNT_TEXT = r"^[0-9]{1,18}$"


class RecordFormatError(ValueError):
    """A records file that cannot be read as device records; the message names the file."""


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
    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or (
        _is_view(kind) and "binary" in str(kind)
    )


# ---------------------------------------------------------------------------------------------
# The pure core: raw columns -> normalised columns and drop counts.


def normalise_batch(
    data: Union[pa.RecordBatch, pa.Table], columns: RecordColumns = RecordColumns()
) -> Tuple[pa.RecordBatch, Dict[str, int]]:
    """A batch of raw records as a ``RECORD_SCHEMA`` batch, and how many rows were dropped why.

    Args:
      data: raw records; the user and item columns must be present, the count column may be
        absent (every count is then 1). User ids may be integers, strings or binary; items
        strings (or binary holding UTF-8); counts integers or decimal text (CSV). Dictionary
        columns are decoded. Other columns are ignored.
      columns: the column names.

    Returns:
      ``(batch, drops)``: the kept rows, in input order, and the number of dropped rows per
      reason (keys ``missing_user``, ``missing_item``, ``bad_count``; each dropped row counted
      under its first reason). When nothing is dropped, the output shares the input's buffers.

    Raises:
      RecordFormatError: a required column is missing, or a column has a type that cannot hold
        what it should (a float user id, a float count); the message names the column.
    """
    batches = _as_batches(data)
    if len(batches) == 1:
        return _normalise_one(batches[0], columns)
    parts, drops = [], collections.Counter()
    for batch in batches:
        part, part_drops = _normalise_one(batch, columns)
        parts.append(part)
        drops.update(part_drops)
    table = pa.Table.from_batches(parts, schema=RECORD_SCHEMA).combine_chunks()
    return _single_batch(table), {reason: drops[reason] for reason in _NORMALISE_REASONS}


_NORMALISE_REASONS = ("missing_user", "missing_item", "bad_count")


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


def _normalise_one(
    batch: pa.RecordBatch, columns: RecordColumns
) -> Tuple[pa.RecordBatch, Dict[str, int]]:
    names = batch.schema.names
    _require_columns(names, columns)
    users, user_ok = _normalise_users(batch.column(columns.user), columns.user)
    items, item_ok = _normalise_items(batch.column(columns.item), columns.item)
    if columns.count is not None and columns.count in names:
        counts, count_ok = _normalise_counts(batch.column(columns.count), columns.count)
    else:
        counts = pa.array(np.ones(batch.num_rows, dtype=np.int64))
        count_ok = pa.array(np.ones(batch.num_rows, dtype=bool))

    # Each dropped row is counted once, under the first check it fails.
    user_and_item_ok = pc.and_(user_ok, item_ok)
    keep = pc.and_(user_and_item_ok, count_ok)
    kept_users, kept_user_items = _true_count(user_ok), _true_count(user_and_item_ok)
    drops = {
        "missing_user": batch.num_rows - kept_users,
        "missing_item": kept_users - kept_user_items,
        "bad_count": kept_user_items - _true_count(keep),
    }
    arrays = [users, items, counts]
    if sum(drops.values()):
        arrays = [pc.filter(array, keep) for array in arrays]
    return pa.RecordBatch.from_arrays(arrays, schema=RECORD_SCHEMA), drops


def _true_count(mask: pa.Array) -> int:
    return int(pc.sum(mask).as_py() or 0)


def _decoded(array: pa.Array) -> pa.Array:
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _nonempty(array: pa.Array) -> pa.Array:
    """True where the value is non-null and non-empty (binary or string)."""
    return pc.fill_null(pc.greater(pc.binary_length(array), 0), False)


def _normalise_users(array: pa.Array, name: str) -> Tuple[pa.Array, pa.Array]:
    """(canonical id bytes, ok mask): what ``sampling.user_id_bytes`` does, column at a time."""
    array = _decoded(array)
    kind = array.type
    if pa.types.is_null(kind):
        users = pa.nulls(len(array), pa.binary())
    elif pa.types.is_integer(kind):
        users = pc.cast(pc.cast(array, pa.string()), pa.binary())  # decimal digits, e.g. "-5"
    elif _is_text(kind) or _is_bytes(kind):
        users = pc.cast(array, pa.binary())  # strings are UTF-8 already: no copy
    else:
        raise RecordFormatError(
            f"the user id column {name!r} has type {kind}; user ids are strings, integers or binary"
        )
    return users, _nonempty(users)


def _normalise_items(array: pa.Array, name: str) -> Tuple[pa.Array, pa.Array]:
    array = _decoded(array)
    kind = array.type
    if pa.types.is_null(kind):
        items = pa.nulls(len(array), pa.string())
    elif _is_text(kind):
        items = pc.cast(array, pa.string())
    elif _is_bytes(kind):
        try:
            items = pc.cast(array, pa.string())
        except pa.ArrowInvalid as e:
            raise RecordFormatError(f"the item column {name!r} holds non-UTF-8 bytes: {e}") from e
    else:
        raise RecordFormatError(f"the item column {name!r} has type {kind}; items are strings")
    return items, _nonempty(items)


def _normalise_counts(array: pa.Array, name: str) -> Tuple[pa.Array, pa.Array]:
    """(int64 counts, ok mask): ok where the count is a non-null integer in [0, 2^63)."""
    array = _decoded(array)
    kind = array.type
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
    elif _is_text(kind):
        # CSV counts arrive as text so that one bad cell is a dropped record, not a failed file.
        text = pc.utf8_trim_whitespace(pc.cast(array, pa.string()))
        ok = pc.fill_null(pc.match_substring_regex(text, _COUNT_TEXT), False)
        counts = pc.cast(pc.if_else(ok, text, pa.scalar(None, pa.string())), pa.int64())
    else:
        raise RecordFormatError(f"the count column {name!r} has type {kind}; counts are integers")
    return counts, pc.fill_null(ok, False)


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
) -> Iterator[Tuple[pa.RecordBatch, Dict[str, int]]]:
    """Reads one records file as normalised batches, without loading it whole.

    Args:
      path: a local or ``gs://`` path (anything ``FileSystems`` opens). JSON Lines and CSV may be
        compressed (.gz, .bz2, .zst, .deflate, .xz: the suffix says which).
      format: ``"jsonl"``, ``"csv"``, ``"parquet"``, or ``None`` to infer it from the extension.
      columns: the column names.
      batch_size: the largest number of rows in a yielded batch.

    Yields:
      ``(batch, drops)``: a ``RECORD_SCHEMA`` batch of at most ``batch_size`` rows (possibly
      none, when a whole block was dropped) and the rows dropped per reason (``DROP_REASONS``)
      since the previous yield. Batches own compact buffers (not views of a larger block), so
      that serialising one costs its own size.

    Raises:
      RecordFormatError: the file cannot be parsed in its format, lacks a required column, or
        has a column of the wrong type. For JSON Lines the missing-column check can only be
        made at the end of the file, after its batches were yielded (in Beam the bundle fails,
        so they are never committed).
      ValueError: the format cannot be inferred, or a compressed Parquet file.
    """
    format = format or infer_format(path)
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    compression = _compression(path, format)
    read_raw = {"jsonl": _read_jsonl, "csv": _read_csv, "parquet": _read_parquet}[format]
    with FileSystems.open(path, "application/octet-stream", compression_type=compression) as f:
        try:
            for raw, reader_drops in read_raw(f, columns, batch_size):
                drops = collections.Counter(reader_drops)
                for raw_batch in _as_batches(raw):
                    good, normalise_drops = _normalise_one(raw_batch, columns)
                    drops.update(normalise_drops)
                    for piece in _pieces(good, batch_size):
                        yield piece, dict(drops)
                        drops.clear()
                if any(drops.values()):  # a block with nothing left still reports its drops
                    yield _empty_batch(), dict(drops)
        except RecordFormatError as e:
            raise RecordFormatError(f"{path}: {e}") from e
        except _UNREADABLE as e:
            raise RecordFormatError(f"{path}: cannot read it as {format}: {e}") from e


# What parsing a file that is not in its format raises (I/O errors are left as they are).
_UNREADABLE = (pa.ArrowInvalid, pa.ArrowNotImplementedError, zlib.error, lzma.LZMAError, EOFError)


def _empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=RECORD_SCHEMA)


def _pieces(batch: pa.RecordBatch, batch_size: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, batch.num_rows, batch_size):
        piece = batch.slice(start, batch_size)
        # A slice pickles with all of its parent's buffers: copy it when it holds little of them.
        if piece.get_total_buffer_size() > 2 * piece.nbytes + 4096:
            piece = pa.RecordBatch.from_arrays(
                [pa.concat_arrays([column]) for column in piece.columns], schema=RECORD_SCHEMA
            )
        yield piece


# (raw records, drops the reader saw) for one block of a file: raw columns as found in the file.
_RawBlocks = Iterator[Tuple[Union[pa.RecordBatch, pa.Table], Dict[str, int]]]


def _read_parquet(f, columns: RecordColumns, batch_size: int) -> _RawBlocks:
    parquet = pq.ParquetFile(f)
    names = parquet.schema_arrow.names
    _require_columns(names, columns)
    wanted = [columns.user, columns.item]
    if columns.count is not None and columns.count in names:
        wanted.append(columns.count)
    # Row group by row group, batch_size rows at a time: the file is never loaded whole.
    for batch in parquet.iter_batches(batch_size=batch_size, columns=wanted):
        yield batch, {}


class _PrefixedStream(io.RawIOBase):
    """Bytes already read from a file, then the rest of the file: lets us peek at a header."""

    def __init__(self, prefix: bytes, rest):
        super().__init__()
        self._prefix = memoryview(prefix)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if len(self._prefix):
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _peek_csv_header(f) -> Tuple[bytes, Optional[List[str]]]:
    """(the bytes read, the header's column names or None for an empty file)."""
    prefix = b""
    while True:
        chunk = f.read(_PEEK_BYTES)
        prefix += chunk
        if not chunk or b"\n" in chunk or b"\r" in chunk:
            break
    if not prefix.strip():
        return prefix, None
    text = prefix.decode("utf-8-sig", errors="replace")
    return prefix, next(csv.reader(io.StringIO(text)))


def _read_csv(f, columns: RecordColumns, batch_size: int) -> _RawBlocks:
    # The header is read first: it says whether the optional count column is there, and so
    # which columns to type as text (a count column that is absent must not become all-null).
    prefix, header = _peek_csv_header(f)
    if header is None:
        return
    _require_columns(header, columns)
    wanted = [columns.user, columns.item]
    if columns.count is not None and columns.count in header:
        wanted.append(columns.count)
    malformed = _ThreadSafeCount()

    def skip_malformed(row) -> str:
        malformed.add(1)
        return "skip"

    reader = pa_csv.open_csv(
        _PrefixedStream(prefix, f),
        read_options=pa_csv.ReadOptions(block_size=_BLOCK_BYTES),
        parse_options=pa_csv.ParseOptions(invalid_row_handler=skip_malformed),
        # All text: a user "007" stays "007" and a bad count cell is one dropped record.
        convert_options=pa_csv.ConvertOptions(
            column_types={name: pa.string() for name in wanted}, include_columns=wanted
        ),
    )
    for batch in reader:
        yield batch, {"malformed": malformed.take()}
    # The parser runs ahead of the batches: rows it skipped after the last one are counted here.
    late = malformed.take()
    if late:
        yield pa.RecordBatch.from_pylist([], schema=reader.schema), {"malformed": late}


class _ThreadSafeCount:
    """A counter the CSV parser's threads can add to while the reader takes the total."""

    def __init__(self):
        self._lock = threading.Lock()
        self._value = 0

    def add(self, n: int) -> None:
        with self._lock:
            self._value += n

    def take(self) -> int:
        with self._lock:
            value, self._value = self._value, 0
        return value


def _read_jsonl(f, columns: RecordColumns, batch_size: int) -> _RawBlocks:
    parser = _JsonLinesParser(columns)
    carry = b""
    while True:
        block = f.read(_BLOCK_BYTES)
        if not block:
            break
        data = carry + block
        cut = data.rfind(b"\n") + 1  # parse whole lines; the rest waits for the next block
        carry = data[cut:]
        if cut:
            yield parser.parse(data[:cut])
    if carry.strip():
        yield parser.parse(carry)
    parser.check_columns_seen()


class _JsonLinesParser:
    """Parses blocks of JSON lines into raw (user, item, count) tables, one file at a time.

    Arrow's JSON reader is fast but needs one type per column, fixed for the whole block (it
    refuses a block whose user ids are ``42`` on one line and ``"42"`` on another, or whose
    item is a number somewhere), and it cannot be asked to read "a string or an integer". So
    each block is first parsed by Arrow with explicit types -- items text, counts int64, user
    ids text or int64, whichever worked for the previous block first -- and only a block that
    Arrow refuses with both is parsed line by line with ``json``, where each value's type is
    checked on its own (and a broken line is one malformed record, not a failed file). Typical
    files, one id type throughout, never take the slow path.

    A missing or null count is 1 in JSON Lines: the count is an optional field of a record
    (Arrow's reader cannot tell an absent key from an explicit null).
    """

    def __init__(self, columns: RecordColumns):
        self._columns = columns
        self._user_types = [pa.string(), pa.int64()]
        # Whether some record of the file has the key (files lacking a required key are refused).
        self._seen = {columns.user: False, columns.item: False}
        self._keys = {n: json.dumps(n, ensure_ascii=False).encode("utf-8") for n in self._seen}
        self._records = 0

    def parse(self, chunk: bytes) -> Tuple[pa.Table, Dict[str, int]]:
        for user_type in list(self._user_types):
            try:
                table = self._parse_with_arrow(chunk, user_type)
            except pa.ArrowInvalid:
                continue
            if user_type != self._user_types[0]:
                self._user_types.reverse()
            return table, {}
        return self._parse_with_json(chunk)

    def _parse_with_arrow(self, chunk: bytes, user_type: pa.DataType) -> pa.Table:
        c = self._columns
        fields = [(c.user, user_type), (c.item, pa.string())]
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

    def _parse_with_json(self, chunk: bytes) -> Tuple[pa.Table, Dict[str, int]]:
        c = self._columns
        users: List[Optional[bytes]] = []
        items: List[Optional[str]] = []
        counts: List[int] = []
        drops: Dict[str, int] = collections.Counter()
        for line in chunk.split(b"\n"):
            if not line.strip():
                continue
            self._records += 1
            try:
                record = json.loads(line)
            except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
                drops["malformed"] += 1
                continue
            if not isinstance(record, dict):
                drops["malformed"] += 1
                continue
            for name in self._seen:
                self._seen[name] = self._seen[name] or name in record
            reason, row = _json_row(record, c)
            if reason:
                drops[reason] += 1
            else:
                users.append(row[0])
                items.append(row[1])
                counts.append(row[2])
        table = pa.table(
            {
                c.user: pa.array(users, pa.binary()),
                c.item: pa.array(items, pa.string()),
                **({c.count: pa.array(counts, pa.int64())} if c.count else {}),
            }
        )
        return table, dict(drops)

    def check_columns_seen(self) -> None:
        """Raises RecordFormatError if the file had records but none had the user/item key."""
        if not self._records:
            return
        for role, name in (("user id", self._columns.user), ("item", self._columns.item)):
            if not self._seen[name]:
                raise RecordFormatError(f"no {role} column {name!r}: no record has that key")


def _json_row(record: dict, c: RecordColumns) -> Tuple[Optional[str], Tuple]:
    """(drop reason or None, (user bytes, item, count)) for one JSON record.

    Missing users and items are passed on as None for ``normalise_batch`` to count; values of a
    wrong type are caught here, in the same order (user, item, count).
    """
    user, item = record.get(c.user), record.get(c.item)
    if user is None or user == "":
        return None, (None, None, 1)
    if isinstance(user, bool) or not isinstance(user, (str, int)):
        return "bad_user", ()
    try:
        user = user.encode("utf-8") if isinstance(user, str) else str(user).encode("ascii")
    except UnicodeEncodeError:  # a lone surrogate escape, "\ud800"
        return "bad_user", ()
    if item is None or item == "":
        return None, (user, None, 1)
    if not isinstance(item, str):
        return "bad_item", ()
    try:
        item.encode("utf-8")
    except UnicodeEncodeError:
        return "bad_item", ()
    count = record.get(c.count) if c.count else None
    if count is None:
        count = 1
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= _INT64_MAX:
        return "bad_count", ()
    return None, (user, item, count)


# ---------------------------------------------------------------------------------------------
# Beam.


@beam.typehints.with_input_types(str)
@beam.typehints.with_output_types(pa.RecordBatch)
class ReadRecordFileDoFn(beam.DoFn):
    """A file path -> its records as ``RECORD_SCHEMA`` batches, counting what is dropped.

    Counters (namespace ``triehh``): ``records_read`` and ``records_<reason>`` for each of
    ``DROP_REASONS``. Raises ``RecordFormatError`` (naming the file) as ``iter_record_batches``.
    Usable on its own after any transform that yields paths (e.g. ``fileio.MatchContinuously``).
    """

    def __init__(
        self,
        format: Optional[str] = None,
        columns: RecordColumns = RecordColumns(),
        batch_size: int = DEFAULT_BATCH_SIZE,
    ):
        if format is not None and format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS} or None, got {format!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self._format = format
        self._columns = columns
        self._batch_size = batch_size

    def setup(self):
        self._records_read = Metrics.counter(METRICS_NAMESPACE, "records_read")
        self._dropped = {
            reason: Metrics.counter(METRICS_NAMESPACE, f"records_{reason}")
            for reason in DROP_REASONS
        }

    def process(self, path: str) -> Iterator[pa.RecordBatch]:
        batches = iter_record_batches(path, self._format, self._columns, self._batch_size)
        for batch, drops in batches:
            read = batch.num_rows
            for reason, n in drops.items():
                if n:
                    self._dropped[reason].inc(n)
                    read += n
            if read:
                self._records_read.inc(read)
            if batch.num_rows:
                yield batch


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
    """Reads device records from files as ``RECORD_SCHEMA`` ``pyarrow.RecordBatch`` elements.

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

    Raises (when applied):
      FileNotFoundError: a pattern matches no file; the message names it.
      ValueError: a bad argument, or a file whose format cannot be inferred.
    Raises (when run): RecordFormatError naming the file (see ``iter_record_batches``).

    Output: ``pyarrow.RecordBatch`` elements with schema ``RECORD_SCHEMA``, none empty.
    """

    def __init__(
        self,
        file_pattern: Union[str, Sequence[str]],
        format: Optional[str] = None,
        user_column: str = "user_id",
        item_column: str = "item",
        count_column: Optional[str] = "count",
        batch_size: int = DEFAULT_BATCH_SIZE,
    ):
        super().__init__()
        self._patterns = _split_patterns(file_pattern)
        self._format = format or None
        self._columns = RecordColumns(user_column, item_column, count_column or None)
        # Validates format and batch_size now, before any graph is built.
        self._read_fn = ReadRecordFileDoFn(self._format, self._columns, batch_size)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection[pa.RecordBatch]:
        paths = _match_files(self._patterns)
        for path in paths:
            _compression(path, self._format or infer_format(path))
        return (
            pbegin
            | "ListFiles" >> beam.Create(paths).with_output_types(str)
            # Spreads the files over workers (Create may hand them all to one).
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFiles" >> beam.ParDo(self._read_fn)
        )


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
    rows' one type (int64, string or binary). A compression suffix (.gz, .bz2, .zst) compresses
    JSON Lines and CSV.

    Args:
      path: a local path; its extension gives the format when ``format`` is None.
      rows: the records.
      format: ``"jsonl"``, ``"csv"`` or ``"parquet"``.
      columns: the column names to write.
      row_group_size: Parquet rows per row group (pyarrow's default when None).

    Raises:
      ValueError: rows of mixed lengths, or user ids of mixed types for Parquet.
      TypeError: bytes user ids for JSON Lines or CSV (they are text formats).
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
    elif format == "parquet":
        try:
            user_array = pa.array(users) if users else pa.array([], pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ValueError(f"a Parquet column has one type; these user ids mix types: {e}") from e
        if pa.types.is_null(user_array.type):
            user_array = user_array.cast(pa.string())
    else:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    arrays = {columns.user: user_array, columns.item: pa.array(items, pa.string())}
    if with_count:
        arrays[columns.count] = pa.array(counts, pa.int64())
    table = pa.table(arrays)
    if format == "csv":
        with pa.output_stream(path, compression="detect") as out:
            pa_csv.write_csv(table, out)
    else:
        _compression(path, "parquet")
        pq.write_table(table, path, row_group_size=row_group_size)
