"""Ragged arrays in Arrow's layout (flat values and ``offsets``, row ``i`` being
``values[offsets[i]:offsets[i + 1]]``): the positions that gather some rows back to back, shared
by the packed user ids of bottom-m and the sequence tables of the vote."""

from __future__ import annotations

from typing import Tuple

import numpy as np

__all__ = ["gather"]


def gather(offsets: np.ndarray, rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(new offsets, positions)``: ``values[positions]`` holds the given ``rows`` of a ragged
    array back to back, in the order given, and ``new offsets`` delimits them."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = offsets[rows]
    sizes = offsets[rows + 1] - starts
    new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    positions = np.repeat(starts - new_offsets[:-1], sizes) + np.arange(new_offsets[-1], dtype=np.int64)
    return new_offsets, positions
