"""The TrieHH round loop, written once for the driver and the simulation (docs/protocol.md §1):
``next_round`` says what runs next (a round extending the trie's frontier, or why the run stops),
``apply_round`` records a round's kept prefixes as the next level, and ``RoundResult`` is what one
round of the pipeline returns."""

from __future__ import annotations

import dataclasses
import enum
from typing import FrozenSet, Iterable, Optional, Tuple, Union

from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.rounds.trie import Trie

__all__ = [
    "NextRound",
    "RoundResult",
    "Stop",
    "StopReason",
    "apply_round",
    "next_round",
]


class StopReason(enum.Enum):
    """Why a discovery ran no further round."""

    EMPTY_ROUND = "empty_round"  # the last round run kept no prefix
    MAX_ROUNDS = "max_rounds"  # the round limit has run
    NOTHING_TO_EXTEND = "nothing_to_extend"  # every deepest prefix is a complete item


@dataclasses.dataclass(frozen=True)
class NextRound:
    """The round to run: its index (from 1) and the prefixes its votes extend."""

    index: int
    frontier: FrozenSet[Units]


@dataclasses.dataclass(frozen=True)
class Stop:
    """The end of a discovery: why, and the last round run (0 if none)."""

    reason: StopReason
    last_round: int

    def describe(self) -> str:
        """The stop reason as the driver records and publishes it."""
        if self.reason is StopReason.EMPTY_ROUND:
            return f"round {self.last_round} added nothing"
        if self.reason is StopReason.MAX_ROUNDS:
            return "reached max length"
        return "no prefix left to extend"


Step = Union[NextRound, Stop]


def _limit(trie: Trie, max_rounds: Optional[int]) -> int:
    length = trie.encoder.max_length
    if max_rounds is None:
        return length
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
    return min(int(max_rounds), length)


def next_round(trie: Trie, max_rounds: Optional[int] = None) -> Step:
    """What follows a trie grown by ``trie.depth`` rounds that each kept something.

    Args:
      trie: the trie so far (``Trie.empty`` before round 1).
      max_rounds: the most rounds to run; default, and at most, ``L`` (the encoder's
        ``max_length``: no sequence is longer).

    Returns:
      ``NextRound(depth + 1, frontier)``, or ``Stop(MAX_ROUNDS)`` when ``depth`` rounds is the
      limit, or ``Stop(NOTHING_TO_EXTEND)`` when every deepest prefix is a complete item.
    """
    depth = trie.depth
    if depth >= _limit(trie, max_rounds):
        return Stop(StopReason.MAX_ROUNDS, depth)
    frontier = trie.frontier()
    if not frontier:
        return Stop(StopReason.NOTHING_TO_EXTEND, depth)
    return NextRound(depth + 1, frontier)


def apply_round(
    trie: Trie, round_: NextRound, kept: Iterable[Units], max_rounds: Optional[int] = None
) -> Tuple[Trie, Step]:
    """Records the prefixes round ``round_`` kept; returns the new trie and what follows it.

    A round that kept nothing ends the discovery (``Stop(EMPTY_ROUND)``, the trie unchanged);
    otherwise the kept prefixes are the trie's next level and ``next_round`` decides.

    Raises:
      ValueError: ``round_`` is not the round that follows ``trie``, or a kept prefix does not
        extend its frontier (``Trie.with_level``).
    """
    if round_.index != trie.depth + 1:
        raise ValueError(f"a depth-{trie.depth} trie is followed by round {trie.depth + 1}, not {round_.index}")
    kept = frozenset(kept)
    if not kept:
        return trie, Stop(StopReason.EMPTY_ROUND, round_.index)
    grown = trie.with_level(kept)
    return grown, next_round(grown, max_rounds)


@dataclasses.dataclass(frozen=True)
class RoundResult:
    """What one round of the pipeline returns to the driver.

    Attributes:
      kept: the prefixes with at least theta votes, sorted (no counts); empty when the sample
        came up short, since nothing is computed from an incomplete sample.
      users_sampled: distinct users in the sample the round drew.
      users_required: the sample the round must draw, ``min(m, n)``, when the population ``n``
        is known; None when it is not (every record was a candidate, so the sample is exact).
      records_ranked: the records the round read and ranked (None: not counted), for the
        driver to check the round read exactly what the census counted.
    """

    kept: Tuple[Units, ...]
    users_sampled: int
    users_required: Optional[int] = None
    records_ranked: Optional[int] = None

    @property
    def sample_short(self) -> bool:
        """True when the round drew fewer users than it must: its result is not a round's."""
        return self.users_required is not None and self.users_sampled < self.users_required
