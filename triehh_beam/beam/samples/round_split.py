"""The cut of a round whose candidates exceed a worker's budget (``round_cut.CutRounds``), split
by rank: ``rank_edges`` reads only the round's rank column (a histogram of the ranks' top bits,
refined until every bucket holds at most a quarter of the budget), each candidate file's round
rows are spilled into those buckets (``_SplitRoundDoFn``), each bucket counts its distinct
(rank, user) pairs (``_CountBucketDoFn``), and a round's few counts give the bucket holding its
m-th smallest pair and its place in it, which that bucket alone resolves exactly
(``_ResolveRoundDoFn``: ``SmallestRanks`` of the remainder); then groups of consecutive shards,
each reading only the buckets its rank range touches, keep their sampled rows and write their
tables (``_BuildShardsDoFn``). Every step holds at most the budget's rows (``beam.held``), the
sample is exactly the round's bottom-m and the tables are the in-memory cut's byte for byte.
"""

from __future__ import annotations

import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from triehh_beam.beam.held import HeldRows
from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.samples import samples
from triehh_beam.beam.samples.candidates import ROUND_COLUMN
from triehh_beam.beam.samples.sample_pass import (RoundSample, add_candidates, sampled_shards,
                                                  split_shards)
from triehh_beam.beam.samples.sample_tables import SampleTableBuilder, first_of_each_user
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness import sampling
from triehh_beam.protocol.randomness.bottom_m import SmallestRanks

__all__ = ["PlanRoundDoFn", "SPLIT_TAG", "ShardTables", "SplitRounds", "count_pairs", "plan_round", "rank_edges", "round_rows", "round_row_count"]

SPLIT_TAG = "split"

_COLUMNS = ["user_id", "item", "count", "rank"]
_BITS = 12  # a histogram pass splits a rank range into 2^12 bins
# A unit of work on a split round: (round, first shard, last shard, the top rank sampled, the
# largest sampled (rank, user) or None for TrieHH++ (every row is sampled), the spill files it reads).
# Ranks are unsigned 64-bit: ``Any`` keeps Beam's general coder (a VarInt coder would overflow).
Unit = Tuple[int, int, int, Any, Any, List[str]]
# A bucket's count: (bucket, distinct pairs, rows, smallest rank, largest rank, its spill files).
BucketCount = Tuple[int, int, int, Any, Any, List[str]]


def _may_hold(row_group: pq.RowGroupMetaData, column: int, round_index: int) -> bool:
    statistics = row_group.column(column).statistics
    if statistics is None or not statistics.has_min_max:
        return True
    return statistics.min <= round_index <= statistics.max


def round_rows(path: str, round_index: int, columns: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Round ``round_index``'s rows of one candidate file (``columns``), in batches of at most
    ``batch_rows`` rows; row groups whose ``round`` statistics exclude the round are not read."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        parquet = pq.ParquetFile(f)
        column = parquet.schema_arrow.get_field_index(ROUND_COLUMN)
        groups = [g for g in range(parquet.num_row_groups)
                  if _may_hold(parquet.metadata.row_group(g), column, round_index)]
        if not groups:
            return
        for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=groups,
                                          columns=list(columns) + [ROUND_COLUMN]):
            kept = batch.filter(pc.equal(batch.column(ROUND_COLUMN), round_index))
            if kept.num_rows:
                yield kept.select(list(columns))


def round_row_count(paths: Sequence[str], round_index: int) -> int:
    """The round's candidate rows in ``paths``, from the files' metadata where a row group holds
    only this round (``WriteCandidates`` writes one round per row group), else by reading its
    round column."""
    total = 0
    for path in paths:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            parquet = pq.ParquetFile(f)
            column = parquet.schema_arrow.get_field_index(ROUND_COLUMN)
            for g in range(parquet.num_row_groups):
                group = parquet.metadata.row_group(g)
                statistics = group.column(column).statistics
                if statistics is not None and statistics.has_min_max and statistics.min == statistics.max:
                    total += group.num_rows if statistics.min == round_index else 0
                else:
                    rounds = parquet.read_row_group(g, columns=[ROUND_COLUMN]).column(0)
                    total += int(pc.sum(pc.equal(rounds, round_index)).as_py() or 0)
    return total


def _histograms(paths, round_index, batch_rows, ranges: List[Tuple[int, int]]) -> List[np.ndarray]:
    """Per rank range [lo, hi), the round's rows in each of its 2^12 equal bins."""
    steps = [max(1, -(-(hi - lo) // (1 << _BITS))) for lo, hi in ranges]
    counts = [np.zeros(1 << _BITS, np.int64) for _ in ranges]
    starts = np.array([lo for lo, _ in ranges], dtype=np.uint64)
    for path in paths:
        for batch in round_rows(path, round_index, ["rank"], batch_rows):
            ranks = np.sort(np.asarray(batch.column(0), dtype=np.uint64))
            first = np.searchsorted(ranks, starts, side="left")
            last = np.searchsorted(ranks, np.array([hi - 1 for _, hi in ranges], dtype=np.uint64), side="right")
            for i, (lo, _) in enumerate(ranges):
                if last[i] > first[i]:
                    bins = (ranks[first[i]:last[i]] - np.uint64(lo)) // np.uint64(steps[i])
                    counts[i] += np.bincount(bins.astype(np.int64), minlength=1 << _BITS)
    return counts


def rank_edges(paths: Sequence[str], round_index: int, target: int, batch_rows: int) -> Tuple[np.ndarray, int]:
    """Bucket edges over the round's ranks such that a bucket holds at most ``target`` rows
    (unless it is one rank wide), and the histogram passes it took. A bucket ``b`` is
    ``[edges[b], edges[b + 1])``; the last runs to 2^64. Reads only the rank column."""
    leaves: List[Tuple[int, int, int]] = []  # (lo, hi, rows)
    pending = [(0, 1 << 64)]
    passes = 0
    while pending:
        passes += 1
        next_pending = []
        for (lo, hi), counts in zip(pending, _histograms(paths, round_index, batch_rows, pending)):
            step = max(1, -(-(hi - lo) // (1 << _BITS)))
            for j in np.flatnonzero(counts):
                a, b = lo + int(j) * step, min(hi, lo + (int(j) + 1) * step)
                if counts[j] <= target or b - a == 1:
                    leaves.append((a, b, int(counts[j])))
                else:
                    next_pending.append((a, b))
        pending = next_pending
    leaves.sort()
    edges, rows = [0], 0
    for a, _, c in leaves:  # adjacent leaves merged while they fit
        if rows and rows + c > target:
            edges.append(a)
            rows = 0
        rows += c
    return np.array(edges, dtype=np.uint64), passes


def count_pairs(batches: Sequence[pa.RecordBatch]) -> int:
    """Distinct (rank, user) pairs among rows with ``rank`` and ``user_id`` columns."""
    rows = [b.select(["rank", "user_id"]) for b in batches if b.num_rows]
    if not rows:
        return 0
    table = pa.Table.from_batches(rows).combine_chunks()
    table = table.take(pc.sort_indices(table, sort_keys=[("rank", "ascending"), ("user_id", "ascending")]))
    return int(first_of_each_user(np.asarray(table.column("rank")), table.column("user_id").combine_chunks()).sum())


def plan_round(paths: Sequence[str], round_index: int, budget: int) -> Tuple[int, Optional[np.ndarray]]:
    """(the round's candidate rows, its bucket edges or None: the rows fit the budget, one worker
    cuts the round whole)."""
    rows = round_row_count(paths, round_index)
    if rows <= budget:
        return rows, None
    return rows, rank_edges(paths, round_index, max(1, budget // 4), max(1, budget // 2))[0]


@beam.typehints.with_input_types(int)
@beam.typehints.with_output_types(int)
class PlanRoundDoFn(beam.DoFn):
    """A round -> itself (its candidates fit the budget), or, tagged ``SPLIT_TAG``,
    ``(round, candidate file, bucket edges)`` per candidate file."""

    def __init__(self, pattern: str, budget: int):
        self._pattern = pattern
        self._budget = budget

    def setup(self):
        self._held = HeldRows("cut_plan")

    def process(self, round_index):
        paths = sorted(m.path for m in FileSystems.match([self._pattern])[0].metadata_list)
        rows, edges = plan_round(paths, round_index, self._budget)
        if edges is None:
            yield round_index
            return
        self._held.held(min(rows, max(1, self._budget // 2)))  # one batch of ranks at a time
        for path in paths:
            yield beam.pvalue.TaggedOutput(SPLIT_TAG, (round_index, path, edges))


class ShardTables:
    """Builds and writes a round's shard tables from their kept rows (one per DoFn instance,
    made in ``setup``: its builder caches encodings); counts ``sample_files_written``."""

    def __init__(self, pass_keys: sampling.PassKeys, encoder: ItemEncoder, truncate: bool, samples_dir: str):
        self._keys = pass_keys  # derived keys only, never the seed
        self._builder = SampleTableBuilder(encoder, truncate)
        self._dir = samples_dir
        self._files = Metrics.counter(METRICS_NAMESPACE, "sample_files_written")

    def write(self, round_index: int, kept: Dict[int, List[pa.RecordBatch]]) -> Iterator[Tuple[str, int]]:
        """Per shard of ``kept`` (emptied as it goes), its table's path and users."""
        round_keys = self._keys.round_keys(round_index)
        for shard in sorted(kept):
            table = self._builder.build(round_keys, shard, kept.pop(shard))
            path = samples.part_path(self._dir, round_index, shard)
            samples.write_sample_table(path, table)
            self._files.inc()
            yield path, table.num_rows


def _write_spill(path: str, batches: List[pa.RecordBatch]) -> None:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        with pa.ipc.new_stream(f, batches[0].schema) as writer:
            for batch in batches:
                writer.write_batch(batch)


def _read_spill(path: str) -> Iterator[pa.RecordBatch]:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        yield from pa.ipc.open_stream(f.read())


def _shard_of(ranks: np.ndarray, top_rank: int, shards: int) -> np.ndarray:
    # ``sample_pass.split_shards``'s rule, on a bucket's end ranks.
    return np.minimum((ranks.astype(np.float64) / (float(top_rank) + 1.0) * shards).astype(np.int64), shards - 1)


@beam.typehints.with_input_types(Tuple[int, str, np.ndarray])
@beam.typehints.with_output_types(Tuple[Tuple[int, int], str])
class _SplitRoundDoFn(beam.DoFn):
    """``(round, candidate file, edges)`` -> ``((round, bucket), spill file)``: the file's round
    rows, a batch at a time, buffered by bucket and written once half the budget is buffered."""

    def __init__(self, spill_dir: str, budget: int):
        self._dir = spill_dir
        self._half = max(1, budget // 2)

    def setup(self):
        self._held = HeldRows("cut_buckets")

    def process(self, element):
        round_index, path, edges = element
        buffers: Dict[int, List[pa.RecordBatch]] = {}
        buffered = 0
        for batch in round_rows(path, round_index, _COLUMNS, self._half):
            if buffered + batch.num_rows > self._half:
                yield from self._flush(round_index, buffers)
                buffers, buffered = {}, 0
            bucket = np.searchsorted(edges, np.asarray(batch.column("rank")), side="right") - 1
            order = np.argsort(bucket, kind="stable")
            bounds = np.flatnonzero(np.diff(bucket[order])) + 1
            for part in np.split(order, bounds):
                buffers.setdefault(int(bucket[part[0]]), []).append(batch.take(pa.array(part)))
            buffered += batch.num_rows
            self._held.held(buffered)
        yield from self._flush(round_index, buffers)

    def _flush(self, round_index, buffers):
        for bucket in sorted(buffers):
            path = FileSystems.join(self._dir, f"round-{round_index:04d}",
                                    f"bucket-{bucket:06d}-{uuid.uuid4().hex}.arrows")
            _write_spill(path, buffers[bucket])
            yield (round_index, bucket), path


@beam.typehints.with_input_types(Tuple[Tuple[int, int], Iterable[str]])
@beam.typehints.with_output_types(Tuple[int, BucketCount])
class _CountBucketDoFn(beam.DoFn):
    """``((round, bucket), its spill files)`` -> ``(round, BucketCount)``."""

    def setup(self):
        self._held = HeldRows("cut_count")

    def process(self, element):
        (round_index, bucket), paths = element
        paths = sorted(set(paths))  # each file once, whatever is delivered
        batches = [b.select(["rank", "user_id"]) for path in paths for b in _read_spill(path)]
        rows = sum(b.num_rows for b in batches)
        self._held.held(rows)
        ranks = [np.asarray(b.column("rank")) for b in batches if b.num_rows]
        lo, hi = min(int(r.min()) for r in ranks), max(int(r.max()) for r in ranks)
        yield round_index, (bucket, count_pairs(batches), rows, lo, hi, paths)


@beam.typehints.with_input_types(Tuple[int, Iterable[BucketCount]], records_ranked=int)
@beam.typehints.with_output_types(Unit)
class _ResolveRoundDoFn(beam.DoFn):
    """A round's bucket counts -> its ``RoundSample`` (tagged ``samples_tag``) and its units of
    consecutive shards, each reading at most half the budget's rows."""

    def __init__(self, sample_size: Optional[int], bernoulli_top: Optional[int], users_required: Optional[int],
                 shards: int, budget: int, samples_tag: str):
        self._m = sample_size
        self._top = bernoulli_top
        self._required = users_required
        self._shards = shards
        self._half = max(1, budget // 2)
        self._tag = samples_tag

    def setup(self):
        self._held = HeldRows("cut_resolve")

    def _threshold(self, buckets) -> Tuple[Optional[Tuple[int, bytes]], int, int]:
        """(largest sampled pair, users sampled, the last bucket it reaches)."""
        total = sum(bucket[1] for bucket in buckets)
        users = total if self._m is None else sampling.users_required(self._m, total)
        if self._m is None:
            return (self._top, b""), users, len(buckets) - 1
        before = 0
        for index, (_, pairs, rows, _, _, paths) in enumerate(buckets):
            if users and before + pairs >= users:
                smallest = SmallestRanks(users - before)
                self._held.held(rows)
                for path in paths:
                    for batch in _read_spill(path):
                        add_candidates(smallest, batch)
                return smallest.largest()[0], users, index
            before += pairs
        return None, users, -1

    def process(self, element, records_ranked):
        round_index, buckets = element
        buckets = sorted(buckets)
        largest, users, last = self._threshold(buckets)
        yield beam.pvalue.TaggedOutput(self._tag, (round_index, RoundSample(
            round_index, users, None if self._m is None else self._required, records_ranked)))
        if largest is None or (self._m is not None and self._required is not None and users < self._required):
            return
        yield from self._units(round_index, buckets[:last + 1], largest[0], largest if self._m is not None else None)

    def _units(self, round_index, buckets, top, threshold) -> Iterator[Unit]:
        # The shards each bucket's ranks (at most the top) can fall in: its smallest and largest's.
        touched: Dict[int, List[int]] = {}
        for index, (_, _, _, lo, hi, _) in enumerate(buckets):
            for shard in range(*self._shard_span((lo, hi), top)):
                touched.setdefault(shard, []).append(index)
        unit_shards: List[int] = []
        unit_buckets: List[int] = []
        for shard in sorted(touched):
            merged = sorted(set(unit_buckets) | set(touched[shard]))
            if unit_shards and sum(buckets[i][2] for i in merged) > self._half:
                yield self._unit(round_index, unit_shards, unit_buckets, top, threshold, buckets)
                unit_shards, merged = [], list(touched[shard])
            unit_shards.append(shard)
            unit_buckets = merged
        if unit_shards:
            yield self._unit(round_index, unit_shards, unit_buckets, top, threshold, buckets)

    def _shard_span(self, rank_range: Tuple[int, int], top: int) -> Tuple[int, int]:
        lo, hi = rank_range
        ends = _shard_of(np.array([min(lo, top), min(hi, top)], dtype=np.uint64), top, self._shards)
        return int(ends[0]), int(ends[1]) + 1

    @staticmethod
    def _unit(round_index, shards, bucket_indexes, top, threshold, buckets) -> Unit:
        paths = [p for i in sorted(bucket_indexes) for p in buckets[i][5]]
        return round_index, shards[0], shards[-1], top, threshold, paths


@beam.typehints.with_input_types(Unit)
@beam.typehints.with_output_types(Tuple[int, str])
class _BuildShardsDoFn(beam.DoFn):
    """A unit -> the sample tables of its shards, written (``(round, path)`` per table)."""

    def __init__(self, pass_keys: sampling.PassKeys, shards: int, encoder: ItemEncoder, truncate: bool,
                 samples_dir: str):
        self._shards = shards
        self._writing = (pass_keys, encoder, truncate, samples_dir)  # derived keys only, never the seed

    def setup(self):
        self._tables = ShardTables(*self._writing)
        self._held = HeldRows("cut_shards")

    def _rows(self, round_index, batch, top, threshold):
        if threshold is None:  # TrieHH++: every candidate is sampled
            ranks = np.asarray(batch.column("rank"))
            return split_shards(round_index, batch, np.arange(batch.num_rows), ranks, top, self._shards)
        return sampled_shards((round_index, batch), (threshold, 0), None, self._shards)

    def process(self, unit):
        round_index, first, last, top, threshold, paths = unit
        kept: Dict[int, List[pa.RecordBatch]] = {}
        held = 0
        for path in sorted(set(paths)):
            for batch in _read_spill(path):
                self._held.held(held + batch.num_rows)
                for (_, shard), rows in self._rows(round_index, batch, top, threshold):
                    if first <= shard <= last:
                        kept.setdefault(shard, []).append(rows)
                        held += rows.num_rows
        for path, _ in self._tables.write(round_index, kept):
            yield round_index, path


class SplitRounds(beam.PTransform):
    """The rounds ``PlanRoundDoFn`` split (``(round, candidate file, edges)``) -> a dict of
    ``"tables"`` (``(round, path)`` per table written) and ``samples_tag`` (``(round,
    RoundSample)`` per round), through the module's steps, spilling under ``spill_dir``."""

    def __init__(self, pass_keys: sampling.PassKeys, sample_size: Optional[int], bernoulli_top: Optional[int],
                 users_required: Optional[int], shards: int, encoder: ItemEncoder, truncate: bool,
                 samples_dir: str, spill_dir: str, budget: int, records_ranked, samples_tag: str):
        super().__init__()
        self._split = _SplitRoundDoFn(spill_dir, budget)
        self._resolve = _ResolveRoundDoFn(sample_size, bernoulli_top, users_required, shards, budget, samples_tag)
        self._build = _BuildShardsDoFn(pass_keys, shards, encoder, truncate, samples_dir)
        self._ranked = records_ranked
        self._tag = samples_tag

    def expand(self, files):
        resolved = (
            files
            | "SpreadFiles" >> beam.Reshuffle()
            | "SplitByRank" >> beam.ParDo(self._split)
            | "FilesPerBucket" >> beam.GroupByKey()
            | "CountBuckets" >> beam.ParDo(_CountBucketDoFn())
            | "BucketsPerRound" >> beam.GroupByKey()
            | "ResolveRound" >> beam.ParDo(self._resolve, self._ranked).with_outputs(self._tag, main="units")
        )
        tables = resolved.units | "SpreadUnits" >> beam.Reshuffle() | "BuildShards" >> beam.ParDo(self._build)
        return {"tables": tables, self._tag: resolved[self._tag]}
