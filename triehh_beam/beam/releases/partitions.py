"""Partition selection on Beam (``--protocol partition-selection``): ``ReleasePartitions`` turns
the sample tables of every user (p_s = 1) into the release, each table's users contributing up
to k distinct items, counted columnar, and the counts merged, selected by their keyed coins and
noised inside one combine (``PartitionCounter``), so no exact count and no dropped item leaves
it. It adds no counter: the number of users read is n itself, private under every protocol (the
census keeps it out of the runner's metrics too), so it reaches the operator only through the
pass's own output, in the private block."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

import apache_beam as beam
import pyarrow as pa

from triehh_beam.beam.releases.whole_items import ReleaseCombineFn, count_released
from triehh_beam.beam.samples import samples
from triehh_beam.protocol.central.partition_release import (PartitionCounter, SelectionKeys,
                                                            count_contributions)
from triehh_beam.protocol.central.partition_selection import PartitionSelectionPlan

__all__ = ["ReleasePartitions"]

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

    def process(self, keyed):
        _, table = keyed
        users, uniforms = samples.sequence_table(table)
        yield count_contributions(users, uniforms, self._max_items), users.users


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
            | "SelectPartitions" >> beam.CombineGlobally(
                ReleaseCombineFn(PartitionCounter(self._plan, self._keys))).with_output_types(_Release)
            | "CountReleased" >> beam.Map(count_released).with_output_types(_Release)
        )
