"""Event-time windows of a windowed discovery and the gate that keeps late records out of them
(docs/protocol.md §1, "Windows"): ``GateLateRecords`` passes each window's on-time records on,
in batches, and sends records that arrive after the window closed to its ``late`` output,
and ``SplitIntoWindows`` cuts timestamped batches into one batch per window."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger, window
from apache_beam.utils.timestamp import Duration, Timestamp
from apache_beam.utils.windowed_value import PaneInfoTiming

from triehh_beam.beam.metrics import METRICS_NAMESPACE

__all__ = [
    "ADMITTED_TAG",
    "LATE_HORIZON",
    "LATE_TAG",
    "EventWindows",
    "GateLateRecords",
    "SplitIntoWindows",
    "rfc3339",
]

LATE_TAG = "late"
ADMITTED_TAG = "admitted"
_SHARDS = 16  # gate keys per window: a window's records are not serialised through one key
# How long after its close a window still accepts records, as late (to the dead letter): a year.
LATE_HORIZON = Duration(seconds=366 * 24 * 3600)


def rfc3339(micros: int) -> str:
    """A UTC instant as RFC 3339 (``2026-11-23T10:00:00Z``; fractions only when present)."""
    text = Timestamp(micros=micros).to_rfc3339()
    return text.replace(".000000Z", "Z").replace(".000Z", "Z")


@dataclasses.dataclass(frozen=True)
class EventWindows:
    """Fixed event-time windows of ``size_micros``, each closing ``lateness_micros`` after its end.

    Raises:
      ValueError: a size below one second, or a negative lateness.
    """

    size_micros: int
    lateness_micros: int = 0

    def __post_init__(self):
        if self.size_micros < 1_000_000:
            raise ValueError(f"a window lasts at least one second, got {self.size_micros / 1e6:g} s")
        if self.lateness_micros < 0:
            raise ValueError(f"allowed lateness cannot be negative, got {self.lateness_micros / 1e6:g} s")

    def start_of(self, micros: int) -> int:
        """The start of the window that holds the instant ``micros``."""
        return micros // self.size_micros * self.size_micros

    def closes_at(self, start_micros: int) -> int:
        return start_micros + self.size_micros + self.lateness_micros

    def window_fn(self) -> window.FixedWindows:
        """The windows downstream of the gate (records moved ``lateness`` later)."""
        return window.FixedWindows(
            Duration(micros=self.size_micros), offset=Timestamp(micros=self.lateness_micros % self.size_micros)
        )

    def start_of_window(self, beam_window: window.IntervalWindow) -> int:
        """The start of the event-time window a downstream (moved) Beam window holds."""
        return int(beam_window.start.micros) - self.lateness_micros


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(Tuple[Tuple[int, int], pa.RecordBatch])
class _ShiftDoFn(beam.DoFn):
    """Moves each batch ``lateness`` later in event time, keyed by its window and a shard of it.

    The key names the window so that a key's state holds one window: the grouping keeps each
    window's state for ``LATE_HORIZON`` after its close, and Beam's DirectRunner copies a key's
    whole state (every window in it) for each bundle, so keyed by the shard alone a stream's
    every bundle cost more with every window it had closed (measured: 2-second windows at
    1,000 records/s fell behind after about ten windows)."""

    def __init__(self, windows: EventWindows):
        self._windows = windows

    def process(self, batch, timestamp=beam.DoFn.TimestampParam):
        if batch.num_rows:
            # Event times are whole milliseconds (Pub/Sub's): shard by the millisecond.
            micros = int(timestamp.micros)
            key = (self._windows.start_of(micros), micros // 1000 % _SHARDS)
            yield window.TimestampedValue((key, batch), timestamp + Duration(micros=self._windows.lateness_micros))


class _SplitPanesDoFn(beam.DoFn):
    """A window's grouped records -> the on-time pane's records, re-cut into batches of up to
    ``rows``, and their count (``ADMITTED_TAG``); a late pane's records -> ``LATE_TAG``."""

    def __init__(self, windows: EventWindows, rows: int):
        self._windows = windows
        self._rows = rows

    def setup(self):
        self._late = Metrics.counter(METRICS_NAMESPACE, "stream.late_records")

    def process(self, keyed, pane=beam.DoFn.PaneInfoParam, beam_window=beam.DoFn.WindowParam):
        (_, shard), batches = keyed
        start = self._windows.start_of_window(beam_window)
        batches = [b for b in batches if b.num_rows]
        if pane.timing == PaneInfoTiming.LATE:
            for batch in batches:
                self._late.inc(batch.num_rows)
                yield beam.pvalue.TaggedOutput(LATE_TAG, (start, batch))
            return
        yield beam.pvalue.TaggedOutput(ADMITTED_TAG, (start, shard, sum(b.num_rows for b in batches)))
        if batches:
            yield from pa.Table.from_batches(batches).combine_chunks().to_batches(max_chunksize=self._rows)


class GateLateRecords(beam.PTransform):
    """Timestamped record batches -> the on-time batches in the windows downstream, and the late.

    Output: a dict: ``"records"``, ``pa.RecordBatch`` in ``windows.window_fn()`` (moved
    ``lateness`` later in event time; default trigger), a window's records in batches of up to
    ``rows`` rows; ``LATE_TAG``, ``(window start, batch)`` of records that arrived after their
    window closed (counter ``stream.late_records``), in the global window; ``ADMITTED_TAG``, ``(window start, shard,
    records)`` on time, per shard, once per window. A record more than ``LATE_HORIZON`` after
    its window's close is dropped by the runner (Beam's ``droppedDueToLateness``).
    """

    def __init__(self, windows: EventWindows, rows: int = 65536):
        super().__init__()
        self._windows = windows
        self._rows = rows

    def expand(self, batches):
        window_fn = self._windows.window_fn()
        gated = (
            batches
            | "Shift" >> beam.ParDo(_ShiftDoFn(self._windows))
            | "IntoClosingWindows" >> beam.WindowInto(
                window_fn, trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING, allowed_lateness=LATE_HORIZON)
            | "UntilClose" >> beam.GroupByKey()
            | "Panes" >> beam.ParDo(_SplitPanesDoFn(self._windows, self._rows)).with_outputs(
                LATE_TAG, ADMITTED_TAG, main="records")
        )
        # Downstream, one firing per window (the default trigger): only on-time records are left.
        on_time = gated.records | "IntoWindows" >> beam.WindowInto(window_fn)
        # The late leave their windows (already fired): the dead letter takes them as they come.
        late = gated[LATE_TAG] | "LateOutOfWindows" >> beam.WindowInto(window.GlobalWindows())
        return {"records": on_time, LATE_TAG: late, ADMITTED_TAG: gated[ADMITTED_TAG]}


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(pa.RecordBatch)
class _SplitDoFn(beam.DoFn):
    def __init__(self, windows: EventWindows, column: str):
        self._windows = windows
        self._column = column

    def process(self, batch) -> Iterable:
        if batch.num_rows == 0:
            return
        micros = np.asarray(batch.column(self._column), dtype=np.int64)
        starts = np.floor_divide(micros, self._windows.size_micros) * self._windows.size_micros
        rows = batch.drop_columns([self._column]) if hasattr(batch, "drop_columns") else batch.select(
            [n for n in batch.schema.names if n != self._column])
        for start in np.unique(starts):
            part = rows.filter(pa.array(starts == start))
            yield window.TimestampedValue(part, Timestamp(micros=int(start)))


class SplitIntoWindows(beam.PTransform):
    """Record batches with an event-time column (int64 microseconds, UTC) -> one batch per
    window they touch, timestamped at the window's start, without the column."""

    def __init__(self, windows: EventWindows, column: str = "timestamp"):
        super().__init__()
        self._windows = windows
        self._column = column

    def expand(self, batches):
        return batches | "SplitIntoWindows" >> beam.ParDo(_SplitDoFn(self._windows, self._column))
