"""The sampling pass (``SampleAllRounds``): one read of the records draws the sample of every round,
since samples and item choices depend only on (secret seed, round, user), never on the trie. Each
record batch is ranked for all rounds at once; TrieHH's bottom-m threshold of each round
(``bottom_m``'s rule, after a rank prefilter) is a side input, and the rows at or below it
become the round's sample tables (``beam.samples.sample_tables``), sharded by rank; TrieHH++'s Bernoulli
samples keep exactly the rows ranked below ``sampling.bernoulli_threshold(p_s)``. A sample that
comes up short keeps nothing and says so in ``RoundSample.sample_short``. The building blocks are
public for the windowed pass (``beam.windows.windowed``), which draws the same samples per window.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Mapping, NamedTuple, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.samples.sample_tables import SampleTableBuilder
from triehh_beam.beam.transforms import CountRows
from triehh_beam.io.normalise import binary_buffers
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness import sampling
from triehh_beam.protocol.randomness.bottom_m import PackedIds, SmallestRanks, smallest_rank_rows

__all__ = [
    "BottomMCombineFn",
    "Candidates",
    "RoundSample",
    "SampleAllRounds",
    "SampleFromCandidates",
    "Threshold",
    "add_candidates",
    "bernoulli_shards",
    "bottom_m",
    "candidates_by_round",
    "rank_and_user",
    "rank_rounds",
    "sample_table",
    "sampled_shards",
    "sample_shards",
    "shard_count",
    "split_shards",
    "table_users",
    "threshold_of",
]

# (round, candidate rows of one record batch: user_id, item, count, rank)
Candidates = Tuple[int, pa.RecordBatch]
# (largest sampled (rank, user id), distinct users sampled), per round. The rank is unsigned
# 64-bit: ``Any`` keeps Beam's general coder (a VarInt coder would overflow above 2**63).
Threshold = Tuple[Optional[Tuple[Any, bytes]], int]
# ((round, shard), sampled rows of one record batch)
ShardRows = Tuple[Tuple[int, int], pa.RecordBatch]


class RoundSample(NamedTuple):
    """What the pass drew for one round.

    Attributes:
      round_index: r.
      users_sampled: distinct users the round's sample drew.
      users_required: ``min(m, population)`` when the population is known, else None.
      records_ranked: the records the pass ranked (the same for every round: one pass).
    """

    round_index: int
    users_sampled: int
    users_required: Optional[int]
    records_ranked: int

    @property
    def sample_short(self) -> bool:
        return self.users_required is not None and self.users_sampled < self.users_required


def candidates_by_round(batch: pa.RecordBatch, ranks: np.ndarray, bounds: Mapping[int, int]) -> Iterable[Candidates]:
    """Per round of ``bounds`` (round -> largest rank kept; negative: nobody), the rows of
    ``batch`` ranked at most the bound, with a ``rank`` column; ``ranks`` is
    ``PassKeys.ranks_all`` of the batch's users (row ``r - 1`` for round ``r``)."""
    for round_index, bound in bounds.items():
        if bound < 0:  # a Bernoulli sample of probability below 2^-64: nobody
            continue
        row = ranks[round_index - 1]
        kept = np.flatnonzero(row <= np.uint64(bound))
        if len(kept) == 0:
            continue
        taken = batch.take(pa.array(kept)) if len(kept) < batch.num_rows else batch
        yield round_index, taken.append_column("rank", pa.array(row[kept], pa.uint64()))


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(Candidates)
class _RankAllRoundsDoFn(beam.DoFn):
    """A batch -> per round, its rows under that round's prefilter bound, with their ranks."""

    def __init__(self, pass_keys: sampling.PassKeys, bounds: Dict[int, int]):
        self._keys = pass_keys  # derived keys only, never the seed
        self._bounds = dict(bounds)

    def setup(self):
        self._ranked = Metrics.counter(METRICS_NAMESPACE, "records_ranked")

    def process(self, batch):
        self._ranked.inc(batch.num_rows)
        yield from rank_rounds(self._keys, batch, self._bounds)


def rank_rounds(pass_keys: sampling.PassKeys, batch: pa.RecordBatch, bounds: Mapping[int, int]) -> Iterable[Candidates]:
    """A record batch ranked for every round of ``bounds`` at once under ``pass_keys`` (a batch
    job's, or a window's), cut per round by ``candidates_by_round``; nothing of an empty batch."""
    if batch.num_rows == 0:
        return
    ranks = pass_keys.ranks_all(*binary_buffers(batch.column("user_id")))
    yield from candidates_by_round(batch, ranks, bounds)


def add_candidates(smallest: SmallestRanks, batch: pa.RecordBatch) -> None:
    """Adds a batch of (rank, user_id) candidates to a bottom-m accumulator (columns, no Python
    value per row)."""
    ranks = np.asarray(batch.column("rank"))
    rows = smallest_rank_rows(ranks, smallest.m)
    if len(rows):
        smallest.add_batch(ranks[rows], PackedIds(*binary_buffers(batch.column("user_id").take(pa.array(rows)))))


def threshold_of(smallest: SmallestRanks) -> Threshold:
    """A bottom-m accumulator's (largest sampled (rank, user), users sampled)."""
    return smallest.largest()


def bottom_m(m: int, batches: Iterable[Optional[pa.RecordBatch]]) -> Threshold:
    """The bottom-m threshold of a round's (rank, user_id) candidate batches, all at once (what
    ``BottomMCombineFn`` computes in parts)."""
    smallest = SmallestRanks(m)
    for batch in batches:
        if batch is not None and batch.num_rows:
            add_candidates(smallest, batch)
    return threshold_of(smallest)


@beam.typehints.with_input_types(Optional[pa.RecordBatch])
@beam.typehints.with_output_types(Threshold)
class BottomMCombineFn(beam.CombineFn):
    """A round's candidate batches -> its bottom-m threshold and sample size; delegates to
    ``bottom_m.SmallestRanks`` (None inputs only make the round's key exist)."""

    def __init__(self, m: int):
        self._m = m

    def create_accumulator(self):
        return SmallestRanks(self._m)

    def add_input(self, accumulator, batch):
        if batch is not None and batch.num_rows:
            add_candidates(accumulator, batch)
        return accumulator

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            merged = merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return threshold_of(accumulator)


def sample_shards(sample_size: Optional[int], sample_probability: Optional[float], population: Optional[int],
                  shards: Optional[int] = None) -> int:
    """``shard_count`` of a round's expected sample: m, or ``p_s * n`` for a Bernoulli sample
    (16 shards' worth when n is unknown)."""
    if sample_probability is not None:
        sample_size = math.ceil(sample_probability * population) if population else 16 * 16384
    return shard_count(max(1, sample_size), shards)


def shard_count(expected_users: int, shards: Optional[int] = None) -> int:
    """Sample tables per round: ``shards`` if given, else one per ~16,384 expected users (1..256)."""
    if shards is not None:
        return shards
    return max(1, min(256, math.ceil(expected_users / 16384)))


def sampled_shards(candidates: Candidates, threshold: Threshold, required: Optional[int],
                   shards: int) -> Iterable[ShardRows]:
    """The candidate rows at or below their round's ``threshold``, split by shard; nothing for a
    round whose sample came up short (fewer users than ``required``) or drew nobody."""
    round_index, batch = candidates
    largest, users = threshold
    if largest is None or (required is not None and users < required):
        return
    top_rank, top_user = largest
    ranks = np.asarray(batch.column("rank"))
    keep = ranks < np.uint64(top_rank)
    tied = np.flatnonzero(ranks == np.uint64(top_rank))
    if len(tied):
        at_most = pc.less_equal(batch.column("user_id").take(pa.array(tied)), pa.scalar(top_user, pa.binary()))
        keep[tied[np.asarray(at_most, dtype=bool)]] = True
    yield from split_shards(round_index, batch, np.flatnonzero(keep), ranks, top_rank, shards)


@beam.typehints.with_input_types(Candidates, thresholds=Dict[int, Threshold])
@beam.typehints.with_output_types(ShardRows)
class _KeepSampledDoFn(beam.DoFn):
    """``sampled_shards`` of every candidate batch."""

    def __init__(self, required: Optional[int], shards: int):
        self._required = required
        self._shards = shards

    def process(self, candidates, thresholds):
        threshold = thresholds.get(candidates[0], (None, 0))
        yield from sampled_shards(candidates, threshold, self._required, self._shards)


def split_shards(round_index: int, batch: pa.RecordBatch, rows: np.ndarray, ranks: np.ndarray, top_rank: int,
                 shards: int) -> Iterable[ShardRows]:
    """``batch``'s ``rows`` (ranks at most ``top_rank``) as ``((round, shard), rows)``: a slice
    of the round's sampled rank range [0, top_rank] per shard, balanced, and a user's records
    all in one shard (one rank per user and round)."""
    if len(rows) == 0:
        return
    shard = np.minimum(
        (ranks[rows].astype(np.float64) / (float(top_rank) + 1.0) * shards).astype(np.int64),
        shards - 1,
    )
    order = np.argsort(shard, kind="stable")
    rows, shard = rows[order], shard[order]
    bounds = np.flatnonzero(np.diff(shard)) + 1
    for part in np.split(np.arange(len(rows)), bounds):
        yield (round_index, int(shard[part[0]])), batch.take(pa.array(rows[part]))


@beam.typehints.with_input_types(Candidates)
@beam.typehints.with_output_types(ShardRows)
class _ShardBernoulliDoFn(beam.DoFn):
    """TrieHH++: every candidate row is sampled (the ranking pass kept exactly the ranks below
    the round's Bernoulli threshold), split by shard of [0, top_rank]."""

    def __init__(self, top_rank: int, shards: int):
        self._top = top_rank
        self._shards = shards

    def process(self, candidates):
        yield from bernoulli_shards(candidates, self._top, self._shards)


def bernoulli_shards(candidates: Candidates, top_rank: int, shards: int) -> Iterable[ShardRows]:
    """TrieHH++: every row of a round's candidates (ranked below its Bernoulli threshold, so all
    sampled) split by shard of [0, top_rank]."""
    round_index, batch = candidates
    ranks = np.asarray(batch.column("rank"))
    yield from split_shards(round_index, batch, np.arange(batch.num_rows), ranks, top_rank, shards)


@beam.typehints.with_input_types(Tuple[Tuple[int, int], Iterable[pa.RecordBatch]])
@beam.typehints.with_output_types(Tuple[int, pa.Table])
class _BuildSampleTableDoFn(beam.DoFn):
    """The kept rows of one (round, shard) -> its sample table (``SampleTableBuilder``)."""

    def __init__(self, pass_keys: sampling.PassKeys, encoder: ItemEncoder, truncate: bool):
        self._keys = pass_keys
        self._encoder = encoder
        self._truncate = truncate

    def setup(self):
        self._builder = SampleTableBuilder(self._encoder, self._truncate)

    def process(self, keyed):
        yield sample_table(self._builder, self._keys, keyed)


def sample_table(builder: SampleTableBuilder, pass_keys: sampling.PassKeys,
                 keyed: Tuple[Tuple[int, int], Iterable[pa.RecordBatch]]) -> Tuple[int, pa.Table]:
    """The kept rows of one (round, shard) -> ``(round, its sample table)``, the choice uniforms
    under ``pass_keys``' round keys (a batch job's, or a window's)."""
    (round_index, shard), batches = keyed
    return round_index, builder.build(pass_keys.round_keys(round_index), shard, batches)


def rank_and_user(candidates: Candidates) -> Tuple[int, Optional[pa.RecordBatch]]:
    """A round's candidates cut to the (rank, user_id) columns its bottom-m needs."""
    round_index, batch = candidates
    return round_index, pa.RecordBatch.from_arrays(
        [batch.column("rank"), batch.column("user_id")], names=["rank", "user_id"]
    )


def _round_sample(
    keyed: Tuple[int, Threshold], required: Optional[int], records_ranked: int
) -> Tuple[int, RoundSample]:
    round_index, (_, users) = keyed
    return round_index, RoundSample(round_index, users, required, records_ranked)


def table_users(keyed: Tuple[int, pa.Table]) -> Tuple[int, int]:
    """``(round, sample table)`` -> ``(round, its sampled users)`` (one row per user)."""
    return keyed[0], keyed[1].num_rows


def _bernoulli_round_sample(keyed: Tuple[int, int], records_ranked: int) -> Tuple[int, RoundSample]:
    round_index, users = keyed
    return round_index, RoundSample(round_index, users, None, records_ranked)  # its size is random


class SampleAllRounds(beam.PTransform):
    """Record batches -> the sample tables of every round in ``rounds``, in one pass.

    Args:
      pass_keys: ``Sampler.pass_keys(L)`` (derived keys; the graph never carries the seed).
      rounds: the rounds to draw (from 1 to ``pass_keys.max_rounds``; a resume may skip some).
      sample_size: m, users per round (TrieHH's bottom-m); None with ``sample_probability``.
      population: distinct users n, if known (enables the rank prefilter; None: every record is
        a candidate, slower but never short).
      sample_probability: TrieHH++'s p_s instead of m: round r's sample is every user whose
        rank is below ``sampling.bernoulli_threshold(p_s)``, an exact filter in the ranking
        pass (no prefilter, no bottom-m: never short, and its size is random).
      encoder: the item encoder.
      truncate: cut over-long items to L units instead of dropping them.
      shards: sample tables per round (1..256); default about one per 16,384 sampled users.

    Input: ``pa.RecordBatch`` (user_id binary, item, count; validated, zero counts dropped).
    Output: a dict of two PCollections: ``"tables"``, ``(round, pa.Table)`` sample tables
    (``beam.samples.samples``), and ``"samples"``, one ``(round, RoundSample)`` per round. Counters
    ``records_ranked`` and, per round, ``round{r}.items_too_long`` / ``round{r}.items_unencodable``.
    """

    def __init__(
        self,
        pass_keys: sampling.PassKeys,
        rounds: Sequence[int],
        sample_size: Optional[int],
        population: Optional[int],
        encoder: ItemEncoder,
        truncate: bool = False,
        shards: Optional[int] = None,
        sample_probability: Optional[float] = None,
    ):
        super().__init__()
        if (sample_size is None) == (sample_probability is None):
            raise ValueError("give a sample size (TrieHH) or a sample probability (TrieHH++), not both")
        self._threshold = None if sample_probability is None else sampling.bernoulli_threshold(sample_probability)
        if sample_size is not None and sample_size < 1:
            raise ValueError(f"sample size must be >= 1, got {sample_size}")
        self._rounds = sorted(set(int(r) for r in rounds))
        if not self._rounds or self._rounds[0] < 1 or self._rounds[-1] > pass_keys.max_rounds:
            raise ValueError(f"rounds {list(rounds)} are not within 1..{pass_keys.max_rounds}")
        if shards is not None and not 1 <= shards <= 256:
            raise ValueError(f"shards must be 1 to 256, got {shards}")
        self._keys = pass_keys
        self._m = sample_size
        self._probability = sample_probability
        self._population = population
        self._encoder = encoder
        self._truncate = truncate
        self._shards = sample_shards(sample_size, sample_probability, population, shards)

    @property
    def required_users(self) -> Optional[int]:
        return sampling.users_required(self._m, self._population, by_probability=self._threshold is not None)

    def expand(self, batches):
        if self._threshold is not None:
            bound = self._threshold - 1  # ranks below the threshold: at most bound (-1: nobody)
        elif self._population is None:
            bound = 2**64 - 1
        else:
            bound = sampling.rank_prefilter_bound(self._population, self._m)
        candidates = batches | "RankAllRounds" >> beam.ParDo(
            _RankAllRoundsDoFn(self._keys, {r: bound for r in self._rounds}))
        records_ranked = batches | "RecordsRanked" >> CountRows()
        return candidates | "Sample" >> SampleFromCandidates(
            self._keys, self._rounds, self._m, self._encoder, self._truncate, self._shards,
            sample_probability=self._probability, users_required=self.required_users,
            records_ranked=beam.pvalue.AsSingleton(records_ranked))


class SampleFromCandidates(beam.PTransform):
    """Candidates -> the sample tables of every round in ``rounds``: TrieHH's bottom-m of each
    round's candidates (exact whenever they hold the round's m smallest), TrieHH++'s every
    candidate (the ranking kept exactly the ranks below the Bernoulli threshold).

    Args:
      pass_keys, rounds, sample_size, encoder, truncate, sample_probability: as
        ``SampleAllRounds``'s.
      shards: sample tables per round (``shard_count``'s).
      users_required: ``min(m, n)``: a round with fewer is short and keeps nothing (None: none).
      records_ranked: the records the candidates were ranked from (an int, or a singleton side
        input), reported in each ``RoundSample``.

    Input: ``(round, rows with a rank column)``. Output: as ``SampleAllRounds``'s.
    """

    def __init__(self, pass_keys: sampling.PassKeys, rounds: Sequence[int], sample_size: Optional[int],
                 encoder: ItemEncoder, truncate: bool, shards: int, sample_probability: Optional[float] = None,
                 users_required: Optional[int] = None, records_ranked: Any = 0):
        super().__init__()
        self._keys = pass_keys
        self._rounds = sorted(set(int(r) for r in rounds))
        self._m = sample_size
        self._threshold = None if sample_probability is None else sampling.bernoulli_threshold(sample_probability)
        self._encoder = encoder
        self._truncate = truncate
        self._shards = shards
        self._required = users_required
        self._records_ranked = records_ranked

    def _every_round(self, pipeline, value, element_type):
        """One ``(round, value)`` per round: every round's key exists, even with no sample."""
        return pipeline | "Rounds" >> beam.Create([(r, value) for r in self._rounds]).with_output_types(element_type)

    def _tables(self, shard_rows):
        return (
            shard_rows
            | "GroupPerShard" >> beam.GroupByKey()
            | "BuildSampleTables" >> beam.ParDo(_BuildSampleTableDoFn(self._keys, self._encoder, self._truncate))
        )

    def _expand_bernoulli(self, candidates):
        top = self._threshold - 1
        tables = self._tables(candidates | "ShardSampled" >> beam.ParDo(_ShardBernoulliDoFn(max(top, 0), self._shards)))
        users = (
            (tables | "UsersPerTable" >> beam.Map(table_users).with_output_types(Tuple[int, int]),
             self._every_round(candidates.pipeline, 0, Tuple[int, int]))
            | "AllRounds" >> beam.Flatten()
            | "UsersPerRound" >> beam.CombinePerKey(sum)
        )
        sizes = users | "RoundSamples" >> beam.Map(
            _bernoulli_round_sample, records_ranked=self._records_ranked).with_output_types(Tuple[int, RoundSample])
        return {"tables": tables, "samples": sizes}

    def expand(self, candidates):
        if self._threshold is not None:
            return self._expand_bernoulli(candidates)
        every_round = self._every_round(candidates.pipeline, None, Tuple[int, Optional[pa.RecordBatch]])
        thresholds = (
            (candidates | "RankAndUser" >> beam.Map(rank_and_user).with_output_types(Tuple[int, Optional[pa.RecordBatch]]),
             every_round)
            | "AllRounds" >> beam.Flatten()
            | "BottomM" >> beam.CombinePerKey(BottomMCombineFn(self._m))
        )
        tables = self._tables(
            candidates
            | "KeepSampled"
            >> beam.ParDo(_KeepSampledDoFn(self._required, self._shards), thresholds=beam.pvalue.AsDict(thresholds)))
        sizes = thresholds | "RoundSamples" >> beam.Map(
            _round_sample, required=self._required, records_ranked=self._records_ranked
        ).with_output_types(Tuple[int, RoundSample])
        return {"tables": tables, "samples": sizes}
