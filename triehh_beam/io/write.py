"""Writing records files for tests and benchmarks: ``write_records`` writes
``(user_id, item[, count])`` rows to a local JSON Lines, CSV or Parquet file (compressed by its
suffix), values as given, so that files holding bad records can be made as easily as good ones.
The product itself never writes records.
"""

from __future__ import annotations

import json
from typing import Iterable, Optional, Sequence

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from triehh_beam.io.schema import FORMATS, RecordColumns
from triehh_beam.io.streams import compression_of, infer_format

__all__ = ["write_records"]


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
        compression_of(path, "parquet")
        pq.write_table(table, path, row_group_size=row_group_size)
