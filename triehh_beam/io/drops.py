"""Why records are dropped, and the reports over a job's counts of them: the drop reasons in the
order records are checked (a dropped record counts once, under its first reason), the names of
the reader's counters (``records_read``, ``records_<reason>``, ``files_read``, ``files_empty``),
the share of bad records (``bad_fraction``), the one line an operator reads (``describe_drops``)
and the JSON line a rejected record becomes in a dead-letter file (``dead_letter_json``).
Counts only: nothing here ever carries a record's content, except the dead letter itself.
"""

from __future__ import annotations

import base64
import json
from typing import Dict, Tuple, Union

__all__ = [
    "DROP_REASONS",
    "FILE_COUNTERS",
    "RECORDS_READ",
    "add_raw",
    "bad_fraction",
    "counter_name",
    "dead_letter_json",
    "describe_drops",
]

# In the order records are checked; a dropped record is counted under its first reason.
DROP_REASONS = (
    "malformed",
    "invalid_utf8",
    "missing_user",
    "bad_user",
    "oversized_user",
    "missing_item",
    "bad_item",
    "oversized_item",
    "bad_count",
    "bad_timestamp",
)
# Per-file counters (not records, never bad: an empty file is reported, not refused).
FILE_COUNTERS = ("files_read", "files_empty")
# Every record read: the rows output plus all the drops.
RECORDS_READ = "records_read"


def counter_name(reason: str) -> str:
    """The counter of the records dropped for ``reason`` (one of ``DROP_REASONS``)."""
    if reason not in DROP_REASONS:
        raise ValueError(f"unknown drop reason {reason!r}; the reasons are {DROP_REASONS}")
    return f"records_{reason}"


def bad_fraction(counters: Dict[str, int]) -> float:
    """The share of the records read that were dropped as bad, from a job's counters.

    Args:
      counters: counter name -> value in the ``triehh`` namespace, as a job reports them
        (``records_read`` and ``records_<reason>``; other names are ignored).

    Returns:
      (sum of ``records_<reason>`` over every ``DROP_REASONS`` reason) / ``records_read``:
      every dropped record is bad, whatever the reason (a record with no user id or no item is
      as unusable as a malformed one). ``files_empty`` is not bad. 0.0 when nothing was read.
    """
    read = int(counters.get(RECORDS_READ, 0) or 0)
    if read <= 0:
        return 0.0
    bad = sum(int(counters.get(counter_name(reason), 0) or 0) for reason in DROP_REASONS)
    return bad / read


def describe_drops(counters: Dict[str, int]) -> str:
    """One line for an operator: records read, dropped (with the share) and why, empty files.

    Only counts, never content, e.g. ``"read 1,000 records from 3 files (1 empty); dropped 12
    (1.2%): malformed 3, invalid_utf8 2, missing_user 7"``.
    """
    read = int(counters.get(RECORDS_READ, 0) or 0)
    files = int(counters.get("files_read", 0) or 0)
    empty = int(counters.get("files_empty", 0) or 0)
    line = f"read {read:,} records"
    if files:
        line += f" from {files:,} file{'s' if files != 1 else ''}"
        if empty:
            line += f" ({empty:,} empty)"
    reasons = [
        (reason, int(counters.get(counter_name(reason), 0) or 0)) for reason in DROP_REASONS
    ]
    dropped = sum(n for _, n in reasons)
    if not dropped:
        return line + "; none dropped"
    share = f"{100 * bad_fraction(counters):.3g}%"
    details = ", ".join(f"{reason} {n:,}" for reason, n in reasons if n)
    return f"{line}; dropped {dropped:,} ({share}): {details}"


def dead_letter_json(rejected: Tuple) -> str:
    """One rejected record as a JSON line (without the line break), for a person to act on.

    ``rejected`` is ``(file, reason, raw[, line[, row_index]])``, what ``ReadRecordBatches``
    outputs on its rejected tag (``RejectedRow``'s fields after the file). The line says where
    the record is and what it holds, in this order of keys::

      {"file": ..., "line": 12, "reason": "bad_count", "raw": "u7,kiwi,-1"}
      {"file": ..., "line": 13, "reason": "invalid_utf8", "raw_base64": "djEsY2Fm6Swx"}
      {"file": ..., "row_index": 4, "reason": "bad_count", "row": {"user_id": "u5", ...}}

    ``line`` (1-based, JSON Lines and CSV) or ``row_index`` (0-based, Parquet) when known;
    ``raw``, the exact record as text when it is UTF-8, ``raw_base64`` only when it is not;
    ``row``, the parsed row, where the format has no lines (Parquet).
    """
    path, reason, raw = rejected[:3]
    line = rejected[3] if len(rejected) > 3 else None
    row_index = rejected[4] if len(rejected) > 4 else None
    record: Dict[str, object] = {"file": path}
    if line is not None:
        record["line"] = line
    if row_index is not None:
        record["row_index"] = row_index
    record["reason"] = reason
    add_raw(record, raw)
    return json.dumps(record, ensure_ascii=False, sort_keys=False)


def add_raw(record: Dict[str, object], raw: Union[bytes, str]) -> None:
    """Puts a rejected record's content into its dead-letter ``record``: ``raw``, the exact
    bytes as text when they are UTF-8, ``raw_base64`` when they are not; a ``str`` is a row
    already rendered as JSON (where the format has no lines), put as ``row``."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw)
        try:
            record["raw"] = raw.decode("utf-8")
        except UnicodeDecodeError:
            record["raw_base64"] = base64.b64encode(raw).decode("ascii")
    else:
        record["row"] = json.loads(raw)
