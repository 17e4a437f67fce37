"""Reading device records with Arrow, one layer below Beam. The base: the pure normalisation of
user ids, items, counts and timestamps (``normalise``, ``timestamps``, on the array helpers of
``arrays``), the record shape (``schema``), the accounting of dropped rows (``drops``), opening
files (``streams``) and matching patterns (``files``), BigQuery table names (``bigquery``), the
device registry and test files (``write``). Its rooms: ``records`` (one module per format, the
one-file reader, rows) and ``pubsub`` (Pub/Sub outside Beam: client helpers, the pull reader,
stream messages, the federated attributes, the emulator). ``triehh_beam.beam.read`` wraps it in
PTransforms. The names below are imported from their modules on first use (PEP 562): ``files``
and ``streams`` open paths through Beam's ``FileSystems``, and a module that needs only
``schema`` (the ``triehh`` tool's parser does) should not pay for importing Beam."""

import importlib

# Each re-exported name and the module that defines it.
_EXPORTS = {
    "DROP_REASONS": "triehh_beam.io.drops",
    "FILE_COUNTERS": "triehh_beam.io.drops",
    "bad_fraction": "triehh_beam.io.drops",
    "dead_letter_json": "triehh_beam.io.drops",
    "describe_drops": "triehh_beam.io.drops",
    "match_files": "triehh_beam.io.files",
    "binary_buffers": "triehh_beam.io.arrays",
    "normalise_batch": "triehh_beam.io.normalise",
    "iter_record_batches": "triehh_beam.io.records.reader",
    "iter_record_blocks": "triehh_beam.io.records.reader",
    "parquet_row_groups": "triehh_beam.io.records.reader",
    "BYTES_ENCODINGS": "triehh_beam.io.schema",
    "DEFAULT_BATCH_SIZE": "triehh_beam.io.schema",
    "DEFAULT_MAX_ITEM_BYTES": "triehh_beam.io.schema",
    "DEFAULT_MAX_USER_BYTES": "triehh_beam.io.schema",
    "FORMATS": "triehh_beam.io.schema",
    "RECORD_SCHEMA": "triehh_beam.io.schema",
    "RecordBlock": "triehh_beam.io.schema",
    "RecordColumns": "triehh_beam.io.schema",
    "RecordFormatError": "triehh_beam.io.schema",
    "RecordOptions": "triehh_beam.io.schema",
    "RejectedRow": "triehh_beam.io.schema",
    "TIMESTAMP_FIELD": "triehh_beam.io.schema",
    "record_schema": "triehh_beam.io.schema",
    "infer_format": "triehh_beam.io.streams",
    "BatchPublisher": "triehh_beam.io.pubsub.client",
    "PublishError": "triehh_beam.io.pubsub.client",
    "PubsubUnavailableError": "triehh_beam.io.pubsub.client",
    "PullLoop": "triehh_beam.io.pubsub.client",
    "ensure_subscription": "triehh_beam.io.pubsub.client",
    "ensure_topic": "triehh_beam.io.pubsub.client",
    "emulator_missing": "triehh_beam.io.pubsub.emulator",
    "start_pubsub_emulator": "triehh_beam.io.pubsub.emulator",
    "write_records": "triehh_beam.io.write",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    """A re-exported name, imported from its module the first time it is asked for."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
