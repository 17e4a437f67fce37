"""The census of a discovery, ``TakeCensus``: in one read of the records, the distinct users n
(keyed fingerprints, sharded) and the users who hold no usable item under the job's encoding
(every item too long for L, or not encodable), counted by their shortest length, so the driver
can say what a larger L or unit size would make usable. Such users are sampled but cannot vote.
With a spill location (``spill_prefix``), each worker writes its fingerprints to files there,
split into ``GROUPS`` groups by their top bits, before its buffer would pass ``spill_budget`` of
them or when its bundle ends; only the files' paths cross the shuffle, and each group's files are
merged k ways in steps of at most the budget (``beam.census_spill``), so a worker holds at most
the budget's fingerprints at any n (on Beam's in-process runner a shuffle holds everything it
carries in memory). Without one, the
fingerprints are combined in memory (``CombinePerKey``), all n of them (8 bytes each) held
several times over."""

from __future__ import annotations

import unicodedata
import uuid
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.utils.windowed_value import WindowedValue

from triehh_beam.beam.census_spill import merge_steps, write_spill
from triehh_beam.beam.held import HeldRows
from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.io.normalise import binary_buffers
from triehh_beam.protocol.distinct import distinct, distinct_counts
from triehh_beam.protocol.items.encoding import EncodingError, ItemEncoder, ItemKind
from triehh_beam.protocol.randomness import sampling

__all__ = ["Census", "GROUPS", "NEVER", "SPILL_BUDGET", "TakeCensus", "item_lengths"]

# The length of an item no length setting makes usable (it cannot be encoded at all).
NEVER = np.iinfo(np.int64).max
_CACHE_LIMIT = 1 << 17  # distinct items a worker remembers the length of
# Per shard: (users with a usable record, users with an unusable one, the shortest length of
# such a record per user), fingerprints sorted and distinct.
_ShardPart = Tuple[np.ndarray, np.ndarray, np.ndarray]
# A spilled census's groups: a fingerprint's group is its top 4 bits.
GROUPS = 16
_GROUP_SHIFT = np.uint64(60)
# The fingerprints (usable and unusable) a worker buffers before it writes them (32 MiB).
SPILL_BUDGET = 1 << 22


class Census(NamedTuple):
    """What the census counted (private operator data, like every count).

    Attributes:
      users: distinct users n (every user with a record of positive count).
      usable_users: those with at least one usable item under the job's encoding.
      unusable_lengths: the users with none, by the length in base units (characters, bytes or
        bits) of their shortest item; ``NEVER`` for users none of whose items can be encoded.
    """

    users: int
    usable_users: int
    unusable_lengths: Dict[int, int]

    @property
    def unusable_users(self) -> int:
        return self.users - self.usable_users


def _length_of(encoder: ItemEncoder, item) -> int:
    """One item's length in base units after normalisation, or NEVER (cannot be encoded)."""
    try:
        value = encoder.normalize(item)
        if encoder.kind is ItemKind.INT:
            return encoder.int_bits
        return len(value) if len(value) else NEVER
    except EncodingError:
        return NEVER


def item_lengths(encoder: ItemEncoder, value) -> List[int]:
    """The lengths (base units, ``NEVER`` for one that cannot be encoded) of the items a record's
    value holds (its tokens with ``tokenize``); ``[NEVER]`` for a value that holds none."""
    try:
        parts = encoder.items_of(value)
    except EncodingError:
        parts = []
    return [_length_of(encoder, item) for item in parts] or [NEVER]


class _Classified(NamedTuple):
    """Per record of a batch: its shortest item length, and its too-long / unencodable items."""

    shortest: np.ndarray  # int64, NEVER: no item can be encoded
    usable: np.ndarray  # bool
    too_long: int
    unencodable: int


class _Classifier:
    """Classifies a batch's items for one encoding and long-item policy (one per worker)."""

    def __init__(self, encoder: ItemEncoder, truncate: bool):
        self._encoder = encoder
        self._truncate = truncate
        self._limit = encoder.max_item_units * encoder.unit_size  # longest item, base units
        self._cache: Dict = {}  # item -> (shortest, usable, too long, unencodable)

    def _distinct(self, value) -> Tuple[int, bool, int, int]:
        known = self._cache.get(value)
        if known is None:
            lengths = item_lengths(self._encoder, value)
            encodable = [length for length in lengths if length != NEVER]
            too_long = sum(1 for length in encodable if length > self._limit)
            usable = bool(encodable) if self._truncate else too_long < len(encodable)
            known = (min(lengths), usable, too_long, len(lengths) - len(encodable))
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[value] = known
        return known

    def _python(self, items: pa.Array) -> _Classified:
        """Python once per distinct value (tokenised text, non-ASCII text)."""
        encoded = pc.dictionary_encode(items)
        codes = np.asarray(encoded.indices, dtype=np.int64)
        per_value = [self._distinct(v) for v in encoded.dictionary.to_pylist()]
        shortest = np.array([v[0] for v in per_value], dtype=np.int64)
        usable = np.array([v[1] for v in per_value], dtype=bool)
        too_long = np.array([v[2] for v in per_value], dtype=np.int64)
        unencodable = np.array([v[3] for v in per_value], dtype=np.int64)
        records = np.bincount(codes, minlength=len(per_value))
        return _Classified(shortest[codes], usable[codes], int(too_long @ records), int(unencodable @ records))

    def _other_text(self, items: pa.Array) -> np.ndarray:
        """Lengths of non-ASCII text items. Without case folding, text already in NFC (Python's
        quick check, a fraction of a microsecond an item) is its own normal form: its length
        is its number of characters; only the rest goes through the encoder."""
        if self._encoder.case_fold:  # folding can lengthen ("ß" -> "ss"): the encoder decides
            return self._python(items).shortest
        lengths = np.asarray(pc.utf8_length(items), dtype=np.int64)
        values = items.to_pylist()
        for j in np.flatnonzero([not unicodedata.is_normalized("NFC", value) for value in values]):
            lengths[j] = self._distinct(values[j])[0]
        return lengths

    def classify(self, items: pa.Array) -> _Classified:
        encoder = self._encoder
        n = len(items)
        if encoder.tokenize:
            return self._python(items)
        if encoder.kind is ItemKind.INT:
            # The reader refused values outside the range: every item has int_bits bits.
            shortest = np.full(n, encoder.int_bits, dtype=np.int64)
        elif encoder.kind is ItemKind.BYTES:
            shortest = np.asarray(pc.binary_length(items), dtype=np.int64)
        else:
            # ASCII text is its own NFC form and case folds to the same length: its length is
            # its byte length. Other text goes through the encoder, once per distinct value.
            shortest = np.asarray(pc.binary_length(items), dtype=np.int64)
            ascii_rows = np.asarray(pc.string_is_ascii(items), dtype=bool)
            if not ascii_rows.all():
                other = np.flatnonzero(~ascii_rows)
                shortest = shortest.copy()
                shortest[other] = self._other_text(items.take(pa.array(other)))
        shortest = np.where(shortest == 0, NEVER, shortest)
        encodable = shortest != NEVER
        fits = shortest <= self._limit
        usable = encodable if self._truncate else fits
        return _Classified(shortest, usable, int((encodable & ~fits).sum()), int((~encodable).sum()))


def _shortest_per_user(fingerprints: np.ndarray, lengths: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Distinct fingerprints (sorted) with the shortest length each was seen with."""
    if len(fingerprints) == 0:
        return fingerprints, lengths
    order = np.lexsort((lengths, fingerprints))
    fingerprints, lengths = fingerprints[order], lengths[order]
    first = np.ones(len(fingerprints), dtype=bool)
    first[1:] = fingerprints[1:] != fingerprints[:-1]
    return fingerprints[first], lengths[first]


def _merged(parts: List[_ShardPart]) -> _ShardPart:
    """Parts -> one: the distinct users with a usable record, and the distinct users with an
    unusable one with the shortest length of such a record (a user may be in both)."""
    if not parts:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.int64)
    usable = distinct(np.concatenate([p[0] for p in parts]))
    unusable, lengths = _shortest_per_user(np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]))
    return usable, unusable, lengths


def _census_of(usable: np.ndarray, fingerprints: np.ndarray, lengths: np.ndarray) -> Census:
    """The census of distinct users with a usable record (``usable``, sorted) and distinct users
    with an unusable one (``fingerprints``, sorted, with the shortest length of such a record):
    a user usable anywhere is usable."""
    if len(usable) and len(fingerprints):
        position = np.minimum(np.searchsorted(usable, fingerprints), len(usable) - 1)
        only = usable[position] != fingerprints
        fingerprints, lengths = fingerprints[only], lengths[only]
    values, users = distinct_counts(lengths)
    return Census(int(len(usable) + len(fingerprints)), int(len(usable)),
                  {int(v): int(u) for v, u in zip(values, users)})


def _bounds(fingerprints: np.ndarray, shift: np.uint64, parts: int) -> np.ndarray:
    """Where each of ``parts`` runs of sorted ``fingerprints`` (by their bits above ``shift``) starts."""
    return np.searchsorted((fingerprints >> shift).astype(np.int64), np.arange(parts + 1))


def _shard_bounds(fingerprints: np.ndarray) -> np.ndarray:
    return _bounds(fingerprints, np.uint64(56), 256)


def _split(part: _ShardPart, bounds_of) -> Iterator[Tuple[int, _ShardPart]]:
    """A sorted part -> (index, its slice) per non-empty run of ``bounds_of``."""
    usable, unusable, lengths = part
    usable_bounds, unusable_bounds = bounds_of(usable), bounds_of(unusable)
    for index in np.flatnonzero((usable_bounds[1:] > usable_bounds[:-1]) | (unusable_bounds[1:] > unusable_bounds[:-1])):
        a, b = usable_bounds[index], usable_bounds[index + 1]
        c, d = unusable_bounds[index], unusable_bounds[index + 1]
        yield int(index), (usable[a:b], unusable[c:d], lengths[c:d])


class _CensusPartsDoFn(beam.DoFn):
    """Classifies and fingerprints record batches (``_parts``); subclasses say what to emit."""

    def __init__(self, census_key: sampling.CensusKey, encoder: ItemEncoder, truncate: bool):
        self._census_key = census_key  # the census key only, never the seed
        self._encoder = encoder
        self._truncate = truncate

    def setup(self):
        self._records_read = Metrics.counter(METRICS_NAMESPACE, "census_records_read")
        self._too_long = Metrics.counter(METRICS_NAMESPACE, "items_too_long")
        self._unencodable = Metrics.counter(METRICS_NAMESPACE, "items_unencodable")
        self._classifier = _Classifier(self._encoder, self._truncate)

    def _parts(self, batch) -> Optional[_ShardPart]:
        """A batch -> (users with a usable record, users with an unusable one and the shortest
        length of such a record), fingerprints sorted and distinct; None for an empty batch."""
        if batch.num_rows == 0:
            return None
        self._records_read.inc(batch.num_rows)
        fingerprints = self._census_key.fingerprints_packed(*binary_buffers(batch.column("user_id")))
        classified = self._classifier.classify(batch.column("item"))
        if classified.too_long:
            self._too_long.inc(classified.too_long)
        if classified.unencodable:
            self._unencodable.inc(classified.unencodable)
        if classified.usable.all():  # the usual case: nothing more to sort
            return distinct(fingerprints), np.zeros(0, np.uint64), np.zeros(0, np.int64)
        unusable, lengths = _shortest_per_user(fingerprints[~classified.usable], classified.shortest[~classified.usable])
        return distinct(fingerprints[classified.usable]), unusable, lengths


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(Tuple[int, _ShardPart])
class _CensusBatchDoFn(_CensusPartsDoFn):
    """A batch -> per shard of 256, (users with a usable record, users with an unusable one and
    the shortest length of such a record), fingerprints sorted and distinct."""

    def process(self, batch):
        part = self._parts(batch)
        if part is not None:
            yield from _split(part, _shard_bounds)


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(Tuple[int, str])
class _SpillCensusDoFn(_CensusPartsDoFn):
    """Batches -> ``(group, path)`` of spill files under ``prefix``: a bundle's parts are
    buffered, and written before the buffer would pass ``budget`` fingerprints or when the bundle ends, one file
    per non-empty group (its users distinct and sorted), named uniquely. A failed bundle's
    files are never emitted, so never read."""

    def __init__(self, census_key: sampling.CensusKey, encoder: ItemEncoder, truncate: bool, prefix: str,
                 budget: int):
        super().__init__(census_key, encoder, truncate)
        self._prefix = prefix
        self._budget = budget

    def setup(self):
        super().setup()
        self._held = HeldRows("census_spill")

    def start_bundle(self):
        self._buffers: Dict[Any, Tuple[List[_ShardPart], List[int]]] = {}  # per window: parts, [fingerprints]

    def process(self, batch, window=beam.DoFn.WindowParam):
        part = self._parts(batch)
        if part is None:
            return
        buffer, buffered = self._buffers.setdefault(window, ([], [0]))
        size = len(part[0]) + len(part[1])
        if buffered[0] and buffered[0] + size > self._budget:
            yield from self._spill(buffer, buffered)
        buffer.append(part)
        buffered[0] += size
        self._held.held(sum(b[1][0] for b in self._buffers.values()))

    def finish_bundle(self):
        # Each window's files in that window (a bundle may hold several windows' batches).
        for window, (buffer, buffered) in self._buffers.items():
            for group_path in self._spill(buffer, buffered):
                yield WindowedValue(group_path, window.max_timestamp(), [window])
        self._buffers = {}

    def _spill(self, buffer: List[_ShardPart], buffered: List[int]) -> Iterator[Tuple[int, str]]:
        """Writes and empties one window's buffer."""
        if not buffer:
            return
        merged = _merged(buffer)
        buffer.clear()
        buffered[0] = 0
        for group, part in _split(merged, lambda f: _bounds(f, _GROUP_SHIFT, GROUPS)):
            path = FileSystems.join(self._prefix, f"census-{group:02d}-{uuid.uuid4().hex}.bin")
            write_spill(path, part)
            yield group, path


def _merge_group(paths: List[str], budget: int, held=None) -> Census:
    """One group's spill files -> its census, from ``census_spill.merge_steps``' steps (a user
    is in one step only, so the steps' censuses add up)."""
    total = _census_of(*_merged([]))
    for parts in merge_steps(paths, budget, held):
        total = _add([total, _census_of(*_merged(parts))])
    return total


@beam.typehints.with_input_types(Tuple[int, Iterable[str]])
@beam.typehints.with_output_types(Census)
class _MergeGroupDoFn(beam.DoFn):
    """``(group, its spill files)`` -> the group's ``Census`` (``_merge_group``)."""

    def __init__(self, budget: int):
        self._budget = budget

    def setup(self):
        self._held = HeldRows("census_merge")

    def process(self, group_paths):
        yield _merge_group(list(group_paths[1]), self._budget, self._held)


@beam.typehints.with_input_types(_ShardPart)
@beam.typehints.with_output_types(Census)
class _ShardCensusCombineFn(beam.CombineFn):
    """One shard's parts -> its ``Census``. The accumulator is (usable fingerprint arrays,
    unusable (fingerprint, length) arrays, [fingerprints buffered since the last compaction]),
    compacted when the buffered total doubles, as ``transforms.UnionSizeCombineFn``: amortised
    O(n log n) per shard."""

    def create_accumulator(self):
        return [np.zeros(0, np.uint64)], [(np.zeros(0, np.uint64), np.zeros(0, np.int64))], [0]

    @staticmethod
    def _compacted(usable: List[np.ndarray], unusable: List[Tuple[np.ndarray, np.ndarray]]):
        fingerprints = np.concatenate([f for f, _ in unusable])
        lengths = np.concatenate([n for _, n in unusable])
        return [distinct(np.concatenate(usable))], [_shortest_per_user(fingerprints, lengths)], [0]

    def add_input(self, accumulator, part):
        usable, unusable, buffered = accumulator
        usable.append(part[0])
        if len(part[1]):
            unusable.append((part[1], part[2]))
        buffered[0] += len(part[0]) + len(part[1])
        if buffered[0] > max(len(usable[0]) + len(unusable[0][0]), 1 << 16):
            return self._compacted(usable, unusable)
        return accumulator

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        return self._compacted([a for usable, _, _ in accumulators for a in usable],
                               [p for _, unusable, _ in accumulators for p in unusable])

    def extract_output(self, accumulator):
        (usable,), ((fingerprints, lengths),), _ = self._compacted(*accumulator[:2])
        return _census_of(usable, fingerprints, lengths)


def _add(censuses: Iterable[Census]) -> Census:
    users = usable = 0
    lengths: Dict[int, int] = {}
    for census in censuses:
        users += census.users
        usable += census.usable_users
        for length, n in census.unusable_lengths.items():
            lengths[length] = lengths.get(length, 0) + n
    return Census(users, usable, dict(sorted(lengths.items())))


class TakeCensus(beam.PTransform):
    """Record batches -> one ``Census``: the distinct users and those without a usable item.

    A fingerprint collision (odds about n^2 / 2^65) can only make n smaller than the truth, which
    makes the privacy plan conservative, never optimistic; n is exactly what
    ``transforms.CountDistinctUsers`` counts.

    Args:
      sampler: the job's ``Sampler`` (only its census key enters the graph).
      encoder: the job's item encoder.
      truncate: too-long items are cut (usable) rather than dropped.
      spill_prefix: a directory (local or ``gs://``, private: fingerprints are keyed pseudonyms
        of users) where workers write their fingerprints (see the module); the caller deletes it
        once the job has ended. None: combined in memory, every fingerprint held at once (a
        reference for tests and small inputs; every job the product runs spills).
      spill_budget: the fingerprints a worker buffers before writing them.
    """

    def __init__(self, sampler: sampling.Sampler, encoder: ItemEncoder, truncate: bool = False,
                 spill_prefix: Optional[str] = None, spill_budget: int = SPILL_BUDGET):
        super().__init__()
        self._census_key = sampler.census_key()
        self._encoder = encoder
        self._truncate = truncate
        self._spill_prefix = spill_prefix
        self._spill_budget = spill_budget

    def expand(self, batches):
        if self._spill_prefix is None:
            per_part = (
                batches
                | "ClassifyAndFingerprint" >> beam.ParDo(_CensusBatchDoFn(self._census_key, self._encoder, self._truncate))
                | "CensusPerShard" >> beam.CombinePerKey(_ShardCensusCombineFn())
                | "ShardCensuses" >> beam.Values()
            )
        else:
            spill = _SpillCensusDoFn(self._census_key, self._encoder, self._truncate, self._spill_prefix,
                                     self._spill_budget)
            per_part = (
                batches
                | "FingerprintAndSpill" >> beam.ParDo(spill)
                | "SpillFilesPerGroup" >> beam.GroupByKey()
                | "GroupCensuses" >> beam.ParDo(_MergeGroupDoFn(self._spill_budget))
            )
        return per_part | "Total" >> beam.CombineGlobally(_add).with_output_types(Census)
