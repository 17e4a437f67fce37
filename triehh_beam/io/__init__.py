"""Reading device records with Arrow, one layer below Beam: one module per input format
(``jsonl``, ``delimited`` for CSV, ``parquet``), the pure normalisation of user ids, items,
counts and timestamps (``normalise``, ``timestamps``, on the array helpers of ``arrays``), the
accounting of dropped rows (``drops``), opening and decompressing files (``streams``),
matching file patterns (``files``), reading one file (``reader``) and writing test files
(``write``). ``triehh_beam.beam.read`` wraps it in a PTransform.
"""

from triehh_beam.io.drops import (
    DROP_REASONS,
    FILE_COUNTERS,
    bad_fraction,
    dead_letter_json,
    describe_drops,
)
from triehh_beam.io.files import match_files
from triehh_beam.io.arrays import binary_buffers
from triehh_beam.io.normalise import normalise_batch
from triehh_beam.io.reader import iter_record_batches, iter_record_blocks, parquet_row_groups
from triehh_beam.io.schema import (
    BYTES_ENCODINGS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_ITEM_BYTES,
    DEFAULT_MAX_USER_BYTES,
    FORMATS,
    RECORD_SCHEMA,
    RecordBlock,
    RecordColumns,
    RecordFormatError,
    RecordOptions,
    RejectedRow,
    TIMESTAMP_FIELD,
    record_schema,
)
from triehh_beam.io.streams import infer_format
from triehh_beam.io.write import write_records

__all__ = [
    "BYTES_ENCODINGS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_ITEM_BYTES",
    "DEFAULT_MAX_USER_BYTES",
    "DROP_REASONS",
    "FILE_COUNTERS",
    "FORMATS",
    "RECORD_SCHEMA",
    "RecordBlock",
    "RecordColumns",
    "RecordFormatError",
    "RecordOptions",
    "RejectedRow",
    "TIMESTAMP_FIELD",
    "bad_fraction",
    "binary_buffers",
    "dead_letter_json",
    "describe_drops",
    "infer_format",
    "iter_record_batches",
    "iter_record_blocks",
    "match_files",
    "normalise_batch",
    "parquet_row_groups",
    "record_schema",
    "write_records",
]
