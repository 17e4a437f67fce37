"""The distinct values of an integer array, sorted, found by sorting: ``np.unique`` on integers
hashes in numpy 2.4, about 25 to 60 times slower than a sort here (1.3 s against 22 ms for 2^20
uint64), and it is on the hot path of every census, bottom-m and candidate cut."""

from __future__ import annotations

from typing import Tuple

import numpy as np

__all__ = ["distinct", "distinct_counts", "union"]


def _firsts(ordered: np.ndarray) -> np.ndarray:
    first = np.empty(len(ordered), dtype=bool)
    if len(ordered):
        first[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


def distinct(values: np.ndarray, in_place: bool = False) -> np.ndarray:
    """The distinct values of ``values``, ascending (``np.unique(values)``). ``in_place``: sort
    ``values`` itself (an array the caller gives up) instead of a copy, holding it once."""
    # numpy's default sort (vectorised quicksort): about 10 times a stable sort's speed on 2^16
    # random uint64 here, and faster on concatenated sorted runs too; stability is moot for values.
    if in_place:
        values.sort()
        ordered = values
    else:
        ordered = np.sort(np.asarray(values))
    return ordered[_firsts(ordered)]


def distinct_counts(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The distinct values, ascending, and how often each occurs
    (``np.unique(values, return_counts=True)``)."""
    ordered = np.sort(np.asarray(values))
    starts = np.flatnonzero(_firsts(ordered))
    return ordered[starts], np.diff(np.append(starts, len(ordered)))


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distinct values of both arrays, ascending (``np.union1d``)."""
    return distinct(np.concatenate([np.asarray(a), np.asarray(b)]))
