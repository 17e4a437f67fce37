"""Per-window data meeting in a grouping instead of a side input: ``MeetGiven`` joins keyed
elements with the one value given for their key in the same event-time window (a window's plan,
a round's threshold, a window's leaves) in a ``CoGroupByKey``, which fires once the watermark has
passed the window (every runner implements that), where a per-window side input relies on the
runner holding the consumer back until the side input is filled (Prism 2.77 does not, in
streaming: docs/stream_input.md). ``fan_out`` gives one window value to each of a fixed set of
keys, so that the join stays split by key."""

from __future__ import annotations

import zlib
from typing import Any, Iterable, Tuple

import apache_beam as beam
import pyarrow as pa

__all__ = ["GIVEN", "MAIN", "RECORD_KEYS", "MeetGiven", "fan_out", "record_key"]

GIVEN = "given"
MAIN = "main"
#: Keys a window's record batches are split by where they meet the window's values.
RECORD_KEYS = 16


def record_key(batch: pa.RecordBatch) -> Tuple[int, pa.RecordBatch]:
    """A record batch keyed by one of ``RECORD_KEYS`` (a checksum of its first user id, so a
    retried bundle keys it alike; any key would join the same)."""
    first = batch.column("user_id")[0].as_py() if batch.num_rows else b""
    if isinstance(first, str):
        first = first.encode("utf-8")
    return zlib.crc32(first) % RECORD_KEYS, batch


def fan_out(value: Any, keys: Iterable[Any]) -> Iterable[Tuple[Any, Any]]:
    """``(key, value)`` for every key of ``keys``."""
    for key in keys:
        yield key, value


def _meet(keyed):
    key, grouped = keyed
    given = list(grouped[GIVEN])
    if len(given) > 1:
        raise ValueError(f"key {key!r} is given {len(given)} values in one window")
    yield key, given[0] if given else None, grouped[MAIN]


class MeetGiven(beam.PTransform):
    """``{GIVEN: (key, value), MAIN: (key, element)}`` -> ``(key, value or None, elements)`` once
    per key and window that has either: at most one value is given per key and window.

    Raises:
      ValueError: (in the pipeline) a key given two values in one window.
    """

    def expand(self, inputs):
        return inputs | "Group" >> beam.CoGroupByKey() | "WithGiven" >> beam.FlatMap(_meet)
