"""Event-time windows of a windowed discovery, and the gate that keeps late records out of them.

A windowed job runs one complete discovery per fixed event-time window ``[s, s + size)``,
released once the watermark passes ``s + size + lateness`` (the window *closes*). Beam fires a
window when the watermark passes its end, so the gate (``GateLateRecords``) moves every record
it lets through ``lateness`` later in event time and the windows downstream are
``FixedWindows(size, offset=lateness)``: the window that holds ``[s, s + size)``'s records ends
exactly when ``s`` closes, and fires once, with all of them (no early or late panes, no
trigger to get wrong). The gate is a stateful ``DoFn`` keyed by (window start, shard): a
watermark timer at the close marks the window closed, and a record that arrives for a closed
window leaves on the ``late`` output (for the dead letter, counted) instead of being dropped by
the runner. Anything the gate lets through is on time downstream (a watermark never passes an
element still upstream of it). ``SplitIntoWindows`` turns record batches with a ``timestamp``
column (bounded replay) into one timestamped batch per window; ``window_view`` makes a
per-window side input safe for the empty bundles Beam's Python DirectRunner sends in streaming
mode.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Iterable, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.metrics import Metrics
from apache_beam.transforms import userstate, window
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils.timestamp import MIN_TIMESTAMP, Duration, Timestamp

__all__ = [
    "LATE_TAG",
    "BatchPerWindow",
    "EventWindows",
    "GateLateRecords",
    "SplitIntoWindows",
    "rfc3339",
    "window_view",
]

_NAMESPACE = "triehh"
LATE_TAG = "late"
_SHARDS = 16  # gate keys per window: a window's records are not serialised through one key


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


class _TolerantMapping:
    """A side input's window mapping that also accepts the ``None`` window of an empty bundle."""

    def __init__(self, inner):
        self._inner = inner

    def __call__(self, main_window):
        if main_window is None:  # an empty bundle reads nothing: any ready window will do
            return window.IntervalWindow(MIN_TIMESTAMP, MIN_TIMESTAMP + Duration(micros=1))
        return self._inner(main_window)


def window_view(view: beam.pvalue.AsSideInput) -> beam.pvalue.AsSideInput:
    """``view`` (``AsList``, ``AsSingleton``...) made safe for empty bundles.

    Beam 2.77's Python DirectRunner maps the main input's window onto the side input's for
    every bundle, and an empty bundle (streaming mode sends them) has no window: the mapping
    fails with ``'NoneType' object has no attribute 'max_timestamp'``. Returns ``view``.
    """
    view._window_mapping_fn = _TolerantMapping(view._window_mapping_fn)
    return view


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(Tuple[Tuple[int, int], pa.RecordBatch])
class _KeyByWindowDoFn(beam.DoFn):
    def __init__(self, windows: EventWindows):
        self._windows = windows

    def process(self, batch, timestamp=beam.DoFn.TimestampParam):
        if batch.num_rows:
            micros = int(timestamp.micros)
            yield (self._windows.start_of(micros), micros % _SHARDS), batch


@beam.typehints.with_input_types(Tuple[Tuple[int, int], pa.RecordBatch])
@beam.typehints.with_output_types(pa.RecordBatch)
class _GateDoFn(beam.DoFn):
    """Lets a window's records through until it closes; after that, they are late."""

    CLOSED = userstate.ReadModifyWriteStateSpec("closed", beam.coders.BooleanCoder())
    CLOSE = userstate.TimerSpec("close", TimeDomain.WATERMARK)

    def __init__(self, windows: EventWindows):
        self._windows = windows

    def setup(self):
        self._late = Metrics.counter(_NAMESPACE, "stream.late_records")

    def process(
        self,
        keyed,
        timestamp=beam.DoFn.TimestampParam,
        closed=beam.DoFn.StateParam(CLOSED),
        close=beam.DoFn.TimerParam(CLOSE),
    ):
        (start, _), batch = keyed
        if closed.read():
            self._late.inc(batch.num_rows)
            yield beam.pvalue.TaggedOutput(LATE_TAG, (start, batch))
            return
        close.set(Timestamp(micros=self._windows.closes_at(start)))
        yield window.TimestampedValue(batch, timestamp + Duration(micros=self._windows.lateness_micros))

    @userstate.on_timer(CLOSE)
    def on_close(self, closed=beam.DoFn.StateParam(CLOSED)):
        closed.write(True)


class GateLateRecords(beam.PTransform):
    """Timestamped record batches -> the same batches in the windows downstream, and the late.

    Output: a ``DoOutputsTuple``: the main output, ``pa.RecordBatch`` in
    ``windows.window_fn()`` (moved ``lateness`` later in event time), and ``LATE_TAG``,
    ``(window start, batch)`` of records whose window had closed when they arrived (counter
    ``stream.late_records``).
    """

    def __init__(self, windows: EventWindows):
        super().__init__()
        self._windows = windows

    def expand(self, batches):
        gated = (
            batches
            | "KeyByWindow" >> beam.ParDo(_KeyByWindowDoFn(self._windows))
            | "Gate" >> beam.ParDo(_GateDoFn(self._windows)).with_outputs(LATE_TAG, main="records")
        )
        windowed = gated.records | "IntoWindows" >> beam.WindowInto(self._windows.window_fn())
        return {"records": windowed, LATE_TAG: gated[LATE_TAG]}


def _by_shard(batch: pa.RecordBatch) -> Tuple[int, pa.RecordBatch]:
    return zlib.crc32(batch.column("user_id")[0].as_py()) % _SHARDS, batch


def _rebatched(keyed, rows: int) -> Iterable[pa.RecordBatch]:
    _, batches = keyed
    table = pa.Table.from_batches([b for b in batches if b.num_rows])
    yield from table.combine_chunks().to_batches(max_chunksize=rows)


class BatchPerWindow(beam.PTransform):
    """A window's record batches, held until the window closes and re-cut into batches of up to
    ``rows`` rows (a message's few records become part of one large batch).

    Downstream consumers of a per-window side input then receive each window's records in
    bundles of that window alone. Beam 2.77's Python DirectRunner holds a whole bundle until the
    side input is ready for the *latest* window of any element in it, so a bundle mixing a
    closed window's records with the next window's (one Pub/Sub pull near a boundary) waited
    for the next window's close; on other runners it is one shuffle more, of records that would
    wait for the window's plan anyway.
    """

    def __init__(self, rows: int = 65536):
        super().__init__()
        self._rows = rows

    def expand(self, batches):
        return (
            batches
            | "ByShard" >> beam.Map(_by_shard).with_output_types(Tuple[int, pa.RecordBatch])
            | "PerWindow" >> beam.GroupByKey()
            | "Rebatch" >> beam.FlatMap(_rebatched, rows=self._rows).with_output_types(pa.RecordBatch)
        )


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
