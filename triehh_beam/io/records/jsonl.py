"""JSON Lines records files: one JSON object per line, blank lines skipped. Blocks of whole
lines are parsed by Arrow's JSON reader with explicit column types; only a 64 KiB sub-block
that Arrow refuses (mixed user id types, a value of the wrong type, a broken line) is parsed
line by line with ``json``, where each value is checked on its own and a broken line is one
``malformed`` record. A missing or null count is 1; a file whose records all lack the user or
item key (or the timestamp key, when one is read) is a ``RecordFormatError`` (known only at its
end).
"""

from __future__ import annotations

import json
from typing import Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from triehh_beam.io.records.lines import Rejects, count_lines, split_non_utf8_lines
from triehh_beam.io.schema import RawBlock, RawLine, RecordColumns, RecordFormatError, RecordOptions
from triehh_beam.io.timestamps import micros_of_values
from triehh_beam.protocol.items.encoding import ItemKind

__all__ = ["read_jsonl"]

# Files are parsed this many bytes at a time (then cut to batch_size rows).
_BLOCK_BYTES = 4 << 20
# A block Arrow refuses is retried in sub-blocks of about this size.
_SUB_BLOCK_BYTES = 64 << 10
# The characters JSON counts as white space (a line of only these is skipped).
_JSON_SPACE = b" \t\r"
_INT64_MAX = 2**63 - 1


def read_jsonl(
    f, columns: RecordColumns, options: RecordOptions, batch_size: int, keep_rejected: bool
) -> Iterator[RawBlock]:
    parser = _JsonLinesParser(columns, options, keep_rejected)
    carry = b""
    line = 1  # the number of the first line of the next chunk
    while True:
        block = f.read(_BLOCK_BYTES)
        if not block:
            break
        data = carry + block if carry else block
        cut = data.rfind(b"\n") + 1  # parse whole lines; the rest waits for the next block
        carry = data[cut:]
        if cut:
            chunk = data[:cut]
            yield from parser.parse(chunk, line)
            line += count_lines(chunk)
    if carry.strip(_JSON_SPACE + b"\n"):
        yield from parser.parse(carry, line)
    parser.check_columns_seen()


def _nonblank_lines(data: bytes, first_line: int) -> List[RawLine]:
    """(number, line) of the lines Arrow's JSON reader reads a row from (it skips blank ones)."""
    return [
        (first_line + index, line)
        for index, line in enumerate(data.split(b"\n"))
        if line.strip(_JSON_SPACE)
    ]


def _cut_lines(data: bytes, size: int, first_line: int) -> Iterator[Tuple[bytes, int]]:
    """``data`` (whole lines) in pieces of about ``size`` bytes, cut after a line break, each
    with the number of its first line."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", min(start + size, len(data)) - 1)
        end = len(data) if end < 0 else end + 1
        yield data[start:end], first_line
        first_line += count_lines(data[start:end])
        start = end


class _JsonLinesParser:
    """Parses blocks of JSON lines into raw (user, item, count) tables, one file at a time.

    Every row keeps the number of its line, for the dead letter. Lines that are not UTF-8 are
    taken out first (blanked: Arrow would take them as they are). Arrow's JSON reader is fast
    but needs one type per column, fixed for the whole block (it refuses a
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
        self._rejects = Rejects(keep_rejected)
        self._user_types = [pa.string(), pa.int64()]
        self._item_type = pa.int64() if options.item_kind is ItemKind.INT else pa.string()
        # Timestamps are text (RFC 3339) or numbers (milliseconds): tried like the user types.
        self._stamp = options.timestamp_column
        self._stamp_types = [pa.string(), pa.int64(), pa.float64()] if self._stamp else [None]
        # Whether some record of the file has the key (files lacking a required key are refused).
        self._seen = {columns.user: False, columns.item: False}
        if self._stamp:
            self._seen[self._stamp] = False
        self._keys = {n: json.dumps(n, ensure_ascii=False).encode("utf-8") for n in self._seen}
        self._records = 0

    def parse(self, chunk: bytes, first_line: int) -> Iterator[RawBlock]:
        """Blocks of ``chunk`` (whole lines, the first numbered ``first_line``)."""
        chunk = split_non_utf8_lines(
            chunk, self._rejects, self._classify_non_utf8, first_line=first_line
        )
        table = self._parse_with_arrow(chunk)
        if table is not None:
            yield self._arrow_block(table, chunk, first_line)
            return
        pieces = [(chunk, first_line)]
        if len(chunk) > _SUB_BLOCK_BYTES:
            pieces = list(_cut_lines(chunk, _SUB_BLOCK_BYTES, first_line))
        for piece, line in pieces:
            table = self._parse_with_arrow(piece) if len(pieces) > 1 else None
            if table is not None:
                yield self._arrow_block(table, piece, line)
            else:
                yield self._parse_with_json(piece, line)

    def _arrow_block(self, table: pa.Table, chunk: bytes, first_line: int) -> RawBlock:
        counts, rows = self._rejects.take()
        lines: List[RawLine] = []

        def raw_line(i: int) -> Optional[RawLine]:
            if not lines:
                lines.extend(_nonblank_lines(chunk, first_line))
            # One row per non-blank line; if Arrow saw it otherwise, render the row instead.
            return lines[i] if len(lines) == table.num_rows else None

        # The chunk is UTF-8 (bad lines were blanked) and Arrow refuses bad escapes: no check.
        return RawBlock(table, counts, rows, raw_line, utf8_checked=True)

    def _parse_with_arrow(self, chunk: bytes) -> Optional[pa.Table]:
        for user_type in list(self._user_types):
            for stamp_type in list(self._stamp_types):
                try:
                    table = self._arrow_table(chunk, user_type, stamp_type)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                    continue
                # The types that worked are tried first for the next block.
                for types, found in ((self._user_types, user_type),
                                     (self._stamp_types, stamp_type)):
                    types.remove(found)
                    types.insert(0, found)
                return table
        return None

    def _arrow_table(
        self, chunk: bytes, user_type: pa.DataType, stamp_type: Optional[pa.DataType]
    ) -> pa.Table:
        c = self._columns
        fields = [(c.user, user_type), (c.item, self._item_type)]
        if c.count:
            fields.append((c.count, pa.int64()))
        if self._stamp:
            fields.append((self._stamp, stamp_type))
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

    def _parse_with_json(self, chunk: bytes, first_line: int) -> RawBlock:
        c = self._columns
        users: List[Optional[bytes]] = []
        items: List[Optional[str]] = []
        counts: List[int] = []
        stamps: List[object] = []
        lines: List[RawLine] = []  # the number and line of each row passed on
        rejects = self._rejects
        for number, line in enumerate(chunk.split(b"\n"), first_line):
            if not line.strip(_JSON_SPACE):
                continue
            self._records += 1
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, or nested too deep for Python
                rejects.add("malformed", line, number)
                continue
            if not isinstance(record, dict):
                rejects.add("malformed", line, number)
                continue
            for name in self._seen:
                self._seen[name] = self._seen[name] or name in record
            reason, row = _json_row(record, c, self._options)
            if reason:
                rejects.add(reason, line, number)
            else:
                users.append(row[0])
                items.append(row[1])
                counts.append(row[2])
                stamps.append(row[3])
                lines.append((number, line))
        columns = {
            c.user: pa.array(users, pa.binary()),
            c.item: pa.array(items, pa.string()),
            **({c.count: pa.array(counts, pa.int64())} if c.count else {}),
        }
        if self._stamp:  # values of several types: converted here, column by type
            columns[self._stamp] = micros_of_values(stamps)
        table = pa.table(columns)
        drops, rows = rejects.take()
        return RawBlock(table, drops, rows, lines.__getitem__, utf8_checked=True)

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
        roles = [("user id", self._columns.user), ("item", self._columns.item)]
        if self._stamp:
            roles.append(("timestamp", self._stamp))
        for role, name in roles:
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
    """(drop reason or None, (user bytes, item text, count, timestamp value)) for one record.

    The reasons only Python sees (a lone surrogate, a value of the wrong JSON type, an
    oversized user id, which comes before them in the order) are decided here, in the order
    of ``DROP_REASONS``; missing users and items are passed on as None, a bad count as -1,
    an integer item as its decimal text and the timestamp as parsed, for ``normalise_batch``
    to count in the same order.
    """
    user, item = record.get(c.user), record.get(c.item)
    stamp = record.get(options.timestamp_column) if options.timestamp_column else None
    if _not_utf8(user) or _not_utf8(item) or _not_utf8(stamp):
        return "invalid_utf8", ()
    if user is None or user == "":
        return None, (None, None, 1, stamp)
    if isinstance(user, bool) or not isinstance(user, (str, int)):
        return "bad_user", ()
    user = user.encode("utf-8") if isinstance(user, str) else str(user).encode("ascii")
    if len(user) > options.max_user_bytes:
        return "oversized_user", ()
    if item is None or item == "":
        return None, (user, None, 1, stamp)
    if options.item_kind is ItemKind.INT and isinstance(item, int) and not isinstance(item, bool):
        item = str(item)
    if not isinstance(item, str):
        return "bad_item", ()
    count = record.get(c.count) if c.count else None
    if count is None:
        count = 1
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= _INT64_MAX:
        count = -1
    return None, (user, item, count, stamp)


