"""Parquet records files: the raw columns of a file, or of one of its row groups, read
``batch_size`` rows at a time (never the whole file), and the row groups a file splits into,
read from its footer (``row_groups``), so that one large file is read by many workers. A file
whose user, item or count column has a type that cannot hold ids, items or counts is refused
from its schema alone, also when it has no rows.
"""

from __future__ import annotations

from typing import Iterator, List, Optional

import pyarrow.parquet as pq

from triehh_beam.io.normalise import check_column_types
from triehh_beam.io.schema import RawBlock, RecordColumns, RecordFormatError, RecordOptions

__all__ = ["read_parquet", "row_groups"]


def _open(f, columns: RecordColumns, options: RecordOptions) -> pq.ParquetFile:
    parquet = pq.ParquetFile(f)
    check_column_types(parquet.schema_arrow, columns, options)  # also for a file without rows
    return parquet


def row_groups(f, columns: RecordColumns, options: RecordOptions) -> List[int]:
    """The number of rows of each row group of a Parquet file (an empty list: no row groups).

    Raises:
      RecordFormatError: a missing column or a column of an unusable type.
      pyarrow.ArrowException: not a Parquet file.
    """
    metadata = _open(f, columns, options).metadata
    return [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]


def read_parquet(
    f,
    columns: RecordColumns,
    options: RecordOptions,
    batch_size: int,
    keep_rejected: bool,
    row_group: Optional[int] = None,
) -> Iterator[RawBlock]:
    """The raw user, item (and count) columns of a Parquet file, or of its row group
    ``row_group`` only. Parquet rows have no raw line: a rejected row is rendered, with its
    0-based position in the file (``first_row`` of each block)."""
    parquet = _open(f, columns, options)
    if row_group is not None and not 0 <= row_group < parquet.metadata.num_row_groups:
        # The file changed since it was split into row groups.
        raise RecordFormatError(
            f"no row group {row_group} in a file of {parquet.metadata.num_row_groups} row groups"
        )
    schema = parquet.schema_arrow
    wanted = [columns.user, columns.item]
    if columns.count is not None and columns.count in schema.names:
        wanted.append(columns.count)
    if options.timestamp_column is not None:
        wanted.append(options.timestamp_column)
    groups = None if row_group is None else [row_group]
    metadata = parquet.metadata
    # The position in the file of each row, for the dead letter: rows before the row group.
    first_row = sum(metadata.row_group(i).num_rows for i in range(row_group or 0))
    # Row group by row group, batch_size rows at a time: the file is never loaded whole.
    for batch in parquet.iter_batches(batch_size=batch_size, columns=wanted, row_groups=groups):
        yield RawBlock(batch, {}, [], first_row=first_row)
        first_row += batch.num_rows
