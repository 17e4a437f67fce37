"""Frequency estimates for a discovered trie (``--estimate-frequencies``, docs/protocol.md §5): each
user contributes one unit to one of the trie's leaves, drawn by its local frequency with a keyed
uniform, and each leaf's count gets two-sided geometric noise once (``release``), with keys
derived from the seed and job identity so a retry or resume releases the same numbers. Exact
counts exist only between ``count_choices`` and ``release``; a ``FrequencyEstimates`` holds none."""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np

from triehh_beam.protocol.estimates import count_intervals
from triehh_beam.protocol.items.encoding import Units, is_terminated
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.discrete_laplace import KeyedBits, TwoSidedGeometric
from triehh_beam.protocol.randomness.sampling import UserId, user_id_bytes
from triehh_beam.protocol.rounds import columnar
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.protocol.rounds.vote import choose_sequence

__all__ = [
    "LEVEL",
    "EstimateKeys",
    "EstimateTargets",
    "FrequencyEstimates",
    "count_choices",
    "reference_estimates",
    "release",
    "target_label",
    "user_choice",
]

#: The confidence level of the published intervals.
LEVEL = count_intervals.LEVEL
_CHOICE_PURPOSE = b"estimate/choose/v1"
_NOISE_PURPOSE = b"estimate/noise/v1"


@dataclasses.dataclass(frozen=True)
class EstimateKeys:
    """The keys of a job's estimate step, derived from its secret seed and identity (what the
    estimate job's graph carries; never the seed).

    ``choice_key``: SipHash-2-4 key of the user id; the top 53 bits of the hash are the user's
    uniform (its choice), the low 11 bits route its records to a shard (``shard_of``).
    ``noise_key``: the ``KeyedBits`` key of every target's noise.
    """

    choice_key: Tuple[int, int] = dataclasses.field(repr=False)
    noise_key: Tuple[int, int] = dataclasses.field(repr=False)

    @classmethod
    def derive(cls, seed: bytes, identity: bytes = b"") -> "EstimateKeys":
        """The keys of the job with secret ``seed`` and identity ``identity`` (a ``Sampler``'s).

        Raises:
          ValueError: a seed shorter than 16 or longer than 64 bytes.
        """
        return cls(keyed_hash.derive_key(seed, _CHOICE_PURPOSE, identity),
                   keyed_hash.derive_key(seed, _NOISE_PURPOSE, identity))

    def user_hashes_packed(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The users' keyed hashes (uint64), ids given as Arrow-style buffers of canonical bytes."""
        return keyed_hash.siphash24_batch(self.choice_key, data, offsets)

    def choice_words_packed(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The users' 64-bit choice words (uint64): their keyed hashes, whose
        ``sampling.uniform_from_word`` is exactly ``uniforms``' value for them (what a
        federated device is sent in the estimate round's invitation)."""
        return self.user_hashes_packed(data, offsets)

    @staticmethod
    def uniforms(hashes: np.ndarray) -> np.ndarray:
        """The users' choice uniforms in [0, 1) from their hashes: the top 53 bits, exact doubles
        (``sampling.uniform_from_word`` of each hash as a word, bit for bit)."""
        return (np.asarray(hashes, dtype=np.uint64) >> np.uint64(11)).astype(np.float64) * 2.0**-53

    @staticmethod
    def shard_of(hashes: np.ndarray, shards: int) -> np.ndarray:
        """A shard in [0, shards) per hash, from the low 11 bits (disjoint from the uniform's)."""
        return (np.asarray(hashes, dtype=np.uint64) & np.uint64(0x7FF)).astype(np.int64) % int(shards)

    def choice_uniforms(self, user_ids: Iterable[UserId]) -> np.ndarray:
        """The uniforms of users given as ids (the per-user reference path)."""
        data, offsets = keyed_hash.pack_messages(user_id_bytes(u) for u in user_ids)
        return self.uniforms(self.user_hashes_packed(data, offsets))

    def noise_bits(self, target: Units) -> KeyedBits:
        """The bit stream of ``target``'s noise."""
        return KeyedBits(self.noise_key, target_label(target))


def target_label(target: Units) -> bytes:
    """A target's canonical bytes (each unit's length, 8 bytes, then its UTF-8 or raw bytes):
    what keys its noise, the same on every machine."""
    parts = []
    for unit in target:
        raw = unit.encode("utf-8") if isinstance(unit, str) else bytes(unit)
        parts.append(len(raw).to_bytes(8, "big") + raw)
    return b"".join(parts)


@dataclasses.dataclass(frozen=True)
class EstimateTargets:
    """The discovered leaves an estimate step counts, sorted canonically (the order ``sorted()``
    gives ``Units`` tuples, which is ``choose_sequence``'s and ``columnar``'s).

    Raises:
      ValueError: a repeated or empty target, or one that is a prefix of another (a sequence
        would then start with two).
    """

    sequences: Tuple[Units, ...]

    def __post_init__(self):
        ordered = tuple(sorted(tuple(s) for s in self.sequences))
        object.__setattr__(self, "sequences", ordered)
        if any(not s for s in ordered):
            raise ValueError("a target is empty (the root is never a leaf of a released trie)")
        # Sorted, a prefix sits just before the sequences it starts: neighbours suffice.
        for a, b in zip(ordered, ordered[1:]):
            if b[: len(a)] == a:
                raise ValueError(f"target {a!r} is a prefix of {b!r} (or repeats it)")
        object.__setattr__(self, "_index", {s: i for i, s in enumerate(ordered)})
        object.__setattr__(self, "_lengths", tuple(sorted({len(s) for s in ordered})))

    @classmethod
    def from_trie(cls, trie: Trie) -> "EstimateTargets":
        """The trie's heavy hitters and frequent prefixes (its leaves)."""
        return cls(tuple(trie.heavy_hitter_sequences()) + tuple(trie.frequent_prefix_sequences()))

    def __len__(self) -> int:
        return len(self.sequences)

    def index_of(self, sequence: Units) -> int:
        """The position of the target ``sequence`` starts with, or -1."""
        for length in self._lengths:  # type: ignore[attr-defined]
            if length > len(sequence):
                break
            found = self._index.get(tuple(sequence[:length]))  # type: ignore[attr-defined]
            if found is not None:
                return found
        return -1

    def is_item(self, i: int) -> bool:
        """Whether target ``i`` is a heavy hitter (a terminated sequence), not a prefix."""
        return is_terminated(self.sequences[i])


def _target_weights(weighted: Iterable[Tuple[Units, int]], targets: EstimateTargets) -> Dict[Units, int]:
    weights: Dict[Units, int] = {}
    for sequence, count in weighted:
        i = targets.index_of(sequence)
        if i >= 0 and count:
            weights[targets.sequences[i]] = weights.get(targets.sequences[i], 0) + int(count)
    return weights


def user_choice(weighted: Iterable[Tuple[Units, int]], targets: EstimateTargets, u: float) -> Optional[int]:
    """The target one user contributes to (its position), or None: the per-user reference.

    Args:
      weighted: the user's encoded sequences with their local counts.
      targets: the discovered leaves.
      u: the user's uniform (``EstimateKeys.choice_uniforms``).
    """
    chosen = choose_sequence(_target_weights(weighted, targets), u)
    return None if chosen is None else targets.index_of(chosen)


def count_choices(targets: EstimateTargets, offsets: np.ndarray, codes: np.ndarray, counts: np.ndarray,
                  uniforms: np.ndarray) -> np.ndarray:
    """Exact counts (private) of a batch of users, per target: the columnar ``user_choice``.

    Args:
      targets: the discovered leaves.
      offsets: per-user row offsets (CSR, ``users + 1`` entries from 0).
      codes: per row, the target (position) its sequence starts with.
      counts: per row, the local count (repeated (user, target) rows are summed).
      uniforms: per user, its uniform.

    Returns:
      int64 counts, one per target: how many of the batch's users chose it. Private: merge them
      by addition and let only ``release`` out.
    """
    table = columnar.sequence_table(targets.sequences, offsets, codes, counts)
    chosen = columnar.choose_codes(table, uniforms)
    return np.bincount(chosen[chosen >= 0], minlength=len(targets)).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class FrequencyEstimates:
    """The released (noisy) estimates: publishable, no exact count in them.

    Attributes:
      targets: the discovered leaves, in canonical order.
      estimates: per target, its exact count plus two-sided geometric noise (an integer, may be
        negative: clamping at 0 would be post-processing, and biased).
      epsilon: epsilon_est, what the estimates spend.
      half_width: k, the noise's alone: ``[estimates[i] - k, estimates[i] + k]`` holds target
        ``i``'s exact count (this release's draws) with probability ``coverage``.
    """

    targets: EstimateTargets
    estimates: Tuple[int, ...]
    epsilon: float
    half_width: int

    def __post_init__(self):
        if len(self.estimates) != len(self.targets):
            raise ValueError(f"{len(self.estimates)} estimates for {len(self.targets)} targets")

    @property
    def level(self) -> float:
        return LEVEL

    @property
    def coverage(self) -> float:
        """The exact probability that a noise interval holds its exact count (at least ``LEVEL``)."""
        return TwoSidedGeometric(self.epsilon).coverage(self.half_width)

    def intervals(self) -> Tuple[Tuple[int, int], ...]:
        """Per target, the published 95% interval: it holds the weighted users ``f_x`` with
        probability at least ``LEVEL``, the users' draws and the noise both counted
        (``count_intervals.noisy_count_intervals``)."""
        return tuple(count_intervals.noisy_count_intervals(self.estimates, self.epsilon, LEVEL))

    def interval(self, i: int) -> Tuple[int, int]:
        """Target ``i``'s published 95% interval (``intervals``)."""
        return self.intervals()[i]

    def noise_interval(self, i: int) -> Tuple[int, int]:
        """``[estimate - k, estimate + k]``: holds target ``i``'s exact count (not ``f_x``, unless
        each user holds one discovered item) with probability ``coverage``."""
        return self.estimates[i] - self.half_width, self.estimates[i] + self.half_width

    def by_target(self) -> Dict[Units, int]:
        return dict(zip(self.targets.sequences, self.estimates))


def release(exact_counts: Sequence[int], targets: EstimateTargets, epsilon: float,
            keys: EstimateKeys) -> FrequencyEstimates:
    """Adds each target's keyed noise to its exact count, once: the one way out of the counts.

    Raises:
      ValueError: counts not one per target, a negative count, or a bad epsilon.
    """
    exact = [int(c) for c in exact_counts]
    if len(exact) != len(targets):
        raise ValueError(f"{len(exact)} counts for {len(targets)} targets")
    if any(c < 0 for c in exact):
        raise ValueError("counts are non-negative")
    noise = TwoSidedGeometric(epsilon)
    estimates = tuple(c + noise.sample(keys.noise_bits(t)) for c, t in zip(exact, targets.sequences))
    return FrequencyEstimates(targets, estimates, float(epsilon), noise.half_width(LEVEL))


def reference_estimates(users: Mapping[UserId, Iterable[Tuple[Units, int]]], targets: EstimateTargets,
                        epsilon: float, keys: EstimateKeys) -> FrequencyEstimates:
    """The estimates of a population given per user (id -> encoded sequences with local counts),
    one ``user_choice`` per user: the oracle of the columnar and Beam paths.

    Ids that ``sampling.user_id_bytes`` maps to the same bytes are one user (their records are
    merged).
    """
    merged: Dict[bytes, Dict[Units, int]] = {}
    for user, weighted in users.items():
        own = merged.setdefault(user_id_bytes(user), {})
        for sequence, count in weighted:
            own[tuple(sequence)] = own.get(tuple(sequence), 0) + int(count)
    ids = sorted(merged)
    uniforms = keys.choice_uniforms(ids)
    exact = [0] * len(targets)
    for user, u in zip(ids, uniforms.tolist()):
        chosen = user_choice(merged[user].items(), targets, u)
        if chosen is not None:
            exact[chosen] += 1
    return release(exact, targets, epsilon, keys)
