"""The record-level Beam steps every job graph shares: ``DropZeroCountsDoFn`` (a record of count 0
is no record), the census of distinct users, ``CountDistinctUsers``, and the records counted,
``CountRows``.
"""

from __future__ import annotations

from typing import Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.io.normalise import binary_buffers
from triehh_beam.protocol.distinct import distinct
from triehh_beam.protocol.randomness import sampling

__all__ = [
    "CountDistinctUsers",
    "CountRows",
    "DistinctFingerprintsDoFn",
    "DropZeroCountsDoFn",
    "UnionSizeCombineFn",
]


def _counter(name: str):
    return Metrics.counter(METRICS_NAMESPACE, name)


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(pa.RecordBatch)
class DropZeroCountsDoFn(beam.DoFn):
    """Drops the records whose count is 0 (counter ``records_zero_count``): a user holds an item
    only with a positive count, and a user with no such record is not in the population. The
    census and every round apply it, so n counts exactly the users a round can sample."""

    def setup(self):
        self._zero = _counter("records_zero_count")

    def process(self, batch):
        positive = pc.greater(batch.column("count"), 0)
        kept = batch.filter(positive)
        if kept.num_rows < batch.num_rows:
            self._zero.inc(batch.num_rows - kept.num_rows)
        if kept.num_rows:
            yield kept


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(Tuple[int, np.ndarray])
class DistinctFingerprintsDoFn(beam.DoFn):
    """A batch -> (shard, sorted distinct user fingerprints) for each of 256 shards."""

    def __init__(self, census_key: sampling.CensusKey):
        self._census_key = census_key  # the census key only, never the seed

    def setup(self):
        self._records_read = _counter("census_records_read")

    def process(self, batch):
        if batch.num_rows == 0:
            return
        self._records_read.inc(batch.num_rows)
        fingerprints = distinct(
            self._census_key.fingerprints_packed(*binary_buffers(batch.column("user_id")))
        )
        shards = (fingerprints >> np.uint64(56)).astype(np.int64)
        bounds = np.searchsorted(shards, np.arange(257))
        for shard in np.flatnonzero(bounds[1:] > bounds[:-1]):
            yield int(shard), fingerprints[bounds[shard] : bounds[shard + 1]]


@beam.typehints.with_input_types(np.ndarray)
@beam.typehints.with_output_types(int)
class UnionSizeCombineFn(beam.CombineFn):
    """Distinct fingerprints of one shard -> their number.

    The accumulator is a list of sorted unique arrays, compacted (one ``distinct`` over their
    concatenation) only when the buffered total doubles since the last compaction: amortised
    O(n log n) per shard, where a ``union1d`` per input was quadratic (88 of 99 CPU-seconds
    of a 10^7-user census).
    """

    def create_accumulator(self):
        return [np.zeros(0, dtype=np.uint64)]

    @staticmethod
    def _compacted(parts):
        return [distinct(np.concatenate(parts))]

    def add_input(self, accumulator, fingerprints):
        accumulator.append(fingerprints)
        if sum(len(a) for a in accumulator[1:]) > max(len(accumulator[0]), 1 << 16):
            accumulator = self._compacted(accumulator)
        return accumulator

    def merge_accumulators(self, accumulators):
        return self._compacted([part for accumulator in accumulators for part in accumulator])

    def extract_output(self, accumulator):
        return int(len(self._compacted(accumulator)[0]))


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(int)
class CountDistinctUsers(beam.PTransform):
    """Record batches -> one element: the number of distinct users (the census, n).

    Users are counted through 64-bit keyed fingerprints, sharded 256 ways so that no worker
    holds all of them. A fingerprint collision (odds about n^2 / 2^65) can only make the count
    smaller than the truth, which makes the privacy plan conservative, never optimistic.
    """

    def __init__(self, sampler: sampling.Sampler):
        super().__init__()
        self._census_key = sampler.census_key()

    def expand(self, batches):
        return (
            batches
            | "DistinctFingerprints" >> beam.ParDo(DistinctFingerprintsDoFn(self._census_key))
            | "UnionPerShard" >> beam.CombinePerKey(UnionSizeCombineFn())
            | "ShardSizes" >> beam.Values()
            | "Total" >> beam.CombineGlobally(sum).with_output_types(int)
        )


def _rows(batch: pa.RecordBatch) -> int:
    return batch.num_rows


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(int)
class CountRows(beam.PTransform):
    """Record batches -> one element: their rows added up (0 for no batch), the records a job read
    or ranked, which the driver checks against the census."""

    def expand(self, batches):
        return (
            batches
            | "RowsPerBatch" >> beam.Map(_rows).with_output_types(int)
            | "Total" >> beam.CombineGlobally(sum).with_output_types(int)
        )
