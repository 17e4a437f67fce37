"""The release of ``--protocol partition-selection`` (docs/protocol.md §7), columnar and keyed:
``contributions`` bounds each user to k distinct items drawn by local frequency with its keyed
uniform; ``PartitionCounter`` merges the counts of contributing users and lets out, through
``extract_released`` only, the items its keyed coins keep (probability ``pi(n)``), each with its
count plus keyed two-sided geometric noise. Coins and noise are streams of ``SelectionKeys``,
derived from the release's seed and identity (its nonce included): a resume redraws them, two
releases never share them."""

from __future__ import annotations

import dataclasses
import functools
import json
from fractions import Fraction
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from triehh_beam.protocol.central.partition_selection import PartitionSelectionPlan, keep_probabilities
from triehh_beam.protocol.central.whole_items import WholeItemCounter
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.discrete_laplace import KeyedBits, TwoSidedGeometric
from triehh_beam.protocol.rounds import columnar

__all__ = ["PartitionCounter", "SelectionKeys", "contributions", "count_contributions", "item_label",
           "keyed_coin", "more_uniforms"]

_COIN_PURPOSE = b"partition-selection/coin/v1"
_NOISE_PURPOSE = b"partition-selection/noise/v1"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)

#: One released item: (its encoded sequence, its count plus noise; None without counts).
Released = Tuple[Units, Optional[int]]


@dataclasses.dataclass(frozen=True)
class SelectionKeys:
    """The keys of one release's coins and noise (what a graph carries; never the seed)."""

    coin_key: Tuple[int, int] = dataclasses.field(repr=False)
    noise_key: Tuple[int, int] = dataclasses.field(repr=False)

    @classmethod
    def derive(cls, seed: bytes, identity: bytes) -> "SelectionKeys":
        """The keys of the release with secret ``seed`` and keyed identity ``identity`` (a
        ``Sampler``'s: the settings and the release nonce).

        Raises:
          ValueError: a seed shorter than 16 or longer than 64 bytes.
        """
        return cls(keyed_hash.derive_key(seed, _COIN_PURPOSE, identity),
                   keyed_hash.derive_key(seed, _NOISE_PURPOSE, identity))

    def coin_words(self, items: Sequence[Units]) -> np.ndarray:
        """The first 64 bits of each item's coin (uint64): SipHash-2-4 of its label, in one batch."""
        return keyed_hash.siphash24_batch(self.coin_key, *keyed_hash.pack_messages(item_label(i) for i in items))

    def coin_bits(self, item: Units) -> KeyedBits:
        """The bits of the item's coin after its first 64 (``coin_words``): needed only on a tie."""
        return KeyedBits(self.coin_key, item_label(item))

    def noise_bits(self, item: Units) -> KeyedBits:
        return KeyedBits(self.noise_key, item_label(item))


def item_label(item: Units) -> bytes:
    """An item's canonical bytes, injective: the JSON list of its units (text units as text,
    byte units as hex, marked apart)."""
    if all(isinstance(u, str) for u in item):
        return json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"b" + json.dumps([bytes(u).hex() for u in item], separators=(",", ":")).encode("ascii")


def keyed_coin(first: int, bits: Callable[[], KeyedBits], probability: float) -> bool:
    """True with probability exactly ``probability`` (a float in [0, 1], taken as its exact
    binary value) for a uniform U whose binary expansion starts with the 64 bits ``first`` and
    goes on with ``bits()``'s stream: U < p, compared 64 bits at a time; ``first`` decides
    unless it equals p's first 64 bits (probability 2^-64)."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"a probability is in [0, 1], got {probability!r}")
    rest, drawn, stream = Fraction(probability), int(first), None
    while True:
        scaled = rest * 2**64
        whole = int(scaled)  # floor: rest < 1 after the first step, and <= 1 before
        if whole >= 2**64:
            return True  # p = 1
        if drawn != whole:
            return drawn < whole
        rest = scaled - whole
        if rest == 0:
            return False  # U's bits equal all of p's: U >= p
        stream = stream or bits()
        drawn = stream.bits(64)


def _mix(words: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, elementwise (a bijection of uint64)."""
    with np.errstate(over="ignore"):
        z = words.copy()
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


def more_uniforms(uniforms: np.ndarray, draw: int) -> np.ndarray:
    """The users' uniforms of their ``draw``-th item (0: ``uniforms`` themselves): a bijective
    mix of each keyed uniform's 53 bits with the draw's index, so still a function of (seed,
    release, user) only."""
    if draw == 0:
        return uniforms
    words = (np.asarray(uniforms, dtype=np.float64) * 2.0**53).astype(np.uint64)
    with np.errstate(over="ignore"):
        mixed = _mix(words + _GOLDEN * np.uint64(draw))
    return (mixed >> np.uint64(11)).astype(np.float64) * 2.0**-53


def contributions(table: columnar.SequenceTable, uniforms: np.ndarray, max_items: int) -> np.ndarray:
    """The codes each user contributes: up to ``max_items`` distinct items, drawn one after the
    other by local frequency among the items not yet drawn (``columnar.choose_codes`` with
    ``more_uniforms``), so a user holding at most k items contributes all of them. A flat
    array of codes, at most one per (user, item).

    Raises:
      ValueError: bad uniforms, or max_items < 1.
    """
    if max_items < 1:
        raise ValueError(f"a user contributes at least one item, got {max_items}")
    chosen_all = []
    for draw in range(max_items):
        chosen = columnar.choose_codes(table, more_uniforms(uniforms, draw))
        chosen_all.append(chosen[chosen >= 0])
        if draw + 1 == max_items or not len(table.codes):
            break
        drop = table.codes == chosen[table.user_rows()]  # each user's drawn row (codes are distinct per user)
        if not drop.any():
            break
        kept_before = np.zeros(len(drop) + 1, dtype=np.int64)
        np.cumsum(~drop, out=kept_before[1:])
        table = columnar.SequenceTable(table.sequences, kept_before[table.offsets], table.codes[~drop],
                                       table.counts[~drop])
    return np.concatenate(chosen_all) if chosen_all else np.zeros(0, np.int64)


def count_contributions(table: columnar.SequenceTable, uniforms: np.ndarray, max_items: int) -> Dict[Units, int]:
    """Contributing users per item of a batch (``contributions``): private, for
    ``PartitionCounter.merge`` only."""
    tally = np.bincount(contributions(table, uniforms, max_items), minlength=len(table.sequences))
    return {table.sequences[c]: int(tally[c]) for c in np.flatnonzero(tally).tolist()}


class PartitionCounter:
    """create / merge / extract for contributing-user counts, with the selection on the way out.

    Args:
      plan: the release's plan (its k, the decisions' (epsilon, delta), the counts' noise).
      keys: the release's coin and noise keys.
    """

    def __init__(self, plan: PartitionSelectionPlan, keys: SelectionKeys):
        self.plan = plan
        self.keys = keys
        noise = plan.count_noise_epsilon
        self._noise = TwoSidedGeometric(noise) if noise else None

    # The counts' create / add / merge: whole items' (``WholeItemCounter``), only the way out differs.
    create = staticmethod(WholeItemCounter.create)
    add = staticmethod(WholeItemCounter.add)
    merge = staticmethod(WholeItemCounter.merge)

    def kept(self, items: Sequence[Units], users: Sequence[int]) -> np.ndarray:
        """Each item's keyed coin: True with probability ``pi(users)``, exactly (``keyed_coin``,
        its first 64 bits compared for every item at once; only a tie goes on bit by bit)."""
        table = keep_probabilities(self.plan.item_epsilon, self.plan.item_delta)
        position = np.minimum(np.asarray(users, dtype=np.int64), len(table)) - 1
        # floor(pi(n) 2^64) per table entry, exactly (2^64 - 1 stands for pi = 1, kept below).
        heads = np.array([min(int(Fraction(p) * 2**64), 2**64 - 1) for p in table], dtype=np.uint64)
        words = self.keys.coin_words(items)
        head = heads[position]
        kept = (words < head) | (position == len(table) - 1)  # pi(N) = 1: kept surely
        for i in np.flatnonzero((words == head) & ~kept).tolist():  # probability 2^-64 each
            kept[i] = keyed_coin(int(words[i]), functools.partial(self.keys.coin_bits, items[i]), table[position[i]])
        return kept

    def extract_released(self, counts: Mapping[Units, int]) -> Tuple[Released, ...]:
        """The kept items, sorted by sequence, each with its noisy count (None without counts);
        the exact counts, and every dropped item, stay in the accumulator."""
        items = sorted(item for item, users in counts.items() if users > 0)
        users = [int(counts[item]) for item in items]
        released = []
        for item, n, kept in zip(items, users, self.kept(items, users)):
            if kept:
                noisy = None if self._noise is None else n + self._noise.sample(self.keys.noise_bits(item))
                released.append((item, noisy))
        return tuple(released)
