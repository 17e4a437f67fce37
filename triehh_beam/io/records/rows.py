"""Device records that arrive as rows instead of files: a list of rows (mappings from column
name to value, one per record, what Beam's ``ReadFromBigQuery`` yields for a BigQuery table or
query) becomes one raw Arrow batch of the user, item, count (and timestamp) columns, typed from
the values as Arrow infers them, and is then normalised exactly as a file's batch is
(``normalise``): the same canonical ids, checks, drop reasons and output schema. A row's
missing key or NULL is a null value (a null count is 1); BigQuery's types map to Arrow's
(``STRING`` string, ``INT64`` int64, ``BYTES`` binary, ``TIMESTAMP`` a UTC timestamp,
``DATETIME`` a timestamp taken as UTC); a column whose values are of a type that cannot hold
ids, items, counts or times (``FLOAT64`` user ids, ``NUMERIC`` counts, mixed types) is a
``RecordFormatError`` naming it. Rows have no file and no line: a rejected row is rendered.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Sequence

import pyarrow as pa

from triehh_beam.io.normalise import normalise_block
from triehh_beam.io.records.reader import render_row
from triehh_beam.io.schema import (RecordBlock, RecordColumns, RecordFormatError, RecordOptions,
                                   RejectedRow, check_timestamp_column)

__all__ = ["normalise_rows", "row_columns"]


def row_columns(columns: RecordColumns, options: RecordOptions) -> List[str]:
    """The fields to read from each row (BigQuery ``selected_fields``): user, item, then the
    count and timestamp columns when there are."""
    names = [columns.user, columns.item]
    if columns.count is not None:
        names.append(columns.count)
    if options.timestamp_column is not None:
        names.append(options.timestamp_column)
    return names


def normalise_rows(
    rows: Sequence[Mapping[str, Any]],
    columns: RecordColumns = RecordColumns(),
    options: RecordOptions = RecordOptions(),
    keep_rejected: bool = False,
) -> RecordBlock:
    """A list of rows as one normalised ``RecordBlock`` (``options.schema`` batch, drops per
    reason, and with ``keep_rejected`` the rejected rows rendered as JSON).

    A count column that no row has is taken as absent (every count 1); the user and item
    columns are required of the rows as a whole, and so is the timestamp column when set.

    Raises:
      RecordFormatError: a required column no row has, or a column of an unusable or mixed
        type; the message names the column.
      ValueError: a timestamp column that is also the user, item or count column.
    """
    check_timestamp_column(columns, options)
    arrays = {}
    for name in row_columns(columns, options):
        values = [row.get(name) for row in rows]
        if name == columns.count and rows and all(name not in row for row in rows):
            continue  # no count column: every count is 1
        if rows and all(name not in row for row in rows):
            raise RecordFormatError(f"no column {name!r} in the rows (they have {sorted(rows[0])})")
        arrays[name] = _column(name, values)
    batch = pa.RecordBatch.from_pydict(arrays) if rows else _empty(columns, options)
    result = normalise_block(batch, columns, options, keep_rejected)
    rejected = tuple(
        RejectedRow(reason, render_row(batch, row)) for row, reason in result.rejected
    )
    return RecordBlock(result.batch, result.drops, rejected)


def _column(name: str, values: List[Any]) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        kinds = sorted({type(v).__name__ for v in values if v is not None})
        raise RecordFormatError(
            f"the column {name!r} mixes or has values Arrow cannot type ({', '.join(kinds)}): {e}"
        ) from None


def _empty(columns: RecordColumns, options: RecordOptions) -> pa.RecordBatch:
    names = [columns.user, columns.item] + (
        [options.timestamp_column] if options.timestamp_column is not None else []
    )
    return pa.RecordBatch.from_pydict({name: pa.array([], pa.string()) for name in names})


