"""The frequency estimates as one Beam step, ``EstimateFrequencies`` (docs/protocol.md §5): one
more pass over the record batches, the discovered leaves a side input; rows matching a leaf are
routed by a keyed hash of the user id to shards, each shard's users choose one leaf and are
counted, and one combine adds the shards' exact counts and releases them with noise added once.
The exact counts never leave the step, and the graph carries the derived ``EstimateKeys``, never
the seed. ``MatchTargetsDoFn``, ``CountChoicesDoFn`` and ``add_counts`` also serve the windowed
estimates (:mod:`triehh_beam.beam.windows.windowed_estimates`)."""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple, Union

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from triehh_beam.beam.samples.sample_tables import first_of_each_user
from triehh_beam.io.arrays import binary_buffers
from triehh_beam.protocol.estimates.frequency_estimates import (EstimateKeys, EstimateTargets,
                                                                FrequencyEstimates, count_choices,
                                                                release)
from triehh_beam.protocol.items.encoding import EncodingError, ItemEncoder, ItemTooLongError
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric

__all__ = ["DEFAULT_SHARDS", "EstimateFrequencies"]

#: Groups the users are split into when the caller does not say (a shard is held in memory).
DEFAULT_SHARDS = 64
#: The most shards a user can be routed to (the hash's low 11 bits route a user).
MAX_SHARDS = 2048
_CACHE_LIMIT = 1 << 17  # distinct items a worker remembers the leaves of
_ROWS_SCHEMA = pa.schema([("user_id", pa.binary()), ("target", pa.int64()), ("count", pa.int64()),
                          ("hash", pa.uint64())])


def _item_targets(value, encoder: ItemEncoder, truncate: bool, targets: EstimateTargets) -> Tuple[int, ...]:
    """The leaves (positions) a record's item counts for: one per token that starts with a leaf
    (the sampling pass's encoding rules: a too long item dropped or cut, an unencodable one
    skipped)."""
    try:
        parts = encoder.items_of(value)
    except EncodingError:
        return ()
    encode = encoder.encode_truncated if truncate else encoder.encode
    found = []
    for item in parts:
        try:
            code = targets.index_of(encode(item))
        except (ItemTooLongError, EncodingError):
            continue
        if code >= 0:
            found.append(code)
    return tuple(found)


@beam.typehints.with_input_types(pa.RecordBatch, targets=EstimateTargets)
@beam.typehints.with_output_types(Tuple[int, pa.RecordBatch])
class MatchTargetsDoFn(beam.DoFn):
    """A record batch -> per shard, its rows that count for a leaf: (user_id, target, count,
    hash), one row per (record, matching token)."""

    def __init__(self, keys: EstimateKeys, encoder: ItemEncoder, truncate: bool, shards: int):
        self._keys = keys
        self._encoder = encoder
        self._truncate = truncate
        self._shards = shards

    def setup(self):
        self._for: Optional[EstimateTargets] = None
        self._cache: Dict = {}

    def process(self, batch, targets):
        if batch.num_rows == 0 or len(targets) == 0:
            return
        if targets != self._for:  # a worker meets one job's leaves; compare, then cache
            self._for, self._cache = targets, {}
        encoded = pc.dictionary_encode(batch.column("item"))
        matched: List[Tuple[int, ...]] = []
        for value in encoded.dictionary.to_pylist():
            known = self._cache.get(value)
            if known is None:
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                known = self._cache[value] = _item_targets(value, self._encoder, self._truncate, targets)
            matched.append(known)
        lengths = np.array([len(codes) for codes in matched], dtype=np.int64)
        item_codes = np.asarray(encoded.indices, dtype=np.int64)
        per_row = lengths[item_codes]
        rows = np.flatnonzero(per_row)
        if len(rows) == 0:
            return
        # Each matching record contributes its count to each of its matching tokens' leaves.
        flat = np.fromiter((c for codes in matched for c in codes), dtype=np.int64, count=int(lengths.sum()))
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        repeat = per_row[rows]
        row_of = np.repeat(rows, repeat)
        within = np.arange(len(row_of), dtype=np.int64) - np.repeat(np.cumsum(repeat) - repeat, repeat)
        target = flat[starts[item_codes[row_of]] + within]
        users = batch.column("user_id").take(pa.array(rows)).cast(pa.binary())
        hashes = np.repeat(self._keys.user_hashes_packed(*binary_buffers(users)), repeat)
        counts = np.asarray(batch.column("count"), dtype=np.int64)[row_of]
        user_ids = users.take(pa.array(np.repeat(np.arange(len(rows)), repeat)))
        shard = EstimateKeys.shard_of(hashes, self._shards)
        order = np.argsort(shard, kind="stable")
        bounds = np.flatnonzero(np.diff(shard[order])) + 1
        for part in np.split(order, bounds):
            yield int(shard[part[0]]), pa.RecordBatch.from_arrays(
                [user_ids.take(pa.array(part)), pa.array(target[part]), pa.array(counts[part]),
                 pa.array(hashes[part], pa.uint64())], schema=_ROWS_SCHEMA)


@beam.typehints.with_input_types(Tuple[int, Iterable[pa.RecordBatch]], targets=EstimateTargets)
@beam.typehints.with_output_types(np.ndarray)
class CountChoicesDoFn(beam.DoFn):
    """One shard's rows -> its users' exact counts per leaf (private: they go only to the
    release combine)."""

    def process(self, keyed, targets):
        _, batches = keyed
        table = pa.Table.from_batches(list(batches), schema=_ROWS_SCHEMA).combine_chunks()
        # Rows by (hash, user id): a user's rows are adjacent (equal hashes of two users, a
        # 2^-64 event, are still told apart by the id).
        table = table.take(pc.sort_indices(table, sort_keys=[("hash", "ascending"), ("user_id", "ascending")]))
        n = table.num_rows
        hashes = np.asarray(table.column("hash"))
        first = first_of_each_user(hashes, table.column("user_id").combine_chunks())
        firsts = np.flatnonzero(first)
        offsets = np.append(firsts, n).astype(np.int64)
        yield count_choices(targets, offsets, np.asarray(table.column("target"), dtype=np.int64),
                            np.asarray(table.column("count"), dtype=np.int64),
                            EstimateKeys.uniforms(hashes[firsts]))


def add_counts(parts: Iterable[Optional[np.ndarray]]) -> Optional[np.ndarray]:
    """The sum of the count vectors in ``parts`` (None ones skipped; None when all are), never
    one of them modified."""
    total = None
    for part in parts:
        if part is not None:
            total = part.copy() if total is None else total + part
    return total


def check_estimate_args(epsilon: float, shards: int) -> float:
    """``epsilon`` as a float, checked before any graph is built.

    Raises:
      ValueError: shards outside 1..``MAX_SHARDS``, or an epsilon the noise cannot use.
    """
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be 1 to {MAX_SHARDS}, got {shards}")
    epsilon = float(epsilon)
    TwoSidedGeometric(epsilon)
    return epsilon


@beam.typehints.with_input_types(Optional[np.ndarray])
@beam.typehints.with_output_types(FrequencyEstimates)
class _ReleaseCombineFn(beam.CombineFn):
    """The shards' exact counts, added up -> the released estimates (``release``: noise added
    once, here). Every leaf is released, held by anyone or not. The leaves come as a side input
    to every method; None inputs only make sure the combine runs."""

    def __init__(self, keys: EstimateKeys, epsilon: float):
        self._keys = keys
        self._epsilon = epsilon

    def create_accumulator(self, targets):
        return None

    def add_input(self, accumulator, counts, targets):
        if counts is not None and len(counts) != len(targets):
            raise ValueError(f"{len(counts)} counts for {len(targets)} leaves")
        return add_counts((accumulator, counts))

    def merge_accumulators(self, accumulators, targets):
        return add_counts(accumulators)

    def extract_output(self, accumulator, targets):
        exact = np.zeros(len(targets), dtype=np.int64) if accumulator is None else accumulator
        return release(exact.tolist(), targets, self._epsilon, self._keys)


class EstimateFrequencies(beam.PTransform):
    """Record batches -> one ``FrequencyEstimates``: every discovered leaf's noisy count.

    Args:
      keys: ``EstimateKeys.derive(seed, identity)`` (derived keys; never the seed).
      epsilon: epsilon_est, what the estimates spend.
      targets: the discovered leaves: an ``EstimateTargets``, or a PCollection of one (for a
        graph that discovers them in the same job; it is a side input either way).
      encoder: the job's item encoder.
      truncate: cut over-long items to L units (as the job's ``--truncate-long-items``).
      shards: groups the users are split into, 1 to 2048 (each held in memory by one worker).

    Input: ``pa.RecordBatch`` (user_id binary, item, count; validated, zero counts dropped).
    Output: one ``FrequencyEstimates``.
    """

    def __init__(self, keys: EstimateKeys, epsilon: float, targets: Union[EstimateTargets, beam.PCollection],
                 encoder: ItemEncoder, truncate: bool = False, shards: int = DEFAULT_SHARDS):
        super().__init__()
        self._epsilon = check_estimate_args(epsilon, shards)
        self._keys = keys
        self._targets = targets
        self._encoder = encoder
        self._truncate = truncate
        self._shards = shards

    def expand(self, batches):
        pipeline = batches.pipeline
        targets = self._targets
        if not isinstance(targets, beam.PCollection):
            targets = pipeline | "Leaves" >> beam.Create([targets]).with_output_types(EstimateTargets)
        leaves = beam.pvalue.AsSingleton(targets)
        counts = (
            batches
            | "MatchLeaves" >> beam.ParDo(
                MatchTargetsDoFn(self._keys, self._encoder, self._truncate, self._shards), targets=leaves)
            | "GroupPerShard" >> beam.GroupByKey()
            | "CountChoices" >> beam.ParDo(CountChoicesDoFn(), targets=leaves)
        )
        always = pipeline | "NoCounts" >> beam.Create([None]).with_output_types(Optional[np.ndarray])
        return (
            (counts, always)
            | "AllCounts" >> beam.Flatten().with_output_types(Optional[np.ndarray])
            | "ReleaseEstimates" >> beam.CombineGlobally(
                _ReleaseCombineFn(self._keys, self._epsilon), leaves).without_defaults()
        )
