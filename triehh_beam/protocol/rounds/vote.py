"""The vote a device sends in one round (Algorithms 1 and 3 of the TrieHH paper), pure Python: a
sampled user picks one of its items with probability ``count / total`` from a keyed uniform
``u`` (items in canonical order, so a retry and any record order vote identically), then votes
for its length-``r`` prefix if the length-``r - 1`` prefix is on the frontier; otherwise it sends
nothing, so a user casts at most one vote per round. A deny list restricts the draw to the
user's other sequences with the same uniform (it abstains if it holds no other).
"""

from __future__ import annotations

import bisect
import itertools
import numbers
from typing import Collection, Iterable, Mapping, Optional, Tuple, Union

from triehh_beam.protocol.items.encoding import Units

__all__ = ["choose_sequence", "client_vote", "prefix_vote"]

WeightedSequences = Union[Mapping[Units, int], Iterable[Tuple[Units, int]]]


def _merged_counts(weighted: WeightedSequences) -> list:
    # type() checks first: this runs once per sampled user per round, and the ABC isinstance
    # checks cost about 3 µs each time.
    pairs = weighted.items() if type(weighted) is dict or isinstance(weighted, Mapping) else weighted
    totals: dict = {}
    for sequence, count in pairs:
        if type(count) is not int:
            if isinstance(count, bool) or not isinstance(count, numbers.Integral):
                raise ValueError(f"counts must be non-negative integers, got {count!r}")
            count = int(count)
        if count < 0:
            raise ValueError(f"counts must be non-negative integers, got {count!r}")
        if count:
            totals[sequence] = totals.get(sequence, 0) + count
    return sorted(totals.items())


def choose_sequence(weighted: WeightedSequences, u: float, denied: Collection[Units] = ()) -> Optional[Units]:
    """One sequence drawn with probability ``count / total`` using the uniform ``u``.

    Args:
      weighted: sequences with their local counts (a mapping, or pairs; repeated sequences are
        summed, zero counts ignored).
      u: a uniform number in [0, 1).
      denied: sequences never chosen: the draw is among the others, ``count / (total of the
        others)`` each (the module docstring).

    Returns:
      The chosen sequence, or None when the user holds nothing (nothing but denied sequences).

    Raises:
      ValueError: for a negative or non-integer count, or ``u`` outside [0, 1).
    """
    if not 0.0 <= u < 1.0:
        raise ValueError(f"u must be in [0, 1), got {u!r}")
    items = _merged_counts(weighted)
    if denied:
        items = [(sequence, count) for sequence, count in items if sequence not in denied]
    if not items:
        return None
    cumulative = list(itertools.accumulate(count for _, count in items))
    target = u * cumulative[-1]
    # The first item whose cumulative count exceeds the target: item i owns
    # [cumulative[i-1], cumulative[i]), a share of exactly count_i / total.
    return items[bisect.bisect_right(cumulative, target)][0]


def prefix_vote(sequence: Units, frontier: Collection[Units], round_index: int) -> Optional[Units]:
    """The length-``round_index`` prefix of ``sequence`` if it extends the frontier, else None.

    ``frontier`` holds the trie's prefixes of length ``round_index - 1`` (in round 1, the
    empty prefix ``()``).
    """
    if round_index < 1:
        raise ValueError(f"rounds are numbered from 1, got {round_index}")
    if len(sequence) < round_index:
        return None
    if sequence[: round_index - 1] not in frontier:
        return None
    return tuple(sequence[:round_index])


def client_vote(
    weighted: WeightedSequences,
    frontier: Collection[Units],
    round_index: int,
    u: float,
    denied: Collection[Units] = (),
) -> Optional[Units]:
    """The one vote (or None) of a sampled user in round ``round_index``.

    Args:
      weighted: the user's encoded items with their local counts.
      frontier: the trie's prefixes of length ``round_index - 1``.
      round_index: the round, from 1.
      u: the user's uniform number for this round, from ``Sampler.choice_uniform``.
      denied: the deny list's sequences (``choose_sequence``); default none.
    """
    chosen = choose_sequence(weighted, u, denied)
    if chosen is None:
        return None
    return prefix_vote(chosen, frontier, round_index)
