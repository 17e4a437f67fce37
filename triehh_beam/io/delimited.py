"""CSV records files: a header line naming the columns, then one record per row. Cells are
read as text (a user ``007`` stays ``"007"``, a bad count cell is one dropped record, not a
failed file) by Arrow's streaming CSV reader, in blocks; a row with the wrong number of fields
is ``malformed`` and a line that is not UTF-8 is taken out before Arrow sees it (Arrow would
refuse the whole file for it), each kept raw for the dead letter. A header that is not UTF-8 or
lacks the user or item column is a ``RecordFormatError``.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.csv as pa_csv

from triehh_beam.io.lines import Rejects, split_non_utf8_lines
from triehh_beam.io.normalise import is_utf8, require_columns
from triehh_beam.io.schema import RawBlock, RecordColumns, RecordFormatError, RecordOptions
from triehh_beam.io.streams import FullReads, PrefixedStream

__all__ = ["read_csv"]

# Files are parsed this many bytes at a time (then cut to batch_size rows).
_BLOCK_BYTES = 4 << 20
_PEEK_BYTES = 64 << 10


class _Utf8LineFilter(FullReads):
    """A CSV file's bytes, whole lines at a time, without its lines that are not UTF-8.

    Arrow's CSV reader refuses a whole file for one such line (and cannot even report a
    malformed row holding one), so those lines are taken out before it sees them and counted
    in ``rejects``: ``malformed`` if the row has the wrong number of fields anyway, else
    ``invalid_utf8``. A block that is valid UTF-8 (the normal case) passes after one check.
    """

    def __init__(self, raw, rejects: Rejects, fields: int):
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
        if data.isascii() or is_utf8(whole_lines):
            self._out = whole_lines  # the normal case: no copy
        else:
            self._out = memoryview(
                split_non_utf8_lines(bytes(whole_lines), self._rejects, self._classify, True)
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


def read_csv(
    f, columns: RecordColumns, options: RecordOptions, batch_size: int, keep_rejected: bool
) -> Iterator[RawBlock]:
    # The header is read first: it says whether the optional count column is there, and so
    # which columns to type as text (a count column that is absent must not become all-null).
    prefix, header = _peek_csv_header(f)
    if header is None:
        return
    require_columns(header, columns)
    wanted = [columns.user, columns.item]
    if columns.count is not None and columns.count in header:
        wanted.append(columns.count)
    rejects = Rejects(keep_rejected)

    def skip_malformed(row) -> str:
        rejects.add("malformed", row.text.encode("utf-8") if rejects.keep else None)
        return "skip"

    reader = pa_csv.open_csv(
        _Utf8LineFilter(PrefixedStream(prefix, f), rejects, len(header)),
        read_options=pa_csv.ReadOptions(block_size=_BLOCK_BYTES),
        parse_options=pa_csv.ParseOptions(invalid_row_handler=skip_malformed),
        # All text: a user "007" stays "007" and a bad count cell is one dropped record.
        convert_options=pa_csv.ConvertOptions(
            column_types={name: pa.string() for name in wanted}, include_columns=wanted
        ),
    )
    for batch in reader:  # Arrow checks that string columns are UTF-8
        counts, rows = rejects.take()
        yield RawBlock(batch, counts, rows, utf8_checked=True)
    # The parser runs ahead of the batches: rows it skipped after the last one are counted here.
    counts, rows = rejects.take()
    if counts:
        empty = pa.RecordBatch.from_pylist([], schema=reader.schema)
        yield RawBlock(empty, counts, rows, utf8_checked=True)


