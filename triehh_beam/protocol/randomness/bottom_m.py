"""Bottom-m sampling's one rule, columnar: of (rank, user id) rows, the ``m`` smallest distinct
pairs, equal ranks ordered by the id bytes and a user's repeated rows counted once
(``bottom_m``), and its accumulator for combiners (``SmallestRanks``), filled and merged in any
order with the same result. Plain numpy; the ranks come from ``sampling``.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

from triehh_beam.protocol.distinct import distinct
from triehh_beam.protocol.ragged import gather

__all__ = ["PackedIds", "SmallestRanks", "bottom_m", "smallest_rank_rows"]


def smallest_rank_rows(ranks: np.ndarray, m: int) -> np.ndarray:
    """The rows of ``ranks`` whose rank is among the ``m`` smallest distinct ranks (ascending
    row order): the only rows a bottom-m can keep, found with numpy alone (a user with many
    records repeats its rank, so the cut is on distinct ranks)."""
    ranks = np.asarray(ranks, dtype=np.uint64)
    n = len(ranks)
    if m <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if n <= m:
        return np.arange(n, dtype=np.int64)
    # The m-th smallest rank counting repeats is at most the m-th smallest distinct one, and the
    # ranks up to it (found in linear time) usually hold m distinct ones already.
    edge = np.partition(ranks, m - 1)[m - 1]
    near = np.flatnonzero(ranks <= edge)
    smallest = distinct(ranks[near])
    if len(smallest) < m:  # many repeated ranks: cut on all of them
        smallest = distinct(ranks)
        if len(smallest) <= m:
            return np.arange(n, dtype=np.int64)
        return np.flatnonzero(ranks <= smallest[m - 1])
    return near[ranks[near] <= smallest[m - 1]]


def bottom_m(ranks: np.ndarray, user_ids: Sequence[bytes], m: int) -> np.ndarray:
    """Bottom-m sampling's one rule: the rows of the ``m`` smallest distinct (rank, user id)
    pairs, smallest first; a pair repeated (one user's many records) counts once, at its first
    row, and equal ranks are ordered by the id bytes.

    Args:
      ranks: ``uint64`` per row.
      user_ids: the canonical id bytes per row (a sequence as long as ``ranks``).
      m: the sample size, >= 0.

    Raises:
      ValueError: ``ranks`` and ``user_ids`` of different lengths.
    """
    ranks = np.asarray(ranks, dtype=np.uint64)
    if len(ranks) != len(user_ids):
        raise ValueError(f"{len(ranks)} ranks for {len(user_ids)} user ids")
    rows = smallest_rank_rows(ranks, m)
    rows = rows[np.argsort(ranks[rows], kind="stable")]
    ordered = ranks[rows]
    if len(rows) < 2 or not np.any(ordered[1:] == ordered[:-1]):
        return rows[:m]
    # Runs of one rank (almost always one user's repeated records): sorted by id, deduplicated.
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    ends = np.append(starts[1:], len(rows))
    kept: List[int] = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        if end - start == 1:
            kept.append(int(rows[start]))
        else:
            first: dict = {}
            for row in rows[start:end].tolist():
                first.setdefault(user_ids[row], row)
            kept.extend(first[uid] for uid in sorted(first))
        if len(kept) >= m:
            break
    return np.asarray(kept[:m], dtype=np.int64)


class PackedIds:
    """User ids as two numpy arrays in Arrow's layout (``data`` bytes back to back, ``offsets``):
    a ``Sequence[bytes]`` for ``bottom_m`` that holds no Python object per id."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self.data = np.ascontiguousarray(data, dtype=np.uint8)
        self.offsets = np.asarray(offsets, dtype=np.int64)

    @classmethod
    def of(cls, user_ids) -> "PackedIds":
        """Packed ids from ``PackedIds`` (as is) or a sequence of bytes."""
        if isinstance(user_ids, PackedIds):
            return user_ids
        user_ids = list(user_ids)
        offsets = np.zeros(len(user_ids) + 1, dtype=np.int64)
        np.cumsum([len(u) for u in user_ids], out=offsets[1:])
        return cls(np.frombuffer(b"".join(user_ids), dtype=np.uint8), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, row: int) -> bytes:
        return self.data[self.offsets[row]:self.offsets[row + 1]].tobytes()

    def take(self, rows: np.ndarray) -> "PackedIds":
        offsets, positions = gather(self.offsets, rows)
        return PackedIds(self.data[positions], offsets)

    @staticmethod
    def join(parts: Sequence["PackedIds"]) -> "PackedIds":
        """The ids of every part, in order, in one copy."""
        data, offsets, base = [], [np.zeros(1, dtype=np.int64)], 0
        for part in parts:
            data.append(part.data[part.offsets[0]:part.offsets[-1]])
            offsets.append(part.offsets[1:] - part.offsets[0] + base)
            base += int(part.offsets[-1] - part.offsets[0])
        return PackedIds(np.concatenate(data) if data else np.zeros(0, np.uint8), np.concatenate(offsets))

    def to_list(self) -> List[bytes]:
        return [self[i] for i in range(len(self))]


class SmallestRanks:
    """The ``m`` smallest distinct (rank, user) pairs, accumulated: the pure core of a bottom-m
    combiner (``bottom_m`` over what it was given).

    Accumulators are filled a pair or a batch at a time and merged in any order with the same
    result; a user seen several times (many records) counts once. Each batch is cut to its own
    bottom m on the way in, and the accumulator back to m when it grows past ``2m``, so it holds
    O(m) pairs: ranks and ids in numpy arrays (``PackedIds``: no Python object per user, so a
    sample of millions fits in memory and pickles as three buffers).
    """

    def __init__(self, m: int, pairs: Iterable[Tuple[int, bytes]] = ()):
        if m < 0:
            raise ValueError(f"sample size must be >= 0, got {m}")
        self.m = m
        self._ranks = np.zeros(0, dtype=np.uint64)
        self._ids = PackedIds.of([])
        self._parts: List[Tuple[np.ndarray, PackedIds]] = []  # appended, not yet joined
        self._held = 0
        pairs = list(pairs)
        if pairs:
            self.add_batch(np.array([r for r, _ in pairs], dtype=np.uint64), [u for _, u in pairs])

    def _append(self, ranks: np.ndarray, user_ids: PackedIds) -> None:
        # Parts are joined only when the accumulator is cut or read: joining at every batch
        # would copy the m pairs held so far each time.
        self._parts.append((ranks, user_ids))
        self._held += len(ranks)
        if self._held > 2 * self.m + 64:
            self._compact()

    def _joined(self) -> None:
        if self._parts:
            self._ranks = np.concatenate([self._ranks] + [ranks for ranks, _ in self._parts])
            self._ids = PackedIds.join([self._ids] + [ids for _, ids in self._parts])
            self._parts = []

    def _bottom(self) -> np.ndarray:
        self._joined()
        return bottom_m(self._ranks, self._ids, self.m)

    def _compact(self) -> None:
        rows = self._bottom()
        self._ranks = self._ranks[rows]
        self._ids = self._ids.take(rows)
        self._held = len(rows)

    def add(self, rank: int, user_id: bytes) -> None:
        """Adds one (rank, user) pair."""
        self.add_batch(np.array([rank], dtype=np.uint64), [user_id])

    def add_batch(self, ranks: np.ndarray, user_ids) -> None:
        """Adds a batch of ranks with their users' canonical id bytes (a sequence of bytes, or
        ``PackedIds``)."""
        if self.m == 0 or len(ranks) == 0:
            return
        ids = PackedIds.of(user_ids)
        rows = bottom_m(ranks, ids, self.m)
        self._append(np.asarray(ranks, dtype=np.uint64)[rows], ids.take(rows))

    def merge(self, other: "SmallestRanks") -> "SmallestRanks":
        """A new accumulator holding the union's m smallest (the operands are unchanged)."""
        self._joined()
        other._joined()
        merged = SmallestRanks(self.m)
        merged._append(self._ranks, self._ids)
        merged._append(other._ranks, other._ids)
        return merged

    def extract(self) -> List[Tuple[int, bytes]]:
        """The (rank, user id bytes) pairs, smallest rank first."""
        rows = self._bottom()
        return list(zip(self._ranks[rows].tolist(), self._ids.take(rows).to_list()))

    def threshold(self) -> Optional[Tuple[int, bytes]]:
        """The largest sampled (rank, user) pair: a record is sampled iff its pair is <= this."""
        return self.largest()[0]

    def largest(self) -> Tuple[Optional[Tuple[int, bytes]], int]:
        """(the largest sampled (rank, user) pair or None, how many pairs are sampled), without
        a Python object per sampled user."""
        rows = self._bottom()
        if len(rows) == 0:
            return None, 0
        last = int(rows[-1])
        return (int(self._ranks[last]), self._ids[last]), len(rows)
