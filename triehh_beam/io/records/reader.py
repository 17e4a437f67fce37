"""Reading one records file without Beam: ``iter_record_batches`` yields its records as
normalised ``record_schema`` batches of at most ``batch_size`` rows with the rows dropped per
reason, ``iter_record_blocks`` also the rejected rows themselves (for a dead letter), and
``parquet_row_groups`` the row groups a Parquet file can be read in, one at a time. Any file
that cannot be read in its format (a parse error, a corrupt or truncated compressed stream, a
missing or unusable column) raises ``RecordFormatError`` naming the file; nothing else escapes
for bad input.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import math
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import pyarrow as pa

from triehh_beam.io.arrays import as_binary, decoded, is_bytes, is_text, is_utf8
from triehh_beam.io.normalise import as_batches, normalise_block, single_batch
from triehh_beam.io.records import delimited, jsonl, parquet
from triehh_beam.io.schema import (DEFAULT_BATCH_SIZE, FORMATS, RawBlock, RecordBlock, RecordColumns,
                                   RecordFormatError, RecordOptions, RejectedRow, check_timestamp_column)
from triehh_beam.io.streams import (UNREADABLE_ERRORS, compression_of, describe_error, infer_format,
                                    open_records)

__all__ = ["iter_record_batches", "iter_record_blocks", "normalised_blocks", "parquet_row_groups", "render_row"]

_FORMAT_READERS = {"jsonl": jsonl.read_jsonl, "csv": delimited.read_csv}


def iter_record_batches(
    path: str,
    format: Optional[str] = None,
    columns: RecordColumns = RecordColumns(),
    batch_size: int = DEFAULT_BATCH_SIZE,
    options: RecordOptions = RecordOptions(),
    row_group: Optional[int] = None,
) -> Iterator[Tuple[pa.RecordBatch, Dict[str, int]]]:
    """Reads one records file as normalised batches, without loading it whole.

    Args:
      path: a local or ``gs://`` path (anything ``FileSystems`` opens). JSON Lines and CSV may be
        compressed (.gz, .bz2, .zst, .deflate, .xz: the suffix says which).
      format: ``"jsonl"``, ``"csv"``, ``"parquet"``, or ``None`` to infer it from the extension.
      columns: the column names.
      batch_size: the largest number of rows in a yielded batch.
      options: the item kind and the checks (``RecordOptions``).
      row_group: Parquet only: read this row group of the file only (``parquet_row_groups``).

    Yields:
      ``(batch, drops)``: a ``record_schema`` batch of at most ``batch_size`` rows (possibly
      none, when a whole block was dropped) and the rows dropped per reason (``DROP_REASONS``)
      since the previous yield. Batches own compact buffers (not views of a larger block), so
      that serialising one costs its own size.

    Raises:
      RecordFormatError: the file cannot be parsed in its format, lacks a required column, or
        has a column of the wrong type; the message names the file. For JSON Lines the
        missing-column check can only be made at the end of the file, after its batches were
        yielded.
      FileNotFoundError: the file does not exist.
      ValueError: the format cannot be inferred, a compressed Parquet file, or a row group
        for a file that is not Parquet.
    """
    for block in iter_record_blocks(path, format, columns, batch_size, options, row_group=row_group):
        yield block.batch, block.drops


def iter_record_blocks(
    path: str,
    format: Optional[str] = None,
    columns: RecordColumns = RecordColumns(),
    batch_size: int = DEFAULT_BATCH_SIZE,
    options: RecordOptions = RecordOptions(),
    keep_rejected: bool = False,
    row_group: Optional[int] = None,
) -> Iterator[RecordBlock]:
    """``iter_record_batches`` that also returns the rejected rows (``keep_rejected=True``).

    Yields:
      ``RecordBlock(batch, drops, rejected)``: as ``iter_record_batches``, and the rows
      dropped since the previous yield as ``RejectedRow(reason, raw)`` (always empty unless
      ``keep_rejected``). Keeping them costs only for the rejected rows.

    Raises:
      As ``iter_record_batches``.
    """
    format = _check_arguments(path, format, batch_size)
    check_timestamp_column(columns, options)
    if row_group is not None and format != "parquet":
        raise ValueError(f"{path!r}: only Parquet files are read by row group, not {format}")
    compression = compression_of(path, format)
    with _naming_the_file(path, format):
        with open_records(path, compression) as f:
            if format == "parquet":
                raw_blocks = parquet.read_parquet(
                    f, columns, options, batch_size, keep_rejected, row_group
                )
            else:
                raw_blocks = _FORMAT_READERS[format](f, columns, options, batch_size, keep_rejected)
            yield from normalised_blocks(raw_blocks, columns, options, batch_size, keep_rejected)


def parquet_row_groups(
    path: str, columns: RecordColumns = RecordColumns(), options: RecordOptions = RecordOptions()
) -> List[int]:
    """The number of rows in each row group of a Parquet file, from its footer (schema checked).

    Raises:
      RecordFormatError: not a Parquet file, a missing column or one of an unusable type; the
        message names the file.
      FileNotFoundError: the file does not exist.
    """
    compression_of(path, "parquet")
    with _naming_the_file(path, "parquet"):
        with open_records(path, None) as f:
            return parquet.row_groups(f, columns, options)


def _check_arguments(path: str, format: Optional[str], batch_size: int) -> str:
    format = format or infer_format(path)
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return format


@contextlib.contextmanager
def _naming_the_file(path: str, format: str) -> Iterator[None]:
    """Turns what a file that is not in its format raises into a RecordFormatError naming it;
    a missing file stays FileNotFoundError."""
    try:
        yield
    except FileNotFoundError:
        raise
    except RecordFormatError as e:
        raise RecordFormatError(f"{path}: {e}") from e
    except UNREADABLE_ERRORS as e:
        raise RecordFormatError(f"{path}: cannot read it as {format}: {describe_error(e)}") from e


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


def normalised_blocks(
    blocks: Iterable[RawBlock],
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
        block_rejected = list(raw.rejected)
        goods, offset = [], 0
        for raw_batch in as_batches(raw.data):
            result = normalise_block(raw_batch, columns, options, keep_rejected, raw.utf8_checked)
            drops.update(result.drops)
            for row, reason in result.rejected:
                block_rejected.append(_rejected_row(reason, raw, raw_batch, offset, row))
            offset += raw_batch.num_rows
            goods.append(result.batch)
        # Dead letters in file order (the format reader's own rejects came first).
        rejected.extend(sorted(block_rejected, key=_position))
        for good in goods:
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
    return single_batch(pa.Table.from_batches(batches, schema=schema).combine_chunks())


def _position(row: RejectedRow) -> Tuple[bool, int]:
    where = row.line if row.line is not None else row.row_index
    return where is None, where or 0


def _rejected_row(
    reason: str, raw: RawBlock, batch: pa.RecordBatch, offset: int, row: int
) -> RejectedRow:
    """Row ``row`` of ``batch`` (which starts at row ``offset`` of ``raw``) as a dead letter:
    its raw line and line number where the format reader has them, else rendered (with its
    position in the file for Parquet)."""
    if raw.raw_line is not None:
        found = raw.raw_line(offset + row)
        if found is not None:
            line, line_bytes = found
            return RejectedRow(reason, line_bytes, line=line)
    row_index = None if raw.first_row is None else raw.first_row + offset + row
    return RejectedRow(reason, render_row(batch, row), row_index=row_index)


def render_row(batch: pa.RecordBatch, row: int) -> str:
    """Row ``row`` of a raw batch as a JSON object (str): the dead-letter form of a parsed row.

    Strings that are valid UTF-8 stay strings; binary values and strings that are not UTF-8
    become ``{"base64": ...}``; numbers stay numbers (non-finite floats become strings); other
    values become their ``str``.
    """
    rendered = {}
    for name, column in zip(batch.schema.names, batch.columns):
        column = decoded(column.slice(row, 1))
        if is_text(column.type):
            value = as_binary(column)[0].as_py()
            if value is not None:
                value = value.decode("utf-8") if is_utf8(value) else _base64_of(value)
        elif is_bytes(column.type):
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


