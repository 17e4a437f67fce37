"""One pass over the records draws the sample of every round (``SampleAllRounds``): samples and
item choices depend only on (secret seed, round, user), never on the trie. Each record batch is
ranked for all rounds in one ``PassKeys.ranks_all`` call; per round, the rows under the rank
prefilter leave as one Arrow batch (never one element per record); the exact bottom-m of each
round (ties broken by the user id bytes, as ``sampling.SmallestRanks``; a user with many
records counts once) is a per-round threshold side input; the rows at or below it are grouped
per (round, shard), the shard a slice of the round's rank range, and become the round's sample
tables (``beam.samples``): items encoded once per distinct item, counts summed per (user,
sequence), choice uniforms computed in one call per table. A sample that comes up short (the
prefilter too tight, odds about 1e-12) keeps nothing and is reported as a value,
``RoundSample.sample_short``, as ``RoundResult.sample_short`` is for a round. TrieHH++'s
Bernoulli samples (``sample_probability``) need no threshold: the ranking pass keeps exactly the
rows whose rank is below ``sampling.bernoulli_threshold(p_s)``, shards them by rank the same way,
and each round's size is the sum of its tables' users.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics

from triehh_beam.beam import samples
from triehh_beam.io.normalise import binary_buffers
from triehh_beam.protocol import columnar, sampling, user_items
from triehh_beam.protocol.encoding import ItemEncoder, ItemKind, Units

__all__ = ["RoundSample", "SampleAllRounds", "round_counter"]

_NAMESPACE = "triehh"
# (round, candidate rows of one record batch: user_id, item, count, rank)
_Candidates = Tuple[int, pa.RecordBatch]
# (largest sampled (rank, user id), distinct users sampled), per round. The rank is unsigned
# 64-bit: ``Any`` keeps Beam's general coder (a VarInt coder would overflow above 2**63).
_Threshold = Tuple[Optional[Tuple[Any, bytes]], int]


def round_counter(round_index: int, name: str):
    """The counter ``round{r}.{name}`` in the ``triehh`` namespace (a driver splits by round)."""
    return Metrics.counter(_NAMESPACE, f"round{round_index}.{name}")


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


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(_Candidates)
class _RankAllRoundsDoFn(beam.DoFn):
    """A batch -> per round, its rows under that round's prefilter bound, with their ranks."""

    def __init__(self, pass_keys: sampling.PassKeys, bounds: Dict[int, int]):
        self._keys = pass_keys  # derived keys only, never the seed
        self._bounds = dict(bounds)

    def setup(self):
        self._ranked = Metrics.counter(_NAMESPACE, "records_ranked")

    def process(self, batch):
        if batch.num_rows == 0:
            return
        self._ranked.inc(batch.num_rows)
        ranks = self._keys.ranks_all(*binary_buffers(batch.column("user_id")))
        for round_index, bound in self._bounds.items():
            if bound < 0:  # a Bernoulli sample of probability below 2^-64: nobody
                continue
            row = ranks[round_index - 1]
            kept = np.flatnonzero(row <= np.uint64(bound))
            if len(kept) == 0:
                continue
            taken = batch.take(pa.array(kept)) if len(kept) < batch.num_rows else batch
            yield round_index, taken.append_column("rank", pa.array(row[kept], pa.uint64()))


def _bottom(pairs: pa.Table, m: int) -> pa.Table:
    """The ``m`` smallest distinct (rank, user_id) rows, sorted."""
    if pairs.num_rows == 0:
        return pairs
    ranks = np.asarray(pairs.column("rank"))
    distinct = np.unique(ranks)
    if len(distinct) > m:
        # Only the m smallest distinct ranks can be kept (a user repeats its rank).
        pairs = pairs.filter(pa.array(ranks <= distinct[m - 1]))
    order = pc.sort_indices(pairs, sort_keys=[("rank", "ascending"), ("user_id", "ascending")])
    pairs = pairs.take(order)
    if pairs.num_rows > 1:
        r = np.asarray(pairs.column("rank"))
        users = pairs.column("user_id")
        same = (r[1:] == r[:-1]) & np.asarray(
            pc.equal(users.slice(1), users.slice(0, pairs.num_rows - 1)), dtype=bool
        )
        if same.any():
            pairs = pairs.filter(pa.array(np.concatenate([[True], ~same])))
    return pairs.slice(0, m)


_PAIRS_SCHEMA = pa.schema([("rank", pa.uint64()), ("user_id", pa.binary())])


@beam.typehints.with_input_types(Optional[pa.RecordBatch])
@beam.typehints.with_output_types(_Threshold)
class _BottomMCombineFn(beam.CombineFn):
    """A round's candidate batches -> its exact bottom-m threshold and sample size (numpy and
    Arrow sorts over (rank, user) columns; None inputs only make the round's key exist)."""

    def __init__(self, m: int):
        self._m = m

    def create_accumulator(self):
        return [pa.table({"rank": pa.array([], pa.uint64()), "user_id": pa.array([], pa.binary())})]

    def _compact(self, parts: List[pa.Table]) -> List[pa.Table]:
        return [_bottom(pa.concat_tables(parts), self._m)]

    def add_input(self, accumulator, batch):
        if batch is None or batch.num_rows == 0:
            return accumulator
        pairs = pa.Table.from_arrays(
            [batch.column("rank"), batch.column("user_id").cast(pa.binary())], schema=_PAIRS_SCHEMA
        )
        accumulator.append(_bottom(pairs, self._m))
        if sum(t.num_rows for t in accumulator) > 2 * self._m + 4096:
            accumulator = self._compact(accumulator)
        return accumulator

    def merge_accumulators(self, accumulators):
        return self._compact([t for accumulator in accumulators for t in accumulator])

    def extract_output(self, accumulator):
        kept = self._compact(accumulator)[0]
        if kept.num_rows == 0:
            return None, 0
        last = kept.num_rows - 1
        return (int(kept.column("rank")[last].as_py()), kept.column("user_id")[last].as_py()), kept.num_rows


def _shard_count(m: int, shards: Optional[int]) -> int:
    if shards is not None:
        return shards
    return max(1, min(256, math.ceil(m / 16384)))


@beam.typehints.with_input_types(_Candidates, thresholds=Dict[int, _Threshold])
@beam.typehints.with_output_types(Tuple[Tuple[int, int], pa.RecordBatch])
class _KeepSampledDoFn(beam.DoFn):
    """Candidate rows at or below their round's threshold, split by shard; nothing at all for a
    round whose sample came up short."""

    def __init__(self, required: Optional[int], shards: int):
        self._required = required
        self._shards = shards

    def process(self, candidates, thresholds):
        round_index, batch = candidates
        largest, users = thresholds.get(round_index, (None, 0))
        if largest is None or (self._required is not None and users < self._required):
            return
        top_rank, top_user = largest
        ranks = np.asarray(batch.column("rank"))
        keep = ranks < np.uint64(top_rank)
        tied = np.flatnonzero(ranks == np.uint64(top_rank))
        if len(tied):
            at_most = pc.less_equal(batch.column("user_id").take(pa.array(tied)), pa.scalar(top_user, pa.binary()))
            keep[tied[np.asarray(at_most, dtype=bool)]] = True
        yield from _split_shards(round_index, batch, np.flatnonzero(keep), ranks, top_rank, self._shards)


def _split_shards(round_index: int, batch: pa.RecordBatch, rows: np.ndarray, ranks: np.ndarray, top_rank: int,
                  shards: int) -> Iterable[Tuple[Tuple[int, int], pa.RecordBatch]]:
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


@beam.typehints.with_input_types(_Candidates)
@beam.typehints.with_output_types(Tuple[Tuple[int, int], pa.RecordBatch])
class _ShardBernoulliDoFn(beam.DoFn):
    """TrieHH++: every candidate row is sampled (the ranking pass kept exactly the ranks below
    the round's Bernoulli threshold), split by shard of [0, top_rank]."""

    def __init__(self, top_rank: int, shards: int):
        self._top = top_rank
        self._shards = shards

    def process(self, candidates):
        round_index, batch = candidates
        ranks = np.asarray(batch.column("rank"))
        yield from _split_shards(round_index, batch, np.arange(batch.num_rows), ranks, self._top, self._shards)


_CACHE_LIMIT = 1 << 17  # distinct items (and sequences) a worker remembers the encoding of


def _encode_distinct(
    items: List, encoder: ItemEncoder, truncate: bool, cache: Optional[Dict] = None
) -> Tuple[List[List[Units]], np.ndarray, np.ndarray]:
    """Per distinct item, its sequences (tokens repeat), too-long and unencodable counts
    (``user_items.encode_value``: the rule a federated device applies too), once per distinct
    item (and, with a ``cache``, once per worker: every round and shard meets the same frequent
    items)."""
    sequences, too_long, unencodable = [], np.zeros(len(items), np.int64), np.zeros(len(items), np.int64)
    for j, value in enumerate(items):
        if cache is not None:
            known = cache.get(value)
            if known is not None:
                sequences.append(known[0])
                too_long[j], unencodable[j] = known[1], known[2]
                continue
        value_parts = user_items.encode_value(encoder, value, truncate)
        encoded = list(value_parts.sequences)
        too_long[j], unencodable[j] = value_parts.too_long, value_parts.unencodable
        sequences.append(encoded)
        if cache is not None:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[value] = (encoded, too_long[j], unencodable[j])
    return sequences, too_long, unencodable


@beam.typehints.with_input_types(Tuple[Tuple[int, int], Iterable[pa.RecordBatch]])
@beam.typehints.with_output_types(Tuple[int, pa.Table])
class _BuildSampleTableDoFn(beam.DoFn):
    """The kept rows of one (round, shard) -> its sample table, one row per sampled user."""

    def __init__(self, pass_keys: sampling.PassKeys, encoder: ItemEncoder, truncate: bool):
        self._keys = pass_keys
        self._encoder = encoder
        self._truncate = truncate

    def setup(self):
        self._encoded: Dict = {}  # item -> its encoding, shared by every round and shard
        self._stored: Dict[Units, bytes] = {}  # sequence -> its stored bytes

    def _stored_bytes(self, sequence: Units) -> bytes:
        stored = self._stored.get(sequence)
        if stored is None:
            if len(self._stored) >= _CACHE_LIMIT:
                self._stored.clear()
            stored = self._stored[sequence] = samples.sequence_to_bytes(sequence)
        return stored

    def process(self, keyed):
        (round_index, shard), batches = keyed
        table = pa.Table.from_batches(list(batches)).combine_chunks()
        # Rows by (rank, user): a user's rows are adjacent, and users come in rank order.
        table = table.take(pc.sort_indices(table, sort_keys=[("rank", "ascending"), ("user_id", "ascending")]))
        n = table.num_rows
        ranks = np.asarray(table.column("rank"))
        user_ids = table.column("user_id").combine_chunks().cast(pa.binary())
        new_user = np.ones(n, dtype=bool)
        if n > 1:
            new_user[1:] = (ranks[1:] != ranks[:-1]) | ~np.asarray(
                pc.equal(user_ids.slice(1), user_ids.slice(0, n - 1)), dtype=bool
            )
        firsts = np.flatnonzero(new_user)
        user_offsets = np.append(firsts, n).astype(np.int64)

        encoded = pc.dictionary_encode(table.column("item").combine_chunks())
        item_codes = np.asarray(encoded.indices, dtype=np.int64)
        item_sequences, too_long, unencodable = _encode_distinct(
            encoded.dictionary.to_pylist(), self._encoder, self._truncate, self._encoded
        )
        records_per_item = np.bincount(item_codes, minlength=len(item_sequences))
        round_counter(round_index, "items_too_long").inc(int(too_long @ records_per_item))
        round_counter(round_index, "items_unencodable").inc(int(unencodable @ records_per_item))

        # Distinct sequences of the shard, and per distinct item the positions of its sequences.
        index: Dict[Units, int] = {}
        flat = [index.setdefault(s, len(index)) for parts in item_sequences for s in parts]
        lengths = np.array([len(parts) for parts in item_sequences], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        flat = np.asarray(flat, dtype=np.int64)
        # Each record contributes its count to each of its item's sequences.
        per_row = lengths[item_codes]
        row_of = np.repeat(np.arange(n, dtype=np.int64), per_row)
        within = np.arange(len(row_of), dtype=np.int64) - np.repeat(np.cumsum(per_row) - per_row, per_row)
        codes = flat[starts[item_codes[row_of]] + within] if len(row_of) else np.zeros(0, np.int64)
        counts = np.asarray(table.column("count"), dtype=np.int64)[row_of]
        expanded_offsets = np.concatenate([[0], np.cumsum(per_row)])[user_offsets]
        distinct = list(index)
        users = columnar.sequence_table(distinct, expanded_offsets, codes, counts)

        sampled_ids = user_ids.take(pa.array(firsts))
        uniforms = self._keys.round_keys(round_index).choice_uniforms_packed(*binary_buffers(sampled_ids))
        stored = pa.array([self._stored_bytes(s) for s in users.sequences], pa.binary())
        text_units = self._encoder.kind is ItemKind.TEXT
        yield round_index, samples.sample_table(
            uniforms, users.offsets, stored.take(pa.array(users.codes)), users.counts, text_units, round_index, shard
        )


def _rows(batch: pa.RecordBatch) -> int:
    return batch.num_rows


def _slim(candidates: _Candidates) -> Tuple[int, Optional[pa.RecordBatch]]:
    round_index, batch = candidates
    return round_index, pa.RecordBatch.from_arrays(
        [batch.column("rank"), batch.column("user_id")], names=["rank", "user_id"]
    )


def _round_sample(
    keyed: Tuple[int, _Threshold], required: Optional[int], records_ranked: int
) -> Tuple[int, RoundSample]:
    round_index, (_, users) = keyed
    return round_index, RoundSample(round_index, users, required, records_ranked)


def _table_users(keyed: Tuple[int, pa.Table]) -> Tuple[int, int]:
    return keyed[0], keyed[1].num_rows  # one row per sampled user


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
    (``beam.samples``), and ``"samples"``, one ``(round, RoundSample)`` per round. Counters
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
        self._population = population
        self._encoder = encoder
        self._truncate = truncate
        if sample_probability is not None:
            # One shard per ~16,384 of the expected sample (16 when n is unknown).
            sample_size = math.ceil(sample_probability * population) if population else 16 * 16384
        self._shards = _shard_count(max(1, sample_size), shards)

    @property
    def required_users(self) -> Optional[int]:
        if self._population is None or self._threshold is not None:
            return None
        return min(self._m, self._population)

    def _records_ranked(self, batches):
        return (
            batches
            | "RowsPerBatch" >> beam.Map(_rows).with_output_types(int)
            | "RecordsRanked" >> beam.CombineGlobally(sum).with_output_types(int)
        )

    def _every_round(self, pipeline, value, element_type):
        """One ``(round, value)`` per round: every round's key exists, even with no sample."""
        return pipeline | "Rounds" >> beam.Create([(r, value) for r in self._rounds]).with_output_types(element_type)

    def _expand_bernoulli(self, batches):
        top = self._threshold - 1  # ranks below the threshold: at most top (-1: nobody)
        candidates = batches | "RankAllRounds" >> beam.ParDo(
            _RankAllRoundsDoFn(self._keys, {r: top for r in self._rounds}))
        tables = (
            candidates
            | "ShardSampled" >> beam.ParDo(_ShardBernoulliDoFn(max(top, 0), self._shards))
            | "GroupPerShard" >> beam.GroupByKey()
            | "BuildSampleTables" >> beam.ParDo(_BuildSampleTableDoFn(self._keys, self._encoder, self._truncate))
        )
        users = (
            (tables | "UsersPerTable" >> beam.Map(_table_users).with_output_types(Tuple[int, int]),
             self._every_round(batches.pipeline, 0, Tuple[int, int]))
            | "AllRounds" >> beam.Flatten()
            | "UsersPerRound" >> beam.CombinePerKey(sum)
        )
        sizes = users | "RoundSamples" >> beam.Map(
            _bernoulli_round_sample, records_ranked=beam.pvalue.AsSingleton(self._records_ranked(batches))
        ).with_output_types(Tuple[int, RoundSample])
        return {"tables": tables, "samples": sizes}

    def expand(self, batches):
        if self._threshold is not None:
            return self._expand_bernoulli(batches)
        if self._population is None:
            bound = 2**64 - 1
        else:
            bound = sampling.rank_prefilter_bound(self._population, self._m)
        bounds = {r: bound for r in self._rounds}
        candidates = batches | "RankAllRounds" >> beam.ParDo(_RankAllRoundsDoFn(self._keys, bounds))
        every_round = self._every_round(batches.pipeline, None, Tuple[int, Optional[pa.RecordBatch]])
        thresholds = (
            (candidates | "RankAndUser" >> beam.Map(_slim).with_output_types(Tuple[int, Optional[pa.RecordBatch]]),
             every_round)
            | "AllRounds" >> beam.Flatten()
            | f"BottomM({self._m})" >> beam.CombinePerKey(_BottomMCombineFn(self._m))
        )
        tables = (
            candidates
            | "KeepSampled"
            >> beam.ParDo(_KeepSampledDoFn(self.required_users, self._shards), thresholds=beam.pvalue.AsDict(thresholds))
            | "GroupPerShard" >> beam.GroupByKey()
            | "BuildSampleTables" >> beam.ParDo(_BuildSampleTableDoFn(self._keys, self._encoder, self._truncate))
        )
        records_ranked = self._records_ranked(batches)
        sizes = thresholds | "RoundSamples" >> beam.Map(
            _round_sample, required=self.required_users, records_ranked=beam.pvalue.AsSingleton(records_ranked)
        ).with_output_types(Tuple[int, RoundSample])
        return {"tables": tables, "samples": sizes}
