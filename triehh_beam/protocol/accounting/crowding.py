"""A lower bound on the delta of one TrieHH round with fixed-size sampling (m of n), from
crowding: with m seats, an extra user u can push every prefix below theta. The population
without u has K prefixes of g_i >= theta - 1 users each and r = m - 1 - K (theta - 1) users
alone on prefixes of their own; u is alone on its prefix too. Without u, m seats always give
some prefix theta votes (at most m - 1 seats fit below theta), so round 1 always publishes;
with u it publishes nothing when u is sampled, each group gets exactly theta - 1 seats and the r
users the rest: probability (m/(n+1)) * prod_i C(g_i, theta - 1) * C(r, r) / C(n, m - 1).
Since the event has probability 0 without u, delta >= that probability at every epsilon. For a
fixed K the product is largest with the groups as even as possible (C(g, k) is log-concave in g),
so the bound is the maximum over K of the balanced split (docs/protocol.md §1, "Theorem 1 is
false for fixed-size sampling near m ~ theta"). Computed in log space.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional, Tuple

from triehh_beam.protocol.checks import check_int

__all__ = ["CrowdingBound", "crowding_bound", "neighbours_bound", "log_comb"]


def log_comb(n: int, k: int) -> float:
    """ln C(n, k) for 0 <= k <= n (lgamma: relative error about 1e-15 per term)."""
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


@dataclasses.dataclass(frozen=True)
class CrowdingBound:
    """The crowding lower bound of one round and the population that attains it.

    Attributes:
      delta: the lower bound on delta, at every epsilon (0.0 when no such population exists).
      n, theta, batch_size: the population without the extra user, the threshold and m.
      groups: K, the prefixes of theta - 1 or more users (0 when delta is 0).
      group_size: q: the K groups hold q or q + 1 users each, n - r in all.
      alone: r, the users alone on prefixes of their own (u not counted).
      log_delta: ln delta (-inf when delta is 0), finite where delta underflows.
    """

    delta: float
    n: int
    theta: int
    batch_size: int
    groups: int = 0
    group_size: int = 0
    alone: int = 0
    log_delta: float = -math.inf

    def __post_init__(self):
        if not 0.0 <= self.delta <= 1.0:
            raise ValueError(f"a probability must be in [0, 1], got {self.delta!r}")

    @property
    def sizes(self) -> Tuple[int, ...]:
        """The K groups' sizes, the larger first (as even as possible)."""
        if not self.groups:
            return ()
        extra = self.n - self.alone - self.groups * self.group_size
        return (self.group_size + 1,) * extra + (self.group_size,) * (self.groups - extra)

    def describe(self) -> str:
        """One line: the population and its bound."""
        if not self.groups:
            return f"no crowding population for n = {self.n}, theta = {self.theta}, m = {self.batch_size}"
        shown = " or ".join(str(s) for s in sorted(set(self.sizes)))
        return (f"{self.groups} prefix(es) of {shown} users, {self.alone} user(s) alone and one more user "
                f"alone: round 1 publishes nothing with probability {self.delta:.3g} with that user, never "
                f"without (n = {self.n:,}, theta = {self.theta}, m = {self.batch_size:,})")


# Up to this many K every one is tried; above, the peak is found by bisecting the differences
# (ln P is unimodal in K: checked against the full scan in tests/protocol/accounting/test_crowding.py) and
# its neighbourhood scanned. Any K gives a valid bound: fewer tried can only make it weaker.
_ALL_K = 64
_AROUND = 8


def _log_probability(n: int, theta: int, m: int, k: int) -> float:
    """ln of the probability that u is sampled and each of the K balanced groups of the n - r
    users gets exactly theta - 1 seats (the r lone users all sampled)."""
    q, extra = divmod(n - (m - 1 - k * (theta - 1)), k)
    log_ways = extra * log_comb(q + 1, theta - 1) + (k - extra) * log_comb(q, theta - 1)
    return math.log(m) - math.log(n + 1) + log_ways - log_comb(n, m - 1)


def _candidate_ks(most: int, score: Callable[[int], float]) -> range:
    if most <= _ALL_K:
        return range(1, most + 1)
    lo, hi = 1, most  # the first k with score(k) >= score(k + 1) is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if score(mid) >= score(mid + 1):
            hi = mid
        else:
            lo = mid + 1
    return range(max(1, lo - _AROUND), min(most, lo + _AROUND) + 1)


def crowding_bound(n: int, theta: int, batch_size: int) -> CrowdingBound:
    """The largest K-fill bound for n users (without u), threshold theta and m = ``batch_size``.

    K runs over 1 .. floor((m - 1)/(theta - 1)) (above 64 of them, the peak of the unimodal
    ln P(K) by bisection and its neighbourhood); each K's groups split the n - r users as
    evenly as possible. None exists (delta 0) when theta < 2 (u's own vote would publish), m < theta
    (no round publishes anything), or n < m.

    Raises:
      ValueError: non-integers, n < 1, theta < 1 or m < 1.
    """
    n = check_int("n", n, 1)
    theta = check_int("theta", theta, 1)
    m = check_int("batch_size", batch_size, 1)
    best: Optional[Tuple[float, int]] = None  # (ln delta, K)
    if theta >= 2 and m >= theta and n >= m:
        def score(k: int) -> float:
            return _log_probability(n, theta, m, k)

        for k in _candidate_ks((m - 1) // (theta - 1), score):
            log_p = score(k)
            if best is None or log_p > best[0]:
                best = (log_p, k)
    if best is None:
        return CrowdingBound(0.0, n, theta, m)
    k = best[1]
    alone = m - 1 - k * (theta - 1)
    return CrowdingBound(min(1.0, math.exp(best[0])), n, theta, m, k, (n - alone) // k, alone, min(0.0, best[0]))


def neighbours_bound(n: int, theta: int, batch_size: int) -> CrowdingBound:
    """The larger of the bounds for a plan at n whose neighbour adds a user (n, n + 1) or whose
    data set is the one with the user (n - 1, n): both pairs run the plan's m."""
    pairs = [crowding_bound(n, theta, batch_size)]
    if n > 1:
        pairs.append(crowding_bound(n - 1, theta, batch_size))
    return max(pairs, key=lambda b: b.log_delta)
