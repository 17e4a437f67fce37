"""The wall clock as every job mode records it: ``now_iso`` for the times states, events, ledger
records and reports carry (UTC, ISO 8601, to the second), ``now_millis`` for deadlines (milliseconds
since the epoch)."""

from __future__ import annotations

import datetime
import time

__all__ = ["now_iso", "now_millis"]


def now_iso() -> str:
    """The time now, as states and events record it (UTC, ISO 8601, seconds)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def now_millis() -> int:
    """The time now in milliseconds since the epoch (a round's deadline)."""
    return int(time.time() * 1000)
