"""The vote as a vector: a round's candidate slots (the prefixes a vote may name, sorted; then
``other``, a vote for a prefix not listed; then ``abstain``) and a device's one-hot vector over
them modulo 2^32, whose sum over a cohort is the cohort's count per slot."""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Optional, Tuple

import numpy as np

from triehh_beam.protocol.items.encoding import Units

__all__ = ["CandidateSlots", "round_candidates"]


def _key(prefix: Units) -> Tuple[bytes, ...]:
    return tuple(u.encode("utf-8") if isinstance(u, str) else u for u in prefix)


@dataclasses.dataclass(frozen=True)
class CandidateSlots:
    """The slots of a round's vote vector.

    Attributes:
      candidates: the prefixes a vote may name, distinct; kept sorted by their units' bytes
        (the order on the wire), slot i being ``candidates[i]``.

    Raises:
      ValueError: no candidate, or a repeated one.
    """

    candidates: Tuple[Units, ...]

    def __post_init__(self):
        ordered = tuple(sorted((tuple(c) for c in self.candidates), key=_key))
        if not ordered:
            raise ValueError("a vote vector needs at least one candidate")
        if len(set(ordered)) != len(ordered):
            raise ValueError("repeated candidates")
        object.__setattr__(self, "candidates", ordered)
        object.__setattr__(self, "_index", {c: i for i, c in enumerate(ordered)})

    @property
    def other(self) -> int:
        """The slot of a vote for a prefix that is not a candidate."""
        return len(self.candidates)

    @property
    def abstain(self) -> int:
        """The slot of an abstention."""
        return len(self.candidates) + 1

    @property
    def length(self) -> int:
        """The vector's length: the candidates, ``other`` and ``abstain``."""
        return len(self.candidates) + 2

    def slot(self, vote: Optional[Units]) -> int:
        """The slot a vote (a prefix, or None to abstain) is counted in."""
        if vote is None:
            return self.abstain
        return self._index.get(tuple(vote), self.other)

    def one_hot(self, vote: Optional[Units]) -> np.ndarray:
        """The device's vector: 1 in its vote's slot, 0 elsewhere (uint32)."""
        vector = np.zeros(self.length, dtype=np.uint32)
        vector[self.slot(vote)] = 1
        return vector

    def counts(self, summed: np.ndarray) -> Dict[Units, int]:
        """The candidates' counts from a summed vector (``other`` and ``abstain`` left out).

        Raises:
          ValueError: a vector of another length.
        """
        if len(summed) != self.length:
            raise ValueError(f"a summed vector of {len(summed)} entries, the slots are {self.length}")
        return {c: int(summed[i]) for i, c in enumerate(self.candidates) if summed[i]}


def round_candidates(frontier: Iterable[Units], units: Iterable, eos) -> CandidateSlots:
    """Every extension of every frontier prefix by one of ``units`` or by the end marker
    ``eos`` (the encoder's): the candidates of a round whose units come from a known alphabet
    (bits, bytes, a declared character set)."""
    alphabet = tuple(dict.fromkeys(tuple(units) + (eos,)))
    return CandidateSlots(tuple(tuple(p) + (u,) for p in frontier for u in alphabet))
