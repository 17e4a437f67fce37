"""Building a round's sample tables (``beam.samples.samples``) from the records the sampling pass kept for
one (round, shard): one row per sampled user, items encoded once per distinct item (and cached
per worker), counts summed per (user, sequence), the item-choice uniforms computed in one call per
table; counters ``round{r}.items_too_long`` and ``round{r}.items_unencodable`` count records.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.samples import samples
from triehh_beam.io.normalise import binary_buffers
from triehh_beam.protocol.items import user_items
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind, Units
from triehh_beam.protocol.randomness import sampling
from triehh_beam.protocol.rounds import columnar

__all__ = ["SampleTableBuilder", "encode_distinct", "first_of_each_user", "round_counter"]

_CACHE_LIMIT = 1 << 17  # distinct items (and sequences) a worker remembers the encoding of


def round_counter(round_index: int, name: str):
    """The counter ``round{r}.{name}`` in the ``triehh`` namespace (a driver splits by round)."""
    return Metrics.counter(METRICS_NAMESPACE, f"round{round_index}.{name}")


def encode_distinct(
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


def first_of_each_user(keys: np.ndarray, user_ids: pa.Array) -> np.ndarray:
    """Rows sorted by (key, user id) -> whether each is its user's first (a key shared by two
    users, a 2^-64 event, is still told apart by the id)."""
    n = len(keys)
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = (keys[1:] != keys[:-1]) | ~np.asarray(pc.equal(user_ids.slice(1), user_ids.slice(0, n - 1)), dtype=bool)
    return first


class SampleTableBuilder:
    """The kept rows of one (round, shard) -> its sample table, one row per sampled user.

    One builder per DoFn instance (create it in ``setup``): it caches item encodings and stored
    sequence bytes across the tables it builds.
    """

    def __init__(self, encoder: ItemEncoder, truncate: bool):
        self._encoder = encoder
        self._truncate = truncate
        self._encoded: Dict = {}  # item -> its encoding, shared by every round and shard
        self._stored: Dict[Units, bytes] = {}  # sequence -> its stored bytes

    def _stored_bytes(self, sequence: Units) -> bytes:
        stored = self._stored.get(sequence)
        if stored is None:
            if len(self._stored) >= _CACHE_LIMIT:
                self._stored.clear()
            stored = self._stored[sequence] = samples.sequence_to_bytes(sequence)
        return stored

    def build(self, round_keys: sampling.RoundKeys, shard: int, batches: Iterable[pa.RecordBatch]) -> pa.Table:
        """The sample table of round ``round_keys.round_index``'s shard ``shard`` from its kept
        rows (columns user_id, item, count, rank), the choice uniforms under ``round_keys``."""
        round_index = round_keys.round_index
        table = pa.Table.from_batches(list(batches)).combine_chunks()
        # Rows by (rank, user): a user's rows are adjacent, and users come in rank order.
        table = table.take(pc.sort_indices(table, sort_keys=[("rank", "ascending"), ("user_id", "ascending")]))
        n = table.num_rows
        user_ids = table.column("user_id").combine_chunks().cast(pa.binary())
        firsts = np.flatnonzero(first_of_each_user(np.asarray(table.column("rank")), user_ids))
        user_offsets = np.append(firsts, n).astype(np.int64)

        encoded = pc.dictionary_encode(table.column("item").combine_chunks())
        item_codes = np.asarray(encoded.indices, dtype=np.int64)
        item_sequences, too_long, unencodable = encode_distinct(
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
        users = columnar.sequence_table(list(index), expanded_offsets, codes, counts)

        sampled_ids = user_ids.take(pa.array(firsts))
        uniforms = round_keys.choice_uniforms_packed(*binary_buffers(sampled_ids))
        stored = pa.array([self._stored_bytes(s) for s in users.sequences], pa.binary())
        text_units = self._encoder.kind is ItemKind.TEXT
        return samples.sample_table(
            uniforms, users.offsets, stored.take(pa.array(users.codes)), users.counts, text_units, round_index, shard
        )
