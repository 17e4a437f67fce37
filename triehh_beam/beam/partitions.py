"""Partition selection on Beam (``--protocol partition-selection``): ``ReleasePartitions`` turns
the sample tables of every user (p_s = 1) into the release, each table's users contributing up
to k distinct items, counted columnar, and the counts merged, selected by their keyed coins and
noised inside one combine (``PartitionCounter``), so no exact count and no dropped item leaves
it; its counters are totals only."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics

from triehh_beam.beam import samples
from triehh_beam.protocol.partition_release import PartitionCounter, SelectionKeys, count_contributions
from triehh_beam.protocol.partition_selection import PartitionSelectionPlan

__all__ = ["ReleasePartitions"]

_NAMESPACE = "triehh"
_Sequence = Tuple[Union[str, bytes], ...]
# (sequence -> contributing users of one table, users in it): private, consumed only by the combine
_Partial = Tuple[Dict[_Sequence, int], int]
# (released (sequence, noisy count or None) pairs sorted, users): kept items only
_Release = Tuple[List[Tuple[_Sequence, Optional[int]]], int]


@beam.typehints.with_input_types(Tuple[int, pa.Table])
@beam.typehints.with_output_types(_Partial)
class _ContributeDoFn(beam.DoFn):
    """One sample table -> its per-item contributing users (private) and users, columnar."""

    def __init__(self, max_items: int):
        self._max_items = max_items

    def setup(self):
        self._users = Metrics.counter(_NAMESPACE, "users_contributing")

    def process(self, keyed):
        _, table = keyed
        users, uniforms = samples.sequence_table(table)
        self._users.inc(users.users)
        yield count_contributions(users, uniforms, self._max_items), users.users


@beam.typehints.with_input_types(_Partial)
@beam.typehints.with_output_types(_Release)
class _SelectCombineFn(beam.CombineFn):
    """Partial counts -> (kept items with noisy counts, users); nothing else leaves."""

    def __init__(self, plan: PartitionSelectionPlan, keys: SelectionKeys):
        self._core = PartitionCounter(plan, keys)

    def create_accumulator(self):
        return self._core.create(), 0

    def add_input(self, accumulator, partial):
        counts, users = accumulator
        return PartitionCounter.add(counts, partial[0]), users + partial[1]

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        merged = accumulators[0][0]
        for counts, _ in accumulators[1:]:
            PartitionCounter.add(merged, counts)
        return merged, sum(a[1] for a in accumulators)

    def extract_output(self, accumulator):
        counts, users = accumulator
        return list(self._core.extract_released(counts)), users


def _count_released(release: _Release) -> _Release:
    Metrics.counter(_NAMESPACE, "items_released").inc(len(release[0]))
    return release


class ReleasePartitions(beam.PTransform):
    """``(round, sample table)`` elements of every user -> ONE ``(released, users)``.

    Args:
      plan: the release's plan; keys: its coin and noise keys (``SelectionKeys.derive``).

    Output: ``released`` is a list of ``(sequence, noisy count or None)`` of the kept items,
    sorted by sequence; ``users`` is the number of users read (private: the operator's).
    """

    def __init__(self, plan: PartitionSelectionPlan, keys: SelectionKeys):
        super().__init__()
        self._plan, self._keys = plan, keys

    def expand(self, tables):
        return (
            tables
            | "Contribute" >> beam.ParDo(_ContributeDoFn(self._plan.max_items))
            | "SelectPartitions" >> beam.CombineGlobally(_SelectCombineFn(self._plan, self._keys))
            | "CountReleased" >> beam.Map(_count_released).with_output_types(_Release)
        )
