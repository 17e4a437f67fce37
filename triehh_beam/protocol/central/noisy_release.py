"""One noisy prefix round's release (docs/protocol.md §8), keyed and reproducible: the round's
public candidates are the frontier's prefixes, each extended by every unit of the declared
alphabet (``candidate_units``) and by the end marker, where the encoding allows it (the root not
by the end marker, a prefix ending in a short unit only by it); ``release_round`` adds to every candidate's
vote count its own discrete Laplace draw (``TwoSidedGeometric``, exact) and returns only the
candidates whose noisy count reaches the round's threshold, with that noisy count.
Candidates nobody voted for are not drawn one by one (a frontier of 100 prefixes over 18,279
units of three letters is 1.8 million of them): each is kept independently with probability
``q = P(Z >= T)``, so the kept ones are the successes of a Bernoulli(q) process over the
candidates in their canonical order, drawn by geometric gaps from the round's keyed stream, and
each one kept gets ``T + G``, ``G`` drawn exactly from ``Z`` given ``Z >= 0`` (the discrete
Laplace tail is memoryless) from that candidate's own noise stream. The gaps use ``q`` as a
float (``log`` of a 53-bit keyed uniform): the one step that is not in exact integer arithmetic.
Every stream is keyed by ``NoisyRoundKeys``, derived from the release's secret seed and identity
(its nonce included): a resume redraws the same noise, two releases never share it."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from typing import Dict, Mapping, Sequence, Tuple

from triehh_beam.protocol.central.noisy_rounds import NoisyRoundsPlan, false_release_probability
from triehh_beam.protocol.central.partition_release import item_label
from triehh_beam.protocol.central.whole_items import WholeItemCounter
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.discrete_laplace import KeyedBits

__all__ = ["NoisyRoundCounter", "NoisyRoundKeys", "candidate_units", "release_round", "round_candidates"]

_NOISE_PURPOSE = b"noisy-rounds/noise/v1"
_GAPS_PURPOSE = b"noisy-rounds/gaps/v1"


@dataclasses.dataclass(frozen=True)
class NoisyRoundKeys:
    """The keys of one release's noise (never the seed): each candidate's draw, and each round's
    gaps between the candidates kept without votes."""

    noise_key: Tuple[int, int] = dataclasses.field(repr=False)
    gaps_key: Tuple[int, int] = dataclasses.field(repr=False)

    @classmethod
    def derive(cls, seed: bytes, identity: bytes) -> "NoisyRoundKeys":
        """The keys of the release with secret ``seed`` and keyed identity ``identity``.

        Raises:
          ValueError: a seed shorter than 16 or longer than 64 bytes.
        """
        return cls(keyed_hash.derive_key(seed, _NOISE_PURPOSE, identity),
                   keyed_hash.derive_key(seed, _GAPS_PURPOSE, identity))

    def noise_bits(self, round_index: int, candidate: Units) -> KeyedBits:
        return KeyedBits(self.noise_key, round_index.to_bytes(4, "big") + item_label(candidate))

    def gap_bits(self, round_index: int) -> KeyedBits:
        return KeyedBits(self.gaps_key, round_index.to_bytes(4, "big"))


def candidate_units(alphabet: str, unit_size: int, eos: str = "") -> Tuple[str, ...]:
    """Every unit a candidate may end with, in canonical order: the strings of 1 to
    ``unit_size`` characters of ``alphabet`` (sorted), then the end marker ``eos``.

    Raises:
      ValueError: an empty or repeating alphabet, or unit_size < 1.
    """
    if not isinstance(alphabet, str) or not alphabet or len(set(alphabet)) != len(alphabet):
        raise ValueError(f"the alphabet must be distinct characters, got {alphabet!r}")
    if unit_size < 1:
        raise ValueError(f"a unit has at least one character, got {unit_size}")
    letters = sorted(alphabet)
    units = sorted("".join(t) for k in range(1, unit_size + 1) for t in itertools.product(letters, repeat=k))
    return tuple(units) + (eos,)


def _geometric_gap(bits: KeyedBits, q: float) -> int:
    """Failures before the first success of Bernoulli(q) trials: ``floor(ln U / ln(1 - q))``
    for a keyed uniform U in (0, 1] (53 bits)."""
    u = (bits.bits(53) + 1) * 2.0**-53
    return int(math.floor(math.log(u) / math.log1p(-q)))


def _nonnegative_tail(plan: NoisyRoundsPlan, bits: KeyedBits) -> int:
    """One exact draw of Z given Z >= 0 (rejection from Z's own exact sampler)."""
    noise = plan.noise
    while True:
        z = noise.sample(bits)
        if z >= 0:
            return z


def _extensions(parent: Units, units: Sequence[str], unit_size: int) -> Sequence[str]:
    """The units that extend ``parent`` into a prefix an item can have: not the end marker alone
    (no item is empty), only the end marker after a short unit (only an item's last unit is short)."""
    if not parent:
        return units[:-1]
    if len(parent[-1]) < unit_size:
        return units[-1:]
    return units


def round_candidates(frontier: Sequence[Units], units: Sequence[str]) -> int:
    """How many candidates round's ``frontier`` has (public): what its threshold is planned for."""
    unit_size = max(len(u) for u in units)
    return sum(len(_extensions(p, units, unit_size)) for p in frontier)


def release_round(votes: Mapping[Units, int], frontier: Sequence[Units], units: Sequence[str], round_index: int,
                  plan: NoisyRoundsPlan, keys: NoisyRoundKeys) -> Dict[Units, int]:
    """The candidates of round ``round_index`` whose noisy count reaches its threshold, each
    with its noisy count (>= the threshold); nothing else leaves.

    Args:
      votes: votes per candidate (private; every key a frontier prefix plus one of its units).
      frontier: the public prefixes being extended (length ``round_index - 1``).
      units: the public units (``candidate_units``, the end marker last).

    Raises:
      ValueError: a vote for a prefix outside the candidates, or an empty frontier.
    """
    if not frontier:
        raise ValueError("a round extends a frontier of at least one prefix")
    frontier = sorted(frontier)
    unit_size = max(len(u) for u in units)
    extensions = [_extensions(p, units, unit_size) for p in frontier]
    allowed = {p: frozenset(e) for p, e in zip(frontier, extensions)}
    starts = list(itertools.accumulate((len(e) for e in extensions), initial=0))
    candidates = starts[-1]
    threshold = plan.threshold(candidates)
    released: Dict[Units, int] = {}
    for candidate, count in votes.items():
        if candidate[-1] not in allowed.get(candidate[:-1], ()):
            raise ValueError("a vote for a prefix outside the round's candidates")
        noisy = count + plan.noise.sample(keys.noise_bits(round_index, candidate))
        if noisy >= threshold:
            released[candidate] = noisy
    q = false_release_probability(plan.round_epsilon, threshold)
    gaps = keys.gap_bits(round_index)
    position = -1
    while True:
        position += 1 + _geometric_gap(gaps, q)
        if position >= candidates:
            break
        parent = bisect.bisect_right(starts, position) - 1
        candidate = frontier[parent] + (extensions[parent][position - starts[parent]],)
        if candidate in votes:  # drawn above, with its votes
            continue
        released[candidate] = threshold + _nonnegative_tail(plan, keys.noise_bits(round_index, candidate))
    return released


class NoisyRoundCounter:
    """create / add / merge for one round's votes per candidate, the release on the way out
    (``release_round``): what a combine holds, so no vote count leaves it.

    Args:
      plan, keys: the release's plan and noise keys.
      frontier, units: the round's public frontier and units; round_index: the round.
    """

    def __init__(self, plan: NoisyRoundsPlan, keys: NoisyRoundKeys, frontier: Sequence[Units],
                 units: Sequence[str], round_index: int):
        if not frontier:
            raise ValueError("a round extends a frontier of at least one prefix")
        self.plan, self.keys, self.round_index = plan, keys, round_index
        self.frontier, self.units = tuple(sorted(frontier)), tuple(units)

    # The counts' create / add / merge: whole items' (``WholeItemCounter``), only the way out differs.
    create = staticmethod(WholeItemCounter.create)
    add = staticmethod(WholeItemCounter.add)
    merge = staticmethod(WholeItemCounter.merge)

    def extract_released(self, counts: Mapping[Units, int]) -> Tuple[Tuple[Units, int], ...]:
        """The kept candidates with their noisy counts, sorted; the votes stay in the accumulator."""
        kept = release_round(counts, self.frontier, self.units, self.round_index, self.plan, self.keys)
        return tuple(sorted(kept.items()))
