"""The exact (epsilon, delta) of one sample-and-threshold release (docs/protocol.md §2, "Exact
accounting"): ``release_delta`` is the worst case, over the other users reporting the same item,
of the hockey-stick divergence between one count with and without a user, searched up to a bound
beyond which Chernoff tails (``tail_bound``) cover the rest, so it is an upper bound on the
supremum; ``release_epsilon`` inverts it."""

from __future__ import annotations

import dataclasses
import math
from typing import Tuple

import numpy as np
from scipy import stats

from triehh_beam.protocol.checks import check_int, check_real

__all__ = [
    "ReleaseDelta",
    "add_excess",
    "count_delta",
    "release_delta",
    "release_epsilon",
    "remove_excess",
    "tail_bound",
]

#: The search over f stops once every larger f is bounded below this share of the worst found.
TAIL_SHARE = 1e-6
_FIRST_SPAN = 64
_MAX_SPAN = 1 << 16  # f values computed at once
_MAX_HOLDERS = 1 << 24


@dataclasses.dataclass(frozen=True)
class ReleaseDelta:
    """The delta of one release at ``epsilon``, and where it comes from.

    Attributes:
      epsilon, sample_probability, tau: the question.
      delta: ``max(worst excess found, tail)``: an upper bound on the supremum over f.
      worst_holders: the f (other reporters of the user's item) with the largest excess.
      searched_to: F: every f <= F was computed exactly.
      tail: the Chernoff bound on every f > F.
    """

    epsilon: float
    sample_probability: float
    tau: int
    delta: float
    worst_holders: int
    searched_to: int
    tail: float


def _check(epsilon, p, tau) -> Tuple[float, float, int]:
    epsilon = check_real("epsilon", epsilon)
    p = check_real("sample_probability", p)
    tau = check_int("tau", tau, 1)
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"sample_probability must be in (0, 1), got {p!r}")
    return epsilon, p, tau


def add_excess(epsilon: float, p: float, tau: int, holders: np.ndarray) -> np.ndarray:
    """``sum over outputs of (Q - e^eps P)^+`` for each f in ``holders`` (the user added).

    ``p b(K - 1; f, p) - (e^eps - 1) S(K; f, p)`` with ``K = max(tau, floor((f + 1) c) + 1)``:
    every term of the sum from K on is positive and none before it is (docs/protocol.md §2).
    """
    f = np.asarray(holders, dtype=np.float64)
    c = -math.expm1(math.log1p(-p) - epsilon)  # 1 - (1 - p) e^-eps
    first = np.maximum(float(tau), np.floor((f + 1.0) * c) + 1.0)
    out = p * stats.binom.pmf(first - 1.0, f, p) - math.expm1(epsilon) * stats.binom.sf(first - 1.0, f, p)
    out = np.where(first <= f + 1.0, out, 0.0)
    return np.maximum(out, 0.0)


def remove_excess(epsilon: float, p: float, tau: int, holders: np.ndarray) -> np.ndarray:
    """``sum over outputs of (P - e^eps Q)^+`` for each f in ``holders`` (the user removed).

    Zero whenever ``p <= 1 - e^-eps`` (``P / Q <= 1 / (1 - p)`` on every output). Otherwise the
    published terms are positive exactly for ``k < (f + 1) c'``, ``c' = 1 - e^eps (1 - p)``, up to
    ``M = ceil((f + 1) c') - 1``: ``[F(M; f) - F(tau - 1; f)] - e^eps [F(M; f + 1) - F(tau - 1;
    f + 1)]`` with ``F`` the binomial cdf, plus ``⊥``'s ``(F(tau - 1; f) - e^eps F(tau - 1; f +
    1))^+``.
    """
    f = np.asarray(holders, dtype=np.float64)
    if p <= -math.expm1(-epsilon):
        return np.zeros_like(f)
    scale = math.exp(epsilon)
    c = -math.expm1(epsilon + math.log1p(-p))
    last = np.minimum(np.ceil((f + 1.0) * c) - 1.0, f)
    below_without = stats.binom.cdf(tau - 1, f, p)
    below_with = stats.binom.cdf(tau - 1, f + 1.0, p)
    published = (stats.binom.cdf(last, f, p) - below_without) - scale * (stats.binom.cdf(last, f + 1.0, p) - below_with)
    published = np.where(last >= tau, np.maximum(published, 0.0), 0.0)
    return published + np.maximum(below_without - scale * below_with, 0.0)


def count_delta(epsilon: float, p: float, tau: int, holders: int) -> float:
    """delta(epsilon) of one count with ``holders`` other reporters: both directions' maximum.

    Raises:
      ValueError: for arguments out of range.
    """
    epsilon, p, tau = _check(epsilon, p, tau)
    holders = check_int("holders", holders, 0)
    one = np.array([holders])
    return max(float(add_excess(epsilon, p, tau, one)[0]), float(remove_excess(epsilon, p, tau, one)[0]))


def _kl(a: float, b: float) -> float:
    """KL divergence of Bernoulli(a) from Bernoulli(b), for a, b in [0, 1], b in (0, 1)."""
    out = 0.0
    if a > 0:
        out += a * math.log(a / b)
    if a < 1:
        out += (1 - a) * math.log((1 - a) / (1 - b))
    return out


def tail_bound(epsilon: float, p: float, tau: int, searched_to: int) -> float:
    """An upper bound on ``count_delta`` for every f > ``searched_to`` (Chernoff, module
    docstring); 1.0 when the bound does not apply yet (F too small).

    Raises:
      ValueError: for arguments out of range.
    """
    epsilon, p, tau = _check(epsilon, p, tau)
    big_f = check_int("searched_to", searched_to, 1)
    c = -math.expm1(math.log1p(-p) - epsilon)
    add = math.exp(-(big_f + 1) * _kl(c, p))  # c > p for every eps > 0: decreasing in f
    if epsilon == 0.0:
        add = 1.0
    if p <= -math.expm1(-epsilon):
        return add
    c_remove = -math.expm1(epsilon + math.log1p(-p))  # 1 - e^eps (1 - p) > 0
    reach = max((tau - 1) / big_f, c_remove * (1 + 1 / big_f))
    remove = math.exp(-big_f * _kl(reach, p)) if reach < p else 1.0
    return max(add, remove)


def release_delta(epsilon: float, sample_probability: float, tau: int, *,
                  above: float = math.inf) -> ReleaseDelta:
    """The exact delta(epsilon) of one sample-and-threshold release, worst case over f.

    Args:
      epsilon: >= 0.
      sample_probability: p, each user's chance to be in the sample, in (0, 1).
      tau: the threshold, an integer >= 1.
      above: stop as soon as some f's excess exceeds this: the answer is then only known to be
        above it (``delta`` is that f's excess, a lower bound; ``tail`` is nan). For searches
        that only ask "is delta <= x?".

    Raises:
      ValueError: for arguments out of range.
    """
    epsilon, p, tau = _check(epsilon, sample_probability, tau)
    low = tau - 1
    span = min(max(_FIRST_SPAN, int(4 * tau / p)), _MAX_SPAN)
    worst, worst_f, done = 0.0, low, low - 1
    while True:
        top = done + span
        holders = np.arange(done + 1, top + 1)
        excess = add_excess(epsilon, p, tau, holders)
        if p > -math.expm1(-epsilon) and not excess.max() > above:
            excess = np.maximum(excess, remove_excess(epsilon, p, tau, holders))
        i = int(np.argmax(excess))
        if excess[i] > worst:
            worst, worst_f = float(excess[i]), int(holders[i])
        done = top
        if worst > above:
            return ReleaseDelta(epsilon=epsilon, sample_probability=p, tau=tau, delta=worst,
                                worst_holders=worst_f, searched_to=done, tail=math.nan)
        tail = tail_bound(epsilon, p, tau, top)
        if tail <= TAIL_SHARE * worst or (worst == 0.0 and tail < 1e-300) or top >= _MAX_HOLDERS:
            break
        span = min(2 * span, _MAX_SPAN)
    return ReleaseDelta(epsilon=epsilon, sample_probability=p, tau=tau, delta=max(worst, tail),
                        worst_holders=worst_f, searched_to=done, tail=tail)


def release_epsilon(delta: float, sample_probability: float, tau: int) -> float:
    """The smallest epsilon (to 1e-9 relative, rounded up) whose ``release_delta`` is at most
    ``delta``; ``math.inf`` if none up to 50 is.

    Raises:
      ValueError: for arguments out of range.
    """
    delta = check_real("delta", delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")

    def ok(eps: float) -> bool:
        return release_delta(eps, sample_probability, tau, above=delta).delta <= delta

    hi = 1.0
    while not ok(hi):
        hi *= 2
        if hi > 50:
            return math.inf
    lo = 0.0
    while hi - lo > 1e-9 * hi:
        mid = (lo + hi) / 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
