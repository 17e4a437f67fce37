"""An append-only log of JSON records appended to by compare-and-swap (the privacy ledger's):
``append_record`` refuses a record id already in the log, runs the caller's precondition on what
it read and writes the log plus one line from the generation it read, so check and append are
one step (a lost race retried after a growing random pause); ``read_records`` returns the records
oldest first and refuses, naming the line, anything that is not such a log.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Callable, Dict, List, Optional

from triehh_beam.job.state.cas import (CasError, CasStore, ContentionError, PreconditionFailed,
                                       encode_line)

__all__ = ["append_record", "read_records"]


def _parse_log(location: str, data: bytes) -> List[Dict]:
    if data and not data.endswith(b"\n"):
        raise CasError(f"{location}: the log does not end with a newline; it was not written by append_record")
    records = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        try:
            record = json.loads(line)
        except ValueError as e:
            raise CasError(f"{location}: line {number} is not JSON ({e})") from None
        if not isinstance(record, dict):
            raise CasError(f"{location}: line {number} is not a JSON object")
        records.append(record)
    return records


def read_records(store: CasStore, name: str) -> List[Dict]:
    """The records of an append-only log, oldest first ([] if the log does not exist).

    Raises:
      CasError: the object is not a JSON-lines log (the message names it and the line).
    """
    current = store.read(name)
    return [] if current is None else _parse_log(store.location(name), current.data)


def append_record(
    store: CasStore,
    name: str,
    record: Dict,
    *,
    precondition: Optional[Callable[[List[Dict]], None]] = None,
    max_attempts: int = 20,
    initial_backoff: float = 0.005,
    max_backoff: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Appends ``record`` as one JSON line to the log ``name``, by compare-and-swap.

    Each attempt reads the log, checks that the record is not already in it, runs
    ``precondition`` on the records it read, and replaces the log with its content plus one
    line, from the generation it read; a lost race is retried (from the read) after a random,
    exponentially growing pause. The line carries a ``record_id``: the caller's if ``record``
    has one, else a fresh one. An append whose id is already in the log does nothing (and runs
    no precondition), so an append retried after a lost response, or repeated with the same id
    by a re-run, is recorded once.

    Args:
      store, name: the log object.
      record: a JSON-serialisable dict (not modified).
      precondition: called with the log's records (oldest first) as read by the attempt that
        will write; it refuses the append by raising, and the exception propagates with nothing
        written. Check and append are one compare-and-swap: e.g. a budget check cannot be
        passed by two appenders racing for the last of the budget.
      max_attempts: bound on read-and-swap attempts.
      initial_backoff, max_backoff: bounds, in seconds, of the pause between attempts.
      sleep: ``time.sleep``, injectable for tests.

    Returns:
      The record's ``record_id``.

    Raises:
      ContentionError: every one of ``max_attempts`` attempts lost a race.
      TypeError, ValueError: the record is not JSON-serialisable.
      CasError: the object is not a JSON-lines log.
      Whatever ``precondition`` raises.
    """
    entry = dict(record)
    if entry.get("record_id") is None:
        entry["record_id"] = uuid.uuid4().hex
    record_id = entry["record_id"]
    line = encode_line(entry)
    location = store.location(name)
    for attempt in range(max_attempts):
        current = store.read(name)
        records = [] if current is None else _parse_log(location, current.data)
        if any(r.get("record_id") == record_id for r in records):
            return record_id
        if precondition is not None:
            precondition(records)
        try:
            if current is None:
                store.create(name, line)
            else:
                store.replace(name, current.data + line, current.generation)
            return record_id
        except PreconditionFailed:
            pass
        if attempt + 1 < max_attempts:  # full jitter: spread the losers out (not a sample)
            sleep(random.uniform(0, min(max_backoff, initial_backoff * 2**attempt)))
    raise ContentionError(f"{location}: append lost the race {max_attempts} times; try again later")
