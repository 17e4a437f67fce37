"""Reading device records in a Beam pipeline (docs/input.md): ``ReadRecordBatches`` matches file
patterns at construction, splits Parquet files into row groups and reads each with
``triehh_beam.io`` as ``record_schema`` record batches, counting what it reads and drops;
rejected records and unreadable files can be output for the driver to handle."""

from __future__ import annotations

import copy
import os
from typing import Dict, Iterator, Optional, Sequence, Tuple, Union

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.text_files import one_text_file
from triehh_beam.io.drops import DROP_REASONS, RECORDS_READ, counter_name, dead_letter_json
from triehh_beam.io.files import match_files, split_patterns
from triehh_beam.io.records.reader import iter_record_blocks, parquet_row_groups
from triehh_beam.io.schema import (DEFAULT_BATCH_SIZE, FORMATS, RecordColumns, RecordFormatError,
                                   RecordOptions, check_timestamp_column)
from triehh_beam.io.streams import compression_of, infer_format

__all__ = [
    "RECORDS_TAG",
    "REJECTED_TAG",
    "UNREADABLE_TAG",
    "ReadRecordBatches",
    "ReadRecordFileDoFn",
    "ReadRecordShardDoFn",
    "SplitRecordFilesDoFn",
    "WriteDeadLetters",
]


# The tags of ReadRecordBatches' outputs with dead_letter=True or unreadable=True.
RECORDS_TAG = "records"
REJECTED_TAG = "rejected"
UNREADABLE_TAG = "unreadable"
_SHARDS_TAG = "shards"

# A work item: (file path, Parquet row group), the row group None for a whole file.
Shard = Tuple[str, Optional[int]]


class _RecordsDoFn(beam.DoFn):
    """What the DoFns of this module share: their settings, their counters, and how a file that
    cannot be read is handled (raised, or output on ``UNREADABLE_TAG``)."""

    def __init__(
        self,
        format: Optional[str] = None,
        columns: RecordColumns = RecordColumns(),
        batch_size: int = DEFAULT_BATCH_SIZE,
        options: RecordOptions = RecordOptions(),
        dead_letter: bool = False,
        unreadable: bool = False,
    ):
        if format is not None and format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS} or None, got {format!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(options, RecordOptions):
            raise TypeError(f"options must be RecordOptions, got {type(options).__name__}")
        check_timestamp_column(columns, options)
        self._format = format
        self._columns = columns
        self._batch_size = batch_size
        self._options = options
        self._dead_letter = bool(dead_letter)
        self._unreadable = bool(unreadable)

    def setup(self):
        self._records_read = Metrics.counter(METRICS_NAMESPACE, RECORDS_READ)
        self._dropped = {
            reason: Metrics.counter(METRICS_NAMESPACE, counter_name(reason))
            for reason in DROP_REASONS
        }
        self._files_read = Metrics.counter(METRICS_NAMESPACE, "files_read")
        self._files_empty = Metrics.counter(METRICS_NAMESPACE, "files_empty")

    def _refuse(self, path: str, error: RecordFormatError) -> Iterator:
        if not self._unreadable:
            raise error
        # The message names the file already.
        yield beam.pvalue.TaggedOutput(UNREADABLE_TAG, (path, str(error)))

    def _read(self, path: str, row_group: Optional[int]) -> Iterator:
        """The batches (and rejected records) of a file, or of one of its Parquet row groups;
        a whole file is counted in ``files_read`` (and ``files_empty``) here."""
        blocks = iter_record_blocks(
            path,
            self._format,
            self._columns,
            self._batch_size,
            self._options,
            self._dead_letter,
            row_group=row_group,
        )
        total = 0
        try:
            for batch, drops, rejected in blocks:
                read = batch.num_rows
                for reason, n in drops.items():
                    if n:
                        self._dropped[reason].inc(n)
                        read += n
                if read:
                    self._records_read.inc(read)
                    total += read
                if batch.num_rows:
                    yield batch
                for row in rejected:
                    yield beam.pvalue.TaggedOutput(
                        REJECTED_TAG, (path, row.reason, row.raw, row.line, row.row_index)
                    )
        except RecordFormatError as e:
            # Batches of the file already output stay output: a consumer of UNREADABLE_TAG
            # must refuse the whole job (the census does).
            yield from self._refuse(path, e)
            return
        if row_group is None:
            self._files_read.inc()
            if not total:
                self._files_empty.inc()


@beam.typehints.with_input_types(str)
@beam.typehints.with_output_types(pa.RecordBatch)
class ReadRecordFileDoFn(_RecordsDoFn):
    """A file path -> its records as ``record_schema`` batches, counting what is dropped.

    Counters (namespace ``triehh``): ``records_read``, ``records_<reason>`` for each of
    ``DROP_REASONS``, ``files_read`` and ``files_empty``. With ``dead_letter=True`` every
    rejected record is also output with tag ``REJECTED_TAG`` as ``(path, reason, raw, line,
    row_index)`` (see ``RejectedRow``). A file that cannot be read raises ``RecordFormatError`` (naming the file),
    or with ``unreadable=True`` is output with tag ``UNREADABLE_TAG`` as ``(path, message)``.
    Reads each file whole, on one worker; usable on its own after any transform that yields
    paths (e.g. ``fileio.MatchContinuously``).
    """

    def process(self, path: str) -> Iterator[pa.RecordBatch]:
        yield from self._read(path, None)


@beam.typehints.with_input_types(str)
@beam.typehints.with_output_types(Tuple[str, Optional[int]])
class SplitRecordFilesDoFn(_RecordsDoFn):
    """A file path -> its work items: ``(path, row_group)`` for each row group of a Parquet file
    that has rows (read from its footer), ``(path, None)`` for any other file.

    A Parquet file is counted here (``files_read``, and ``files_empty`` when it has no rows), so
    once however many row groups it has; a Parquet file whose footer or schema cannot be read
    is refused as ``ReadRecordFileDoFn`` refuses a file.
    """

    def process(self, path: str) -> Iterator[Shard]:
        if (self._format or infer_format(path)) != "parquet":
            yield path, None
            return
        try:
            rows = parquet_row_groups(path, self._columns, self._options)
        except RecordFormatError as e:
            yield from self._refuse(path, e)
            return
        self._files_read.inc()
        if not sum(rows):
            self._files_empty.inc()
        for row_group, n in enumerate(rows):
            if n:
                yield path, row_group


@beam.typehints.with_input_types(Tuple[str, Optional[int]])
@beam.typehints.with_output_types(pa.RecordBatch)
class ReadRecordShardDoFn(_RecordsDoFn):
    """A work item of ``SplitRecordFilesDoFn`` -> its records, as ``ReadRecordFileDoFn`` (a
    whole file is counted here, a Parquet file by the split)."""

    def process(self, shard: Shard) -> Iterator[pa.RecordBatch]:
        path, row_group = shard
        yield from self._read(path, row_group)


class ReadRecordBatches(beam.PTransform):
    """Reads device records from files as ``record_schema`` ``pyarrow.RecordBatch`` elements.

    The patterns are expanded when the transform is applied (``match_files``, at pipeline
    construction), so a pattern that matches nothing, or a file whose format cannot be inferred,
    is an error before any job starts; the files are then fixed in the job graph (files added
    later are not read). A JSON Lines or CSV file is read by one worker, a Parquet file by row
    group (each row group by any worker), always in bounded blocks (never whole): shard large
    text inputs into many files. A file matched by several patterns is read once.

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
      options: the item kind and the checks (``RecordOptions``; ``RecordOptions.for_encoder``).
      dead_letter: also output the rejected records (see Output).
      unreadable: output the files that cannot be read instead of failing the job (see Output).

    Raises (when applied):
      FileNotFoundError: a pattern matches no file; the message names it.
      ValueError: a bad argument, or a file whose format cannot be inferred.
    Raises (when run, without ``unreadable``): RecordFormatError naming the file (see
    ``iter_record_batches``).

    Output: ``pyarrow.RecordBatch`` elements with schema ``options.schema``, none empty. With
    ``dead_letter`` or ``unreadable``, a dict instead: ``[RECORDS_TAG]`` the batches;
    ``[REJECTED_TAG]`` (with ``dead_letter``) a ``(file path, reason, raw, line, row_index)``
    per rejected record (``RejectedRow``'s fields), for ``WriteDeadLetters``; ``[UNREADABLE_TAG]`` (with
    ``unreadable``) a ``(file path, message)`` per file that cannot be read, the message naming
    the file (the records read from it before the problem showed are output too: refuse the
    job on any).
    """

    def __init__(
        self,
        file_pattern: Union[str, Sequence[str]],
        format: Optional[str] = None,
        user_column: str = "user_id",
        item_column: str = "item",
        count_column: Optional[str] = "count",
        batch_size: int = DEFAULT_BATCH_SIZE,
        options: RecordOptions = RecordOptions(),
        dead_letter: bool = False,
        unreadable: bool = False,
    ):
        super().__init__()
        self._patterns = split_patterns(file_pattern)
        self._format = format or None
        self._columns = RecordColumns(user_column, item_column, count_column or None)
        self._batch_size = batch_size
        self._options = options
        self._dead_letter = bool(dead_letter)
        self._unreadable = bool(unreadable)
        # Validates format, batch_size and options now, before any graph is built.
        self._make_fn(SplitRecordFilesDoFn)

    def with_unreadable_output(self) -> "ReadRecordBatches":
        """This transform, outputting the files that cannot be read (``unreadable=True``)."""
        other = copy.copy(self)
        other._unreadable = True
        return other

    def _make_fn(self, kind):
        return kind(
            self._format,
            self._columns,
            self._batch_size,
            self._options,
            self._dead_letter,
            self._unreadable,
        )

    def expand(self, pbegin: beam.pvalue.PBegin):
        paths = match_files(self._patterns)
        for path in paths:
            compression_of(path, self._format or infer_format(path))
        shards = (
            pbegin
            | "ListFiles" >> beam.Create(paths).with_output_types(str)
            # Spreads the files over workers (Create may hand them all to one).
            | "SpreadFiles" >> beam.Reshuffle()
            | "SplitFiles"
            >> beam.ParDo(self._make_fn(SplitRecordFilesDoFn)).with_outputs(
                UNREADABLE_TAG, main=_SHARDS_TAG
            )
        )
        read = (
            shards[_SHARDS_TAG]
            # Spreads the row groups of a Parquet file over workers.
            | "SpreadShards" >> beam.Reshuffle()
            | "ReadShards"
            >> beam.ParDo(self._make_fn(ReadRecordShardDoFn)).with_outputs(
                REJECTED_TAG, UNREADABLE_TAG, main=RECORDS_TAG
            )
        )
        if not (self._dead_letter or self._unreadable):
            return read[RECORDS_TAG]
        outputs: Dict[str, beam.PCollection] = {RECORDS_TAG: read[RECORDS_TAG]}
        if self._dead_letter:
            outputs[REJECTED_TAG] = read[REJECTED_TAG]
        if self._unreadable:
            outputs[UNREADABLE_TAG] = (
                shards[UNREADABLE_TAG],
                read[UNREADABLE_TAG],
            ) | "UnreadableFiles" >> beam.Flatten()
        return outputs


class WriteDeadLetters(beam.PTransform):
    """Writes rejected records (``ReadRecordBatches(..., dead_letter=True)``) as JSON lines.

    One line per record, ``dead_letter_json``: the file it came from, its line (JSON Lines,
    CSV) or row index (Parquet), the reason (``DROP_REASONS``) and the record: the raw line as
    text (base64 only when it is not UTF-8), or the parsed Parquet row. The lines hold raw user
    data: write them where the input may be read, never next to published outputs.

    Args:
      path: with ``num_shards=1`` (the default) the file to write, exactly (local or any Beam
        filesystem); otherwise the prefix of ``path-SSSSS-of-NNNNN`` shards (0: the runner
        decides how many).
      num_shards: see ``path``.

    Output: the written file names (``WriteToText``'s output).
    """

    def __init__(self, path: str, num_shards: int = 1):
        super().__init__()
        if not isinstance(path, str) or not path:
            raise ValueError(f"the dead-letter path must be a non-empty string, got {path!r}")
        if not isinstance(num_shards, int) or num_shards < 0:
            raise ValueError(f"num_shards must be an integer >= 0, got {num_shards!r}")
        self._path = path
        self._num_shards = num_shards

    def expand(self, rejected: beam.PCollection) -> beam.PCollection:
        lines = rejected | "ToJson" >> beam.Map(dead_letter_json).with_output_types(str)
        if self._num_shards == 1:
            write = one_text_file(self._path)
        else:
            write = beam.io.WriteToText(self._path, num_shards=self._num_shards)
        return lines | "Write" >> write | "OwnerOnly" >> beam.Map(_owner_only)


def _owner_only(path: str) -> str:
    """Makes a written local dead-letter file owner-only (0600: it holds raw records), whatever
    the umask gave it; a ``scheme://`` object is left to its bucket's access control."""
    if "://" not in path and os.path.exists(path):
        os.chmod(path, 0o600)
    return path
