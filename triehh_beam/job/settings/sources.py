"""Where a job's records come from and how a job pins them, so that every pass reads the
population its census counted: files (``--input`` patterns, pinned by ``input_files.snapshot``),
a BigQuery table (``bq://PROJECT.DATASET.TABLE``, read as of an instant chosen when the census
starts: BigQuery time travel) or a query (``--query``, which cannot be pinned: a pass that reads
another number of records is refused, so a query should be deterministic). ``read_transform``
builds the reading transform; Beam and ``FileSystems`` are imported only where records are read
or files listed.
"""

from __future__ import annotations

import datetime
import time
from typing import Any, Optional

from triehh_beam.io.bigquery import TIME_TRAVEL_DAYS, is_bigquery_input, table_parts
from triehh_beam.job.settings.fields import DiscoverySettings
from triehh_beam.proto import state_pb2

__all__ = [
    "BigQueryAccessError",
    "PIN_MARGIN_SECONDS",
    "check_credentials",
    "check_readable",
    "check_source",
    "check_unchanged",
    "describe_input",
    "input_document",
    "is_table",
    "pin",
    "pinned_at",
    "read_transform",
]

# A table is pinned this long before the census starts: never in BigQuery's future, whatever
# the launcher's clock says.
PIN_MARGIN_SECONDS = 60
# How old a pin may be when a pass starts reading: the time-travel window less an hour's margin
# for the pass's query to start.
_PIN_MAX_AGE_MILLIS = (TIME_TRAVEL_DAYS * 86400 - 3600) * 1000
# Settings that only mean something for files.
_FILE_ONLY = (("input_format", "--format"), ("timestamp_column", "--timestamp-column"), ("window", "--window"))


def is_table(config: DiscoverySettings) -> bool:
    """Whether the job reads a BigQuery table (``--input bq://...``)."""
    return config.query is None and is_bigquery_input(config.input_pattern)


def check_source(config: DiscoverySettings) -> None:
    """Refuses (ValueError) anything but exactly one of ``--input`` and ``--query``, a malformed
    table name, and file-only settings (``--format``, ``--timestamp-column``, ``--window``) with
    a table or query."""
    if config.input_pattern is not None and config.query is not None:
        raise ValueError("give --input (files, or a table bq://PROJECT.DATASET.TABLE) or --query, not both")
    if not config.input_pattern and config.query is None:
        raise ValueError("--input is required (files, or a table bq://PROJECT.DATASET.TABLE), or --query SQL")
    if config.query is not None and not config.query.strip():
        raise ValueError("--query is empty: give the standard-SQL query whose result is the records")
    if config.query is None and not is_bigquery_input(config.input_pattern):
        return
    if config.query is None:
        table_parts(config.input_pattern)  # ValueError: not PROJECT.DATASET.TABLE
    for name, flag in _FILE_ONLY:
        if getattr(config, name) is not None:
            raise ValueError(f"{flag} is for files; a BigQuery table or query (--input bq://..., "
                             "--query) is read as one population")


def describe_input(spec: state_pb2.InputSpec) -> str:
    """A recorded input in a few words: its pattern or table, or its query (cut short)."""
    if not spec.query:
        return repr(spec.file_pattern)
    return "--query " + repr(spec.query if len(spec.query) <= 80 else spec.query[:77] + "...")


def read_transform(config: DiscoverySettings, dead_letter: bool = False,
                   as_of_millis: Optional[int] = None) -> Any:
    """The transform that reads the records: ``ReadRecordBatches`` for files,
    ``ReadBigQueryBatches`` for a table (read as of ``as_of_millis``, which a table requires:
    a job reads it as its census pinned it) or a query.

    Raises:
      ValueError: a table without ``as_of_millis``, or ``as_of_millis`` for anything else.
    """
    # The columns and reading options, the same for every source (a query's count column: None if unset).
    common = dict(user_column=config.user_column, item_column=config.item_column, options=config.record_options,
                  dead_letter=dead_letter)
    if config.query is not None or is_table(config):
        from triehh_beam.beam.bigquery import ReadBigQueryBatches

        table = config.input_pattern if is_table(config) else None
        if (table is not None) != (as_of_millis is not None):
            raise ValueError("a BigQuery table is read as of the instant its census pinned (and "
                             "only a table is)")
        return ReadBigQueryBatches(table=table, query=config.query, count_column=config.count_column or None,
                                   as_of_millis=as_of_millis, **common)
    if as_of_millis is not None:
        raise ValueError("as_of_millis pins a BigQuery table, not files")
    from triehh_beam.beam.read import ReadRecordBatches
    from triehh_beam.io.schema import DEFAULT_BATCH_SIZE

    # Batches of at most a quarter of the worker budget: the steps after the read hold a few.
    batch_size = min(DEFAULT_BATCH_SIZE, max(1, config.worker_budget // 4))
    return ReadRecordBatches(config.input_pattern, format=config.input_format, count_column=config.count_column,
                             batch_size=batch_size, **common)


def pin(config: DiscoverySettings, now: Optional[float] = None) -> state_pb2.InputSnapshot:
    """What the census is about to read (``records`` is filled in once it has): the files the
    pattern matches (``input_files.snapshot``), a table's instant (``PIN_MARGIN_SECONDS``
    before ``now``, default the clock), or nothing for a query.

    Raises:
      FileNotFoundError: a part of a file pattern matches nothing.
    """
    if config.query is not None:
        return state_pb2.InputSnapshot()
    if is_table(config):
        seconds = time.time() if now is None else now
        return state_pb2.InputSnapshot(as_of_millis=int((seconds - PIN_MARGIN_SECONDS) * 1000))
    from triehh_beam.job.settings import input_files

    return state_pb2.InputSnapshot(files=input_files.snapshot(config.input_pattern))


def pinned_at(snapshot: state_pb2.InputSnapshot) -> Optional[int]:
    """The instant a table is read as of (``read_transform``'s ``as_of_millis``), None for
    files and queries."""
    return snapshot.as_of_millis or None


def changed_since(config: DiscoverySettings, before: state_pb2.InputSnapshot) -> Optional[str]:
    """A few words naming the first file that changed since ``before`` (files only: a pinned
    table cannot change, a query is checked by its records), or None."""
    if config.query is not None or is_table(config):
        return None
    from triehh_beam.job.settings import input_files

    return input_files.first_change(before.files, input_files.snapshot(config.input_pattern))


def input_document(state: state_pb2.JobState) -> dict:
    """What a job read, for its operator report: ``pattern`` (files, or the table), and
    ``query`` for a query or ``read_as_of`` (UTC) for a table."""
    document = {"pattern": state.input.file_pattern}
    if state.input.query:
        document["query"] = state.input.query
    if state.input_snapshot.as_of_millis:
        document["read_as_of"] = _utc(state.input_snapshot.as_of_millis)
    return document


def _utc(millis: int) -> str:
    moment = datetime.datetime.fromtimestamp(millis / 1000, datetime.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


class BigQueryAccessError(ValueError):
    """A job on a BigQuery table or query cannot reach BigQuery (no credentials, no client)."""


def check_credentials(config: DiscoverySettings, options: Any) -> None:
    """Before a job that reads BigQuery runs: refuses (``BigQueryAccessError``) to start it
    without Google Cloud credentials, where Beam's BigQuery client would otherwise fall back to
    an interactive OAuth flow and wait for a browser forever. Nothing is checked for files, or
    on a runner option that only translates jobs (``--dry_run=True``: nothing is read)."""
    if config.query is None and not is_table(config):
        return
    if options is not None and options.get_all_options().get("dry_run"):
        return
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
    except ImportError:
        raise BigQueryAccessError("BigQuery input needs Beam's Google Cloud extras: "
                                  "pip install 'apache-beam[gcp]'") from None
    try:
        google.auth.default(scopes=["https://www.googleapis.com/auth/bigquery"])
    except DefaultCredentialsError:
        raise BigQueryAccessError(
            f"reading {config.source} needs Google Cloud credentials and none were found: run "
            "gcloud auth application-default login, or set GOOGLE_APPLICATION_CREDENTIALS to a "
            "service account key file (docs/input.md, BigQuery tables and queries)") from None


def check_readable(state: state_pb2.JobState, config: DiscoverySettings, now: Optional[float] = None) -> None:
    """Before a pass reads a table again: refuses (``InputChangedError``) a pin older than
    BigQuery's time-travel window, where the rows the census counted can no longer be read."""
    if not is_table(config):
        return
    from triehh_beam.job.settings.input_files import InputChangedError

    millis = state.input_snapshot.as_of_millis
    age = (time.time() if now is None else now) * 1000 - millis
    if age > _PIN_MAX_AGE_MILLIS:
        raise InputChangedError(
            f"this job reads {config.input_pattern} as of {_utc(millis)} (BigQuery time travel), "
            f"{age / 86400000:.1f} days ago: BigQuery keeps a table's past {TIME_TRAVEL_DAYS} days "
            "at most (less if the dataset's max_time_travel_hours is shorter), so the rows the "
            "census counted cannot be read again; start a new job in another output/state directory")


def check_unchanged(state: state_pb2.JobState, config: DiscoverySettings, when: str) -> None:
    """Refuses (``InputChangedError``) files that changed since the job's census read them
    (``input_files.check_unchanged``). A pinned table reads the same rows; a query is checked
    by the records the pass ranks."""
    from triehh_beam.job.settings import input_files

    if config.query is None and not is_table(config):
        input_files.check_unchanged(state, config.input_pattern, when)
