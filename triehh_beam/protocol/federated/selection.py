"""Which enrolled devices a federated round selects, and what each is sent (docs/protocol.md §1,
"Federated rounds"): ``select_round`` draws exactly the central job's sample under the same keys
(bottom-m ranks for TrieHH, the Bernoulli sample for TrieHH++), and each selected device gets a
16-byte token, a keyed hash of its id that only the server can compute, and its choice word, so
its vote is the central vote. One hash call per round covers the whole registry."""

from __future__ import annotations

import dataclasses
from typing import Iterable, List, Optional, Sequence

import numpy as np

from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.sampling import (Sampler, SmallestRanks, bernoulli_threshold,
                                                      in_bernoulli_sample, user_id_bytes)

__all__ = ["TOKEN_BYTES", "Registry", "RoundSelection", "keyed_tokens", "round_tokens", "select_round"]

TOKEN_BYTES = 16


@dataclasses.dataclass(frozen=True)
class Registry:
    """The enrolled devices: distinct canonical ids (``sampling.user_id_bytes``), in byte order.

    ``n``, the population a federated job plans for, is ``len(registry)``.
    """

    ids: Sequence[bytes]
    data: np.ndarray = dataclasses.field(repr=False)
    offsets: np.ndarray = dataclasses.field(repr=False)

    @classmethod
    def from_ids(cls, ids: Iterable) -> "Registry":
        """The registry of ``ids`` (str, int or bytes; duplicates count once).

        Raises:
          ValueError: an empty id; TypeError: an id of another type.
        """
        distinct = sorted({user_id_bytes(i) for i in ids})
        data, offsets = keyed_hash.pack_messages(distinct)
        return cls(tuple(distinct), data, offsets)

    def __len__(self) -> int:
        return len(self.ids)


@dataclasses.dataclass(frozen=True)
class RoundSelection:
    """Round ``round_index``'s selected devices (in byte order of their ids) and what each is
    sent: ``tokens[i]`` and ``choice_words[i]`` belong to ``device_ids[i]``."""

    round_index: int
    device_ids: List[bytes]
    tokens: List[bytes] = dataclasses.field(repr=False)
    choice_words: np.ndarray = dataclasses.field(repr=False)

    def __len__(self) -> int:
        return len(self.device_ids)

    def token_set(self) -> frozenset:
        return frozenset(self.tokens)


def round_tokens(sampler: Sampler, round_index: int, data: np.ndarray, offsets: np.ndarray) -> List[bytes]:
    """The 16-byte tokens of round ``round_index`` of ids given as packed buffers."""
    if round_index < 1:
        raise ValueError(f"rounds are numbered from 1, got {round_index}")
    return keyed_tokens(sampler, f"federated-token/round={int(round_index)}", data, offsets)


def keyed_tokens(sampler: Sampler, label: str, data: np.ndarray, offsets: np.ndarray) -> List[bytes]:
    """The 16-byte tokens of ids given as packed buffers under the keys of purposes
    ``label/0`` and ``label/1`` (a round's, or the estimate round's)."""
    halves = []
    for half in (0, 1):
        purpose = f"{label}/{half}".encode("ascii")
        key = keyed_hash.derive_key(sampler.seed, purpose, sampler.identity)
        halves.append(keyed_hash.siphash24_batch(key, data, offsets).astype("<u8"))
    joined = np.empty((len(halves[0]), 2), dtype="<u8")
    joined[:, 0], joined[:, 1] = halves
    raw = joined.tobytes()
    return [raw[i:i + TOKEN_BYTES] for i in range(0, len(raw), TOKEN_BYTES)]


def select_round(
    sampler: Sampler,
    registry: Registry,
    round_index: int,
    batch_size: Optional[int] = None,
    probability: Optional[float] = None,
) -> RoundSelection:
    """Round ``round_index``'s selection: the bottom-``batch_size`` ranks (TrieHH), or the
    Bernoulli sample of ``probability`` (TrieHH++); exactly one of the two.

    The selected devices are those ``Sampler.sample`` (or ``Sampler.bernoulli_sample``) draws
    from the same ids: the central job's sample of the same users.
    """
    if (batch_size is None) == (probability is None):
        raise ValueError("give a batch size (TrieHH) or a sampling probability (TrieHH++), not both")
    keys = sampler.round_keys(round_index)
    ranks = keys.ranks_packed(registry.data, registry.offsets)
    if probability is not None:
        chosen = np.flatnonzero(in_bernoulli_sample(ranks, bernoulli_threshold(probability)))
    else:
        if batch_size < 0:
            raise ValueError(f"batch size must be >= 0, got {batch_size}")
        smallest = SmallestRanks(batch_size)
        smallest.add_batch(ranks, registry.ids)
        picked = [uid for _, uid in smallest.extract()]
        # registry.ids is sorted: each picked id's position by binary search.
        chosen = np.sort(np.searchsorted(_as_object_array(registry.ids), _as_object_array(picked)))
    chosen = np.asarray(chosen, dtype=np.int64)
    data, offsets = keyed_hash.pack_messages(registry.ids[i] for i in chosen)
    return RoundSelection(
        round_index=int(round_index),
        device_ids=[registry.ids[i] for i in chosen],
        tokens=round_tokens(sampler, round_index, data, offsets),
        choice_words=keys.choice_words_packed(data, offsets),
    )


def _as_object_array(ids: Sequence[bytes]) -> np.ndarray:
    array = np.empty(len(ids), dtype=object)
    array[:] = list(ids)
    return array
