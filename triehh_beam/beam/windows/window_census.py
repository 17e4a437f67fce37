"""The census of every declared window of a windowed discovery: ``CensusEachWindow`` counts each
window's distinct users (by keyed fingerprint, ``transforms.DistinctFingerprintsDoFn``) and
records, and gives every declared window its census, ``(0, 0)`` when it has no record, once (its
first pane), as one element of the window: what the window's ``PlanAndCharge`` step reads."""

from __future__ import annotations

from typing import Iterable, Sequence, Tuple

import apache_beam as beam
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from triehh_beam.beam import transforms
from triehh_beam.beam.windows.windows import EventWindows

__all__ = ["CensusEachWindow"]


class _FirstPaneDoFn(beam.DoFn):
    """A window's census as its first pane only: a streaming runner fires a window again when
    an element reaches it behind the watermark (a restarted stream's ticks of windows that closed
    while it was down), and a window is decided and released once."""

    def process(self, element, pane=beam.DoFn.PaneInfoParam):
        if pane.index == 0:
            yield element


def _users(users: int) -> Tuple[int, int]:
    return users, 0


def _records(batch) -> Tuple[int, int]:
    return 0, batch.num_rows


def _add(censuses: Iterable[Tuple[int, int]]) -> Tuple[int, int]:
    """A window's (distinct users, records), added up from its shards and batches."""
    users = records = 0
    for u, r in censuses:
        users, records = users + u, records + r
    return users, records


class CensusEachWindow(beam.PTransform):
    """Record batches in ``windows.window_fn()`` -> ``(distinct users, records)`` once per
    window of ``starts`` (private counts).

    Args:
      windows: the job's ``EventWindows``.
      census_key: a ``CensusKey`` derived from the seed.
      starts: the declared windows' starts.
    """

    def __init__(self, windows: EventWindows, census_key, starts: Sequence[int]):
        super().__init__()
        self._windows = windows
        self._census_key = census_key
        self._starts = list(starts)

    def _at_window(self, start: int):
        """A declared window's census element, in the (moved) window downstream of the gate."""
        return TimestampedValue((0, 0), Timestamp(micros=start + self._windows.lateness_micros))

    def expand(self, records):
        declared = (
            records.pipeline
            | "DeclaredWindows" >> beam.Create(self._starts)
            | "AtWindowStarts" >> beam.Map(self._at_window)
            | "IntoDeclaredWindows" >> beam.WindowInto(self._windows.window_fn())
        )
        users = (
            records
            | "DistinctFingerprints" >> beam.ParDo(transforms.DistinctFingerprintsDoFn(self._census_key))
            | "UnionPerShard" >> beam.CombinePerKey(transforms.UnionSizeCombineFn())
            | "ShardSizes" >> beam.Values()
            | "UsersOfShard" >> beam.Map(_users)
        )
        return ((users, records | "RowsOfBatch" >> beam.Map(_records), declared)
                | "EveryDeclaredWindow" >> beam.Flatten()
                | "UsersAndRecords" >> beam.CombineGlobally(_add).without_defaults()
                | "FirstCensusPane" >> beam.ParDo(_FirstPaneDoFn()))
