"""Integer searches the planners share: the smallest integer at which a nondecreasing
condition holds (a population large enough, holders enough to be found), by bisection between
a known failure and a known success, or by doubling first when no success is known yet. Exact
for any monotone predicate: each probe is one call, about log2 of the range in all."""

from __future__ import annotations

from typing import Callable, Optional

__all__ = ["first_true", "first_true_doubling"]


def first_true(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest ``x`` in ``(lo, hi]`` with ``ok(x)``, for ``ok`` False at ``lo``, True at
    ``hi`` and monotone in between (neither end is called)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def first_true_doubling(ok: Callable[[int], bool], lo: int, start: int, cap: int) -> Optional[int]:
    """The smallest ``x > lo`` with ``ok(x)``, for ``ok`` False at ``lo`` and monotone: probes
    ``start``, then doubles up to ``cap`` until it holds, then bisects. None when it does not
    hold at ``cap``."""
    hi = start
    while not ok(hi):
        lo = hi
        if hi >= cap:
            return None
        hi = min(2 * hi, cap)
    return first_true(ok, lo, hi)
