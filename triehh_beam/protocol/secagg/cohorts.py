"""Cohorts: a round's selected devices split, in a fixed order, into groups of at most
``max_size`` and at least ``min_size`` devices, each run as one secure aggregation with threshold
``max(min_size, ceil(fraction * size))`` (at most ``size``): the server never unmasks a sum over fewer devices than
that, and a cohort whose survivors fall below it is dropped whole."""

from __future__ import annotations

import dataclasses
import math
from typing import List, Sequence, Tuple, TypeVar

__all__ = ["CohortPolicy", "TooFewDevicesError"]

T = TypeVar("T")


class TooFewDevicesError(ValueError):
    """Fewer selected devices than one cohort's minimum: the round cannot run securely."""


@dataclasses.dataclass(frozen=True)
class CohortPolicy:
    """How a round's devices are grouped and how many must finish in each group.

    Attributes:
      max_size: the largest cohort (key agreement and sharing cost a device O(max_size)).
      min_size: the smallest cohort, and the fewest devices whose sum is ever unmasked
        (>= 2, at most max_size // 2, so a balanced split never goes below it).
      fraction: a cohort of n needs ceil(fraction * n) devices at every phase, in (0, 1]. Above
        1/2 (``majority``) no two disjoint sets of devices can both recover a device's secrets,
        which protects a device even from a server that lies about who dropped out; at or below
        it, only from a server that follows the protocol.

    Raises:
      ValueError: a value outside its range.
    """

    max_size: int = 500
    min_size: int = 10
    fraction: float = 2 / 3

    def __post_init__(self):
        for name in ("max_size", "min_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if not 2 <= self.min_size <= self.max_size // 2:
            raise ValueError(f"min_size {self.min_size} must be in [2, max_size // 2 = {self.max_size // 2}]")
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)) or not 0 < self.fraction <= 1:
            raise ValueError(f"the cohort threshold {self.fraction!r} must be a fraction in (0, 1]")

    @property
    def majority(self) -> bool:
        """Whether every threshold is more than half its cohort."""
        return self.fraction > 0.5

    def threshold(self, size: int) -> int:
        """The devices a cohort of ``size`` needs at every phase."""
        return min(size, max(self.min_size, math.ceil(self.fraction * size - 1e-9)))

    def split(self, members: Sequence[T]) -> List[Tuple[T, ...]]:
        """``members`` (in the caller's fixed order) cut into ceil(N / max_size) consecutive
        cohorts of balanced sizes (they differ by at most one).

        Raises:
          TooFewDevicesError: fewer than ``min_size`` members.
        """
        total = len(members)
        if total < self.min_size:
            raise TooFewDevicesError(
                f"{total} selected devices, fewer than one cohort's minimum of {self.min_size}")
        groups = -(-total // self.max_size)
        base, extra = divmod(total, groups)
        cohorts, start = [], 0
        for g in range(groups):
            size = base + (1 if g < extra else 0)
            cohorts.append(tuple(members[start:start + size]))
            start += size
        return cohorts
