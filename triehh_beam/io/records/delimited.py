"""CSV records files: a header line naming the columns, then one record per row. The file is
cut into blocks of whole records (a quoted line break stays inside its record) and each block
is parsed by Arrow's CSV reader, cells as text (a user ``007`` stays ``"007"``, a bad count
cell is one dropped record, not a failed file). A row with the wrong number of fields is
``malformed`` and a line that is not UTF-8 is blanked before Arrow sees it (Arrow would refuse
the whole file for it). Every rejected row keeps its raw record and line number for the dead
letter, found again only for the blocks that have one. A header that is not UTF-8 or lacks the
user or item column is a ``RecordFormatError``.
"""

from __future__ import annotations

import concurrent.futures
import csv
import io
import re
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from triehh_beam.io.normalise import require_columns
from triehh_beam.io.records.lines import Rejects, count_lines, split_non_utf8_lines
from triehh_beam.io.schema import RawBlock, RawLine, RecordColumns, RecordFormatError, RecordOptions

__all__ = ["read_csv"]

# Files are parsed this many bytes at a time (then cut to batch_size rows).
_BLOCK_BYTES = 4 << 20
_PEEK_BYTES = 64 << 10
_HAS_CONTENT = re.compile(rb"[^\r\n]")


def _peek_csv_header(f) -> Tuple[bytes, Optional[List[str]]]:
    """(the bytes after the header line, the header's column names or None for an empty file).

    Raises:
      RecordFormatError: the header line is not UTF-8.
    """
    prefix = b""
    while True:
        chunk = f.read(_PEEK_BYTES)
        prefix += chunk
        if not chunk or b"\n" in chunk or b"\r" in chunk:
            break
    if prefix.endswith(b"\r"):  # a "\r\n" cut in two
        prefix += f.read(1)
    if not prefix.strip():
        return b"", None
    first_line = re.split(rb"[\r\n]", prefix, maxsplit=1)[0]
    rest = prefix[len(first_line) :]
    rest = rest[2:] if rest.startswith(b"\r\n") else rest[1:]
    try:
        text = first_line.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RecordFormatError("the header line is not UTF-8") from None
    try:
        return rest, next(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise RecordFormatError(f"cannot parse the header line: {e}") from None


def _record_cut(data: bytes) -> int:
    """Where to cut ``data`` (which starts a record) so the first part holds whole records.

    After the last line break outside quotes: with an even number of ``"`` before it, as a
    standard CSV writer quotes. Data without quotes (the usual case) is cut after its last
    ``\\n`` after one scan. If no line break qualifies (a stray quote inside a field), after the
    last ``\\n`` anyway, as Arrow's own reader cuts a file.
    """
    end = data.rfind(b"\n") + 1
    if not end or b'"' not in data:
        return end
    cut, quotes = end, data.count(b'"', 0, end)
    while cut > 0:
        if quotes % 2 == 0:
            return cut
        previous = data.rfind(b"\n", 0, cut - 1) + 1
        quotes -= data.count(b'"', previous, cut)
        cut = previous
    return end


def _blocks(f, start: bytes) -> Iterator[bytes]:
    """The data bytes of a CSV file (after the header), in blocks of whole records."""
    carry = start
    while True:
        block = f.read(_BLOCK_BYTES)
        if not block:
            if carry:
                yield carry
            return
        data = carry + block if carry else block
        cut = _record_cut(data)
        carry = data[cut:]
        if cut:
            yield data[:cut]


def _records(data: bytes, first_line: int) -> Optional[List[RawLine]]:
    """(line it starts on, raw bytes) of each record of a block, blank lines skipped, as
    Arrow reads them; None if the block cannot be cut into records (Python's CSV parser
    refuses it).

    Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r``. Without quotes a record is a line;
    with them, Python's CSV parser (which quotes as Arrow's does: only at the start of a
    field) says how many lines each record spans.
    """
    lines = data.splitlines(keepends=True)
    if b'"' not in data:
        return [
            (first_line + i, line.rstrip(b"\r\n"))
            for i, line in enumerate(lines)
            if line not in (b"\n", b"\r\n", b"\r")
        ]
    reader = csv.reader(line.decode("utf-8", "surrogateescape") for line in lines)
    records, start = [], 0
    try:
        for fields in reader:
            end = reader.line_num
            if fields:
                raw = b"".join(lines[start:end])
                records.append((first_line + start, _without_line_break(raw)))
            start = end
    except csv.Error:
        return None
    return records


def _without_line_break(raw: bytes) -> bytes:
    if raw.endswith(b"\r\n"):
        return raw[:-2]
    return raw[:-1] if raw.endswith((b"\n", b"\r")) else raw


class _CsvBlockParser:
    """Parses blocks of whole CSV records with Arrow, one file at a time, and finds the raw
    record and line of each row again when a dead letter needs it."""

    def __init__(self, header: Sequence[str], wanted: Sequence[str], keep_rejected: bool):
        self._rejects = Rejects(keep_rejected)
        self._fields = len(header)
        # For a dead letter, one thread: Arrow then numbers the rows it skips. Otherwise Arrow
        # parses a block's 1 MiB pieces in parallel.
        self._read_options = pa_csv.ReadOptions(
            column_names=list(header), use_threads=not keep_rejected
        )
        self._empty = pa.table({name: pa.array([], pa.string()) for name in wanted})
        self._convert_options = pa_csv.ConvertOptions(
            # All text: a user "007" stays "007" and a bad count cell is one dropped record.
            column_types={name: pa.string() for name in wanted},
            include_columns=list(wanted),
        )

    def parse(self, data: bytes, first_line: int) -> RawBlock:
        """One block (whole records; its first line is numbered ``first_line``)."""
        data = split_non_utf8_lines(data, self._rejects, self._classify, True, first_line)
        malformed: List[Tuple[int, str]] = []  # (record number in the block, from 1; text)

        def skip(row) -> str:
            malformed.append((row.number, row.text))
            return "skip"

        if not _HAS_CONTENT.search(data):  # blank lines only (Arrow refuses an "empty file")
            counts, rows = self._rejects.take()
            return RawBlock(self._empty, counts, rows, utf8_checked=True)
        table = pa_csv.read_csv(
            pa.BufferReader(data),
            read_options=self._read_options,
            # Quoted line breaks are values (the blocks are cut between records).
            parse_options=pa_csv.ParseOptions(newlines_in_values=True, invalid_row_handler=skip),
            convert_options=self._convert_options,
        )
        index = _BlockIndex(data, first_line, table.num_rows, malformed)
        for number, text in malformed:
            if self._rejects.keep:
                self._rejects.add("malformed", *index.malformed(number, text))
            else:
                self._rejects.add("malformed")
        counts, rows = self._rejects.take()
        rows.sort(key=lambda row: (row.line is None, row.line or 0))  # in file order
        return RawBlock(table, counts, rows, index.good_row, utf8_checked=True)

    def _classify(self, line: bytes) -> str:
        """A line that is not UTF-8: ``malformed`` if it has the wrong number of fields too."""
        text = line.decode("utf-8", "surrogateescape")
        try:
            fields = next(csv.reader([text]), [])
        except csv.Error:  # e.g. a NUL byte
            return "malformed"
        return "invalid_utf8" if len(fields) == self._fields else "malformed"


class _BlockIndex:
    """The records of one parsed block, found on first use: a malformed row's raw record and
    line from Arrow's record number, a good row's from its position in the table."""

    def __init__(self, data: bytes, first_line: int, rows: int, malformed: List[Tuple[int, str]]):
        self._data = data
        self._first_line = first_line
        self._rows = rows
        self._malformed = malformed
        self._records: Optional[List[RawLine]] = None
        self._good: Optional[np.ndarray] = None
        self._found = False

    def _find(self) -> None:
        if self._found:
            return
        self._found = True
        records = _records(self._data, self._first_line)
        if records is None or len(records) != self._rows + len(self._malformed):
            return  # Arrow cut the records otherwise: rows are rendered, lines unknown
        self._records = records
        bad = np.array([number - 1 for number, _ in self._malformed], dtype=np.int64)
        self._good = np.delete(np.arange(len(records)), bad)

    def malformed(self, number: Optional[int], text: str) -> Tuple[bytes, Optional[int]]:
        """(raw record, line) of a row Arrow skipped; the text Arrow gave when not found."""
        self._find()
        if self._records is not None and number is not None and 0 < number <= len(self._records):
            line, raw = self._records[number - 1]
            return raw, line
        return text.encode("utf-8", "surrogateescape"), None

    def good_row(self, i: int) -> Optional[RawLine]:
        self._find()
        if self._records is None:
            return None
        return self._records[int(self._good[i])]


def read_csv(
    f, columns: RecordColumns, options: RecordOptions, batch_size: int, keep_rejected: bool
) -> Iterator[RawBlock]:
    # The header is read first: it says whether the optional count column is there, and so
    # which columns to type as text (a count column that is absent must not become all-null).
    rest, header = _peek_csv_header(f)
    if header is None:
        return
    require_columns(header, columns, options)
    wanted = [columns.user, columns.item]
    if columns.count is not None and columns.count in header:
        wanted.append(columns.count)
    if options.timestamp_column is not None:
        wanted.append(options.timestamp_column)
    parser = _CsvBlockParser(header, wanted, keep_rejected)
    line = 2  # the header is line 1
    # Arrow parses a block in a thread of its own while the rows of the one before are
    # normalised (it lets go of the GIL): reading costs about the parse alone.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="csv-parse") as pool:
        parsed = None
        for data in _blocks(f, rest):
            parsing = pool.submit(parser.parse, data, line)
            line += count_lines(data, csv_lines=True)
            if parsed is not None:
                yield parsed.result()
            parsed = parsing
        if parsed is not None:
            yield parsed.result()
