"""BigQuery tables as a job names them, without Beam or a client: ``bq://PROJECT.DATASET.TABLE``
(``is_bigquery_input``, ``parse_bigquery_table`` for Beam's ``PROJECT:DATASET.TABLE`` spec) and
the standard-SQL query that reads a table's record columns as the table was at one instant
(``pinned_table_query``: ``FOR SYSTEM_TIME AS OF``, BigQuery time travel), which is how a job
reads the same rows in its census, its sampling pass and any resume. Identifiers are quoted in
backticks (project ids hold dashes, domain-scoped ones a dot and a colon; column names may be
keywords), with backslashes and backticks escaped. Time travel reaches back
``TIME_TRAVEL_DAYS`` at most (a dataset may be set to keep as little as two days).
"""

from __future__ import annotations

from typing import Sequence, Tuple

__all__ = [
    "BIGQUERY_SCHEME",
    "TIME_TRAVEL_DAYS",
    "is_bigquery_input",
    "parse_bigquery_table",
    "pinned_table_query",
    "quote_identifier",
    "table_parts",
]

BIGQUERY_SCHEME = "bq://"
# BigQuery's longest time-travel window (the default; a dataset's max_time_travel_hours may
# shorten it to 48 hours).
TIME_TRAVEL_DAYS = 7


def is_bigquery_input(text: str) -> bool:
    """Whether an ``--input`` names a BigQuery table (``bq://...``) rather than files."""
    return isinstance(text, str) and text.startswith(BIGQUERY_SCHEME)


def table_parts(uri: str) -> Tuple[str, str, str]:
    """(project, dataset, table) of ``bq://PROJECT.DATASET.TABLE``.

    The project may hold dots itself (a domain-scoped ``example.com:project``): the dataset
    and table are the last two parts.

    Raises:
      ValueError: not a ``bq://`` URI of three non-empty parts.
    """
    if not is_bigquery_input(uri):
        raise ValueError(f"a BigQuery input is bq://PROJECT.DATASET.TABLE, got {uri!r}")
    parts = uri[len(BIGQUERY_SCHEME):].rsplit(".", 2)
    if len(parts) != 3 or not all(parts) or any(c in uri for c in ", \t\n`"):
        raise ValueError(f"a BigQuery input is bq://PROJECT.DATASET.TABLE, got {uri!r}")
    project, dataset, table = parts
    return project, dataset, table


def parse_bigquery_table(uri: str) -> str:
    """``bq://PROJECT.DATASET.TABLE`` as Beam's table spec ``PROJECT:DATASET.TABLE``; raises
    ValueError as ``table_parts``."""
    project, dataset, table = table_parts(uri)
    return f"{project}:{dataset}.{table}"


def quote_identifier(name: str) -> str:
    """``name`` as a GoogleSQL quoted identifier: in backticks, backslashes and backticks escaped."""
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def pinned_table_query(uri: str, fields: Sequence[str], as_of_millis: int) -> str:
    """The standard-SQL query that reads ``fields`` of the table ``uri`` as it was at
    ``as_of_millis`` (milliseconds since the epoch): every run of it reads the same rows while
    the instant lies in the table's time-travel window.

    Raises:
      ValueError: a malformed URI, no fields, or an instant that is not a positive integer.
    """
    project, dataset, table = table_parts(uri)
    if not fields:
        raise ValueError("a pinned table query needs the columns it reads")
    if isinstance(as_of_millis, bool) or not isinstance(as_of_millis, int) or as_of_millis <= 0:
        raise ValueError(f"as_of_millis must be a positive integer, got {as_of_millis!r}")
    columns = ", ".join(quote_identifier(f) for f in fields)
    path = quote_identifier(f"{project}.{dataset}.{table}")
    return f"SELECT {columns} FROM {path} FOR SYSTEM_TIME AS OF TIMESTAMP_MILLIS({as_of_millis})"
