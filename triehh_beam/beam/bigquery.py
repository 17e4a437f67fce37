"""Reading device records from BigQuery (docs/input.md): ``ReadBigQueryBatches`` reads a table,
optionally pinned to an instant by time travel, or a query through Beam's ``ReadFromBigQuery``
with the Storage Read API, and ``RowsToRecordBatches`` turns the rows into ``record_schema``
batches with the same checks, drop counters and rejected-row output as ``ReadRecordBatches``."""

from __future__ import annotations

import copy
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.read import RECORDS_TAG, REJECTED_TAG, UNREADABLE_TAG
from triehh_beam.io.bigquery import (BIGQUERY_SCHEME, is_bigquery_input, parse_bigquery_table,
                                     pinned_table_query)
from triehh_beam.io.drops import DROP_REASONS, RECORDS_READ, counter_name
from triehh_beam.io.records.rows import normalise_rows, row_columns
from triehh_beam.io.schema import (DEFAULT_BATCH_SIZE, RecordColumns, RecordOptions,
                                   check_timestamp_column)

__all__ = [
    "BIGQUERY_SCHEME",
    "ReadBigQueryBatches",
    "RowsToRecordBatches",
    "is_bigquery_input",
    "parse_bigquery_table",
]

@beam.typehints.with_input_types(List[Mapping])
@beam.typehints.with_output_types(pa.RecordBatch)
class _RowsToBatchesDoFn(beam.DoFn):
    """A list of rows -> one normalised batch (none when every row was dropped), counting."""

    def __init__(self, source: str, columns: RecordColumns, options: RecordOptions,
                 dead_letter: bool):
        self._source = source
        self._columns = columns
        self._options = options
        self._dead_letter = dead_letter

    def setup(self):
        self._records_read = Metrics.counter(METRICS_NAMESPACE, RECORDS_READ)
        self._dropped = {reason: Metrics.counter(METRICS_NAMESPACE, counter_name(reason))
                         for reason in DROP_REASONS}

    def process(self, rows: List[Mapping]) -> Iterator:
        block = normalise_rows(rows, self._columns, self._options, self._dead_letter)
        self._records_read.inc(len(rows))
        for reason, n in block.drops.items():
            if n:
                self._dropped[reason].inc(n)
        if block.batch.num_rows:
            yield block.batch
        for row in block.rejected:
            yield beam.pvalue.TaggedOutput(
                REJECTED_TAG, (self._source, row.reason, row.raw, None, None))


class RowsToRecordBatches(beam.PTransform):
    """Rows (mappings, e.g. ``ReadFromBigQuery``'s dicts) -> ``record_schema`` batches.

    Args:
      source: what the rows come from, for the dead letters' ``file`` (e.g. the table URI).
      user_column, item_column, count_column: the columns (``count_column`` None: every
        count is 1; a count column no row of a batch has is taken as absent).
      batch_size: the most rows in one output batch.
      options: the item kind and the checks (``RecordOptions``).
      dead_letter: also output the rejected rows (a dict of outputs, as ``ReadRecordBatches``).

    Output: the batches, or with ``dead_letter`` ``{RECORDS_TAG: batches, REJECTED_TAG:
    (source, reason, rendered row, None, None) per rejected row}``. A column of an unusable
    type fails the job with a ``RecordFormatError`` naming it.
    """

    def __init__(self, source: str, user_column: str = "user_id", item_column: str = "item",
                 count_column: Optional[str] = "count", batch_size: int = DEFAULT_BATCH_SIZE,
                 options: RecordOptions = RecordOptions(), dead_letter: bool = False):
        super().__init__()
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self._columns = RecordColumns(user_column, item_column, count_column or None)
        check_timestamp_column(self._columns, options)
        self._source = source
        self._batch_size = batch_size
        self._options = options
        self._dead_letter = bool(dead_letter)

    @property
    def fields(self) -> List[str]:
        """The columns read from each row."""
        return row_columns(self._columns, self._options)

    def expand(self, rows: beam.PCollection):
        fn = _RowsToBatchesDoFn(self._source, self._columns, self._options, self._dead_letter)
        batched = rows | "BatchRows" >> beam.BatchElements(
            min_batch_size=min(1024, self._batch_size), max_batch_size=self._batch_size)
        out = batched | "Normalise" >> beam.ParDo(fn).with_outputs(REJECTED_TAG, main=RECORDS_TAG)
        if not self._dead_letter:
            return out[RECORDS_TAG]
        return {RECORDS_TAG: out[RECORDS_TAG], REJECTED_TAG: out[REJECTED_TAG]}


class ReadBigQueryBatches(beam.PTransform):
    """Reads device records from a BigQuery table or query as ``record_schema`` batches.

    Args:
      table: ``bq://PROJECT.DATASET.TABLE`` (or None with ``query``).
      query: a standard-SQL query whose result has the record columns (or None with
        ``table``); Beam runs it into a temporary table first (``temp_dataset`` names an
        existing dataset for it; otherwise Beam creates one in the job's project).
      user_column, item_column, count_column, batch_size, options, dead_letter: as
        ``RowsToRecordBatches``. For a table, only these columns are read (a ``count_column``
        the table lacks is an error from BigQuery: pass None).
      as_of_millis: read the table as it was at this instant (milliseconds since the epoch),
        through ``pinned_table_query`` (a query: ``temp_dataset`` applies); None: as it is.
      temp_dataset: ``DatasetReference`` for a query's temporary table.
      read_options: further keyword arguments for ``ReadFromBigQuery`` (e.g. ``row_restriction``).
      unreadable: also output ``UNREADABLE_TAG``, as ``ReadRecordBatches`` does, always empty
        (a table or query has no file to skip: one that cannot be read fails the job).

    Raises (when built):
      ValueError: neither or both of ``table`` and ``query``, a malformed table URI,
        ``as_of_millis`` with a query.

    Output: as ``RowsToRecordBatches`` (with ``unreadable``, a dict that also holds
    ``UNREADABLE_TAG``). Authentication and the project come from the job's Google Cloud
    options, as for any Beam BigQuery read.
    """

    def __init__(self, table: Optional[str] = None, query: Optional[str] = None,
                 user_column: str = "user_id", item_column: str = "item",
                 count_column: Optional[str] = "count", batch_size: int = DEFAULT_BATCH_SIZE,
                 options: RecordOptions = RecordOptions(), dead_letter: bool = False,
                 as_of_millis: Optional[int] = None, temp_dataset=None,
                 read_options: Optional[Dict] = None, unreadable: bool = False):
        super().__init__()
        if (table is None) == (query is None):
            raise ValueError("give a BigQuery table (bq://PROJECT.DATASET.TABLE) or a query, not both")
        if as_of_millis is not None and table is None:
            raise ValueError("as_of_millis pins a table; a query says itself what it reads")
        self._rows = RowsToRecordBatches(table or "query", user_column, item_column, count_column,
                                         batch_size, options, dead_letter)
        read: Dict = {"method": beam.io.ReadFromBigQuery.Method.DIRECT_READ,
                      "use_native_datetime": True}
        if table is not None and as_of_millis is None:
            read.update(table=parse_bigquery_table(table), selected_fields=self._rows.fields)
        else:
            sql = query if table is None else pinned_table_query(table, self._rows.fields, as_of_millis)
            read.update(query=sql, use_standard_sql=True)
            if temp_dataset is not None:
                read["temp_dataset"] = temp_dataset
        read.update(read_options or {})
        self._read = read
        self._dead_letter = bool(dead_letter)
        self._unreadable = bool(unreadable)

    @property
    def query(self) -> Optional[str]:
        """The query this transform runs (a pinned table's, or the one given), or None."""
        return self._read.get("query")

    def with_unreadable_output(self) -> "ReadBigQueryBatches":
        """This transform, with the (empty) ``UNREADABLE_TAG`` output ``ReadRecordBatches`` has."""
        other = copy.copy(self)
        other._unreadable = True
        return other

    def expand(self, pbegin: beam.pvalue.PBegin):
        rows = pbegin | "ReadFromBigQuery" >> beam.io.ReadFromBigQuery(**self._read)
        out = rows | "ToRecordBatches" >> self._rows
        if not self._unreadable:
            return out
        outputs = dict(out) if self._dead_letter else {RECORDS_TAG: out}
        outputs[UNREADABLE_TAG] = pbegin | "NothingUnreadable" >> beam.Create(
            []).with_output_types(Tuple[str, str])
        return outputs
