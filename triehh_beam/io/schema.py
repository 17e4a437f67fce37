"""The shape of normalised device records and the settings of the reader, defined once here:
the formats, the column names (``RecordColumns``), how values are read and which are too big
(``RecordOptions``), the Arrow schema of a normalised batch (``record_schema``: ``user_id``
binary, ``item`` string/binary/int64 by item kind, ``count`` int64, and with a timestamp column
``timestamp`` int64 microseconds), and ``RecordFormatError``,
what a file that cannot be read as records raises; docs/input.md states the whole contract.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple, Union

import pyarrow as pa

from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind

__all__ = [
    "BYTES_ENCODINGS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_ITEM_BYTES",
    "DEFAULT_MAX_USER_BYTES",
    "FORMATS",
    "ITEM_TYPES",
    "RECORD_SCHEMA",
    "RawBlock",
    "RawLine",
    "RecordBlock",
    "RecordColumns",
    "RecordFormatError",
    "RecordOptions",
    "RejectedRow",
    "TIMESTAMP_FIELD",
    "check_timestamp_column",
    "record_schema",
]

DEFAULT_BATCH_SIZE = 65536
FORMATS = ("jsonl", "csv", "parquet")
BYTES_ENCODINGS = ("base64", "hex")
DEFAULT_MAX_USER_BYTES = 256
DEFAULT_MAX_ITEM_BYTES = 4096
# The normalised batch's column of record times (int64 microseconds since the epoch, UTC), when
# RecordOptions.timestamp_column names the input column to read them from.
TIMESTAMP_FIELD = "timestamp"

ITEM_TYPES = {ItemKind.TEXT: pa.string(), ItemKind.BYTES: pa.binary(), ItemKind.INT: pa.int64()}


def record_schema(
    item_kind: Union[ItemKind, str] = ItemKind.TEXT, timestamps: bool = False
) -> pa.Schema:
    """The schema of normalised batches for items of ``item_kind`` (item string/binary/int64),
    with a ``timestamp`` column (``TIMESTAMP_FIELD``, int64 microseconds since the epoch, UTC)
    last when ``timestamps`` (``RecordOptions.timestamp_column`` set)."""
    return _record_schema(ItemKind(item_kind), bool(timestamps))


@functools.lru_cache(maxsize=None)
def _record_schema(item_kind: ItemKind, timestamps: bool) -> pa.Schema:
    fields = [
        pa.field("user_id", pa.binary(), nullable=False),
        pa.field("item", ITEM_TYPES[item_kind], nullable=False),
        pa.field("count", pa.int64(), nullable=False),
    ]
    if timestamps:
        fields.append(pa.field(TIMESTAMP_FIELD, pa.int64(), nullable=False))
    return pa.schema(fields)


RECORD_SCHEMA = record_schema(ItemKind.TEXT)


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
      normalise_user_ids: text user ids (string columns) lose surrounding white space and are
        put in Unicode NFC, so that ``" 42"`` and ``"42"`` are one user; an id left empty is
        ``missing_user``. Integer and binary ids are taken as they are.
      timestamp_column: the input column holding when each record happened, or None (the
        default: no time). When set, every file must have the column, and the normalised
        batch gains a last column ``timestamp`` (``TIMESTAMP_FIELD``): int64 microseconds
        since the Unix epoch, UTC. A number is milliseconds since the epoch, text is RFC 3339
        with an offset or ``Z`` (or milliseconds in decimal), a Parquet timestamp is converted
        (``triehh_beam.io.timestamps``); a missing value or anything else is ``bad_timestamp``.

    Raises:
      ValueError: for an unknown kind or encoding, an encoding for items that are not bytes,
        ``int_bits`` outside 1..64 or given for items that are not integers, limits below 1,
        a timestamp column name that is not a non-empty string.
    """

    item_kind: ItemKind = ItemKind.TEXT
    int_bits: Optional[int] = None
    bytes_encoding: Optional[str] = None
    max_user_bytes: int = DEFAULT_MAX_USER_BYTES
    max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES
    normalise_user_ids: bool = False
    timestamp_column: Optional[str] = None

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
        column = self.timestamp_column
        if column is not None and (not isinstance(column, str) or not column):
            raise ValueError(f"timestamp_column must be a non-empty string or None, got {column!r}")

    @classmethod
    def for_encoder(
        cls,
        encoder: ItemEncoder,
        bytes_encoding: Optional[str] = None,
        max_user_bytes: int = DEFAULT_MAX_USER_BYTES,
        max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES,
        normalise_user_ids: bool = False,
        timestamp_column: Optional[str] = None,
    ) -> "RecordOptions":
        """The options that read items of ``encoder``'s kind (and integer width)."""
        return cls(
            item_kind=encoder.kind,
            int_bits=encoder.int_bits,
            bytes_encoding=bytes_encoding,
            max_user_bytes=max_user_bytes,
            max_item_bytes=max_item_bytes,
            normalise_user_ids=normalise_user_ids,
            timestamp_column=timestamp_column,
        )

    @property
    def schema(self) -> pa.Schema:
        return record_schema(self.item_kind, self.timestamp_column is not None)


def check_timestamp_column(columns: RecordColumns, options: RecordOptions) -> None:
    """Refuses a timestamp column that is also the user, item or count column.

    Raises:
      ValueError: naming the column.
    """
    column = options.timestamp_column
    if column is not None and column in (columns.user, columns.item, columns.count):
        raise ValueError(
            f"the timestamp column {column!r} must differ from the user, item and count columns"
        )


class RejectedRow(NamedTuple):
    """A record dropped by the reader: why, the record itself, and where it was in its file.

    ``raw`` is the exact input record (``bytes``, without its line break) for JSON Lines and
    CSV -- one line, or for a CSV record with a quoted line break the lines it spans -- and a
    JSON object rendering the parsed row (``str``) for Parquet, which has no lines: strings as
    strings, binary and text that is not UTF-8 as ``{"base64": ...}``. ``line`` is the
    1-based line the record starts on (JSON Lines, CSV; the CSV header is line 1), ``row_index``
    the 0-based position of the row in its Parquet file (across row groups); the other is None.
    """

    reason: str
    raw: Union[bytes, str]
    line: Optional[int] = None
    row_index: Optional[int] = None


class RecordBlock(NamedTuple):
    """What ``iter_record_blocks`` yields: good rows, drop counts, and the rejected rows."""

    batch: pa.RecordBatch
    drops: Dict[str, int]
    rejected: Tuple[RejectedRow, ...]


# The raw form of a row a format reader kept: (1-based line it starts on, its exact bytes).
RawLine = Tuple[int, bytes]


class RawBlock(NamedTuple):
    """What a format reader (``jsonl``, ``delimited``, ``parquet``) yields for normalisation.

    ``data``: raw columns as found in the file; ``drops`` and ``rejected``: the rows the format
    reader itself took out; ``raw_line(i)``: the line and raw bytes of row ``i`` of ``data``
    (None, or no function: render the parsed row); ``first_row``: the 0-based position in its
    file of row 0 of ``data`` (Parquet, which has rows, not lines); ``utf8_checked``: the reader
    made sure its text is UTF-8.
    """

    data: Union[pa.RecordBatch, pa.Table]
    drops: Dict[str, int]
    rejected: List[RejectedRow]
    raw_line: Optional[Callable[[int], Optional[RawLine]]] = None
    utf8_checked: bool = False
    first_row: Optional[int] = None
