"""Whole-item sample-and-threshold on Beam (``--protocol sample-threshold``): ``ReleaseWholeItems``
turns the one Bernoulli sample's tables into the release, each table's users reporting their
chosen whole sequence, counted columnar, and the counts merged and thresholded at tau inside one
combine (``WholeItemCounter``), so nothing below tau leaves it; its counters are totals only."""

from __future__ import annotations

from typing import Dict, List, Tuple, Union

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.samples import samples
from triehh_beam.protocol.central.whole_items import WholeItemCounter, count_whole_items

__all__ = ["ReleaseCombineFn", "ReleaseWholeItems", "count_released"]

_Sequence = Tuple[Union[str, bytes], ...]
# (sequence -> reports of one table, users in it): private, consumed only by the combine below
_Partial = Tuple[Dict[_Sequence, int], int]
# (released (sequence, count) pairs sorted, users sampled): counts >= tau only
_Release = Tuple[List[Tuple[_Sequence, int]], int]


@beam.typehints.with_input_types(Tuple[int, pa.Table])
@beam.typehints.with_output_types(_Partial)
class _ReportWholeItemsDoFn(beam.DoFn):
    """One sample table -> its per-sequence reports (private) and users, columnar."""

    def setup(self):
        self._sampled = Metrics.counter(METRICS_NAMESPACE, "users_sampled")
        self._without = Metrics.counter(METRICS_NAMESPACE, "users_without_items")
        self._reports = Metrics.counter(METRICS_NAMESPACE, "whole_item_reports")

    def process(self, keyed):
        _, table = keyed
        users, uniforms = samples.sequence_table(table)
        reports = count_whole_items(users, uniforms)
        self._sampled.inc(reports.users)
        self._without.inc(reports.users_without_items)
        self._reports.inc(reports.reports)
        yield reports.counts, reports.users


@beam.typehints.with_input_types(_Partial)
class ReleaseCombineFn(beam.CombineFn):
    """Partial counts -> (released items, users): the counts merged in place and let out only
    through ``core.extract_released`` (``WholeItemCounter``: counts below tau never leave;
    ``PartitionCounter``: only the kept items, with noise)."""

    def __init__(self, core):
        self._core = core

    def create_accumulator(self):
        return self._core.create(), 0

    def add_input(self, accumulator, partial):
        counts, users = accumulator
        return self._core.add(counts, partial[0]), users + partial[1]

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        merged = accumulators[0][0]  # the first accumulator may be modified
        for counts, _ in accumulators[1:]:
            self._core.add(merged, counts)
        return merged, sum(a[1] for a in accumulators)

    def extract_output(self, accumulator):
        counts, users = accumulator
        return list(self._core.extract_released(counts)), users


def count_released(release):
    """The ``items_released`` counter (a total), the release passed on."""
    Metrics.counter(METRICS_NAMESPACE, "items_released").inc(len(release[0]))
    return release


class ReleaseWholeItems(beam.PTransform):
    """``(round, sample table)`` elements of one Bernoulli sample -> ONE ``(released, users)``.

    Args:
      tau: the threshold: an item needs at least tau reports to be released.

    Output: ``released`` is a list of ``(sequence, count)`` with ``count >= tau``, sorted by
    sequence; ``users`` is the sample's size (private: the operator's).
    """

    def __init__(self, tau: int):
        super().__init__()
        WholeItemCounter(tau)  # validates tau before the graph is built
        self._tau = tau

    def expand(self, tables):
        return (
            tables
            | "ReportWholeItems" >> beam.ParDo(_ReportWholeItemsDoFn())
            | "ReleaseAtLeastTau" >> beam.CombineGlobally(
                ReleaseCombineFn(WholeItemCounter(self._tau))).with_output_types(_Release)
            | "CountReleased" >> beam.Map(count_released).with_output_types(_Release)
        )
