"""Optimal partition selection (``--protocol partition-selection``, docs/protocol.md §7): the
(epsilon, delta)-DP release of whole items at the central optimum. Each user contributes up to
``k`` distinct items; an item with ``n`` contributing users is kept with probability ``pi(n)``, the
largest any (epsilon/k, delta/k)-DP keep-or-drop decision can give (Desfontaines, Voss, Gipson and
Mandayam, PETS 2022: ``pi(0) = 0``, ``pi(n) = min(e^eps pi(n-1) + delta, 1 + e^-eps (pi(n-1) +
delta - 1), 1)``), and published with its count plus two-sided geometric noise of epsilon_count/k.
``plan_partition_selection`` splits the target between the selection and the counts."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional, Tuple

__all__ = [
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_SELECTION_SHARE",
    "PartitionSelectionPlan",
    "holders_for",
    "keep_probabilities",
    "keep_probability",
    "plan_partition_selection",
]

#: Distinct items a user contributes unless the job says otherwise (``--max-items-per-user``).
DEFAULT_MAX_ITEMS = 1
#: The share of epsilon the selection spends; the rest noises the counts (``--selection-share``).
DEFAULT_SELECTION_SHARE = 0.5
# pi(n) reaches 1 after O(ln(1/delta) / epsilon) steps; a table longer than this is refused.
_MAX_TABLE = 10_000_000


@functools.lru_cache(maxsize=64)
def keep_probabilities(epsilon: float, delta: float) -> Tuple[float, ...]:
    """``(pi(1), pi(2), ..., pi(N))`` for one keep-or-drop decision at ``(epsilon, delta)``,
    ending at the first ``pi(N) = 1`` (every larger n is kept surely); ``pi(0) = 0``.

    Raises:
      ValueError: epsilon not a positive finite number, delta outside (0, 1), or a table too
        long to hold (an epsilon so small that pi takes over ten million steps to reach 1).
    """
    if isinstance(epsilon, bool) or not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if isinstance(delta, bool) or not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    grow, shrink = math.exp(epsilon), math.exp(-epsilon)
    table, p = [], 0.0
    while p < 1.0:
        p = min(grow * p + delta, 1.0 + shrink * (p + delta - 1.0), 1.0)
        table.append(p)
        if len(table) > _MAX_TABLE:
            raise ValueError(f"epsilon {epsilon!r} is too small: pi(n) needs over {_MAX_TABLE:,} steps to reach 1")
    return tuple(table)


def keep_probability(users: int, epsilon: float, delta: float) -> float:
    """``pi(users)``: the probability an item with ``users`` contributing users is kept.

    Raises:
      ValueError: users < 0, or bad epsilon, delta (``keep_probabilities``).
    """
    if isinstance(users, bool) or not isinstance(users, int) or users < 0:
        raise ValueError(f"users must be an integer >= 0, got {users!r}")
    table = keep_probabilities(epsilon, delta)
    if users == 0:
        return 0.0
    return table[min(users, len(table)) - 1]


def holders_for(objective: float, epsilon: float, delta: float) -> int:
    """The fewest contributing users whose item is kept with probability at least ``objective``.

    Raises:
      ValueError: objective outside (0, 1], or bad epsilon, delta.
    """
    if not 0 < objective <= 1:
        raise ValueError(f"the objective must be in (0, 1], got {objective!r}")
    table = keep_probabilities(epsilon, delta)
    return next(n for n, p in enumerate(table, start=1) if p >= objective)


@dataclasses.dataclass(frozen=True)
class PartitionSelectionPlan:
    """How one partition-selection release spends its target.

    Attributes:
      epsilon, delta: the target, spent whole: ``selection_epsilon + count_epsilon`` and delta
        (basic composition of the selection and the counts; the counts add no delta).
      max_items: k, the distinct items a user contributes at most.
      selection_share: the share of epsilon the selection spends (1: no counts published).
      selection_epsilon: ``epsilon * selection_share``, over the k items a user touches.
      count_epsilon: ``epsilon - selection_epsilon``; 0 when no counts are published.
    """

    epsilon: float
    delta: float
    max_items: int = DEFAULT_MAX_ITEMS
    selection_share: float = DEFAULT_SELECTION_SHARE

    def __post_init__(self):
        for name in ("epsilon", "selection_share"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if not self.epsilon > 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon!r}")
        if isinstance(self.delta, bool) or not isinstance(self.delta, (int, float)) or not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        if isinstance(self.max_items, bool) or not isinstance(self.max_items, int) or self.max_items < 1:
            raise ValueError(f"the items per user must be an integer >= 1, got {self.max_items!r}")
        if not 0 < self.selection_share <= 1:
            raise ValueError(f"the selection share must be in (0, 1], got {self.selection_share!r}")
        keep_probabilities(self.item_epsilon, self.item_delta)  # refuses an epsilon too small to tabulate

    @property
    def selection_epsilon(self) -> float:
        return self.epsilon if self.selection_share == 1 else self.epsilon * self.selection_share

    @property
    def count_epsilon(self) -> float:
        return 0.0 if self.selection_share == 1 else self.epsilon - self.selection_epsilon

    @property
    def item_epsilon(self) -> float:
        """Each item's decision's epsilon: ``selection_epsilon / k`` (a user changes k decisions)."""
        return self.selection_epsilon / self.max_items

    @property
    def item_delta(self) -> float:
        """Each item's decision's delta: ``delta / k``."""
        return self.delta / self.max_items

    @property
    def count_noise_epsilon(self) -> Optional[float]:
        """The epsilon of each count's two-sided geometric noise, ``count_epsilon / k`` (a user
        changes k counts by one each: L1 sensitivity k); None without counts."""
        return self.count_epsilon / self.max_items if self.count_epsilon else None

    def keep_probability(self, users: int) -> float:
        """``pi(users)`` at ``(item_epsilon, item_delta)``."""
        return keep_probability(users, self.item_epsilon, self.item_delta)

    def holders_for(self, objective: float) -> int:
        """The fewest contributing users kept with probability at least ``objective``."""
        return holders_for(objective, self.item_epsilon, self.item_delta)


def plan_partition_selection(epsilon: float, delta: float, max_items: int = DEFAULT_MAX_ITEMS,
                             selection_share: float = DEFAULT_SELECTION_SHARE) -> PartitionSelectionPlan:
    """The plan of one release at ``(epsilon, delta)``: always feasible (pi reaches 1 for every
    target); nothing in it depends on n.

    Raises:
      ValueError: bad arguments (``PartitionSelectionPlan``).
    """
    return PartitionSelectionPlan(float(epsilon), float(delta), max_items, float(selection_share))
