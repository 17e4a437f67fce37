"""Worst-case utility of TrieHH (Proposition 1, docs/protocol.md §1, "Utility"): an item of ``len``
units held by f of n users is found with probability ``P(X >= theta) ** len``, X the votes of
its holders among m sampled (hypergeometric, thinned by ``share`` when holders hold other items),
and the inverse questions a planner asks: ``min_frequency`` (the fewest holders found with
probability p) and ``min_population`` (the fewest users for a target)."""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Optional

import numpy as np

from triehh_beam.protocol.checks import check_int
from triehh_beam.protocol.planning import parameters, planner
from triehh_beam.protocol.planning.distributions import binom_sf, hypergeom_pmf, hypergeom_sf
from triehh_beam.protocol.search import first_true, first_true_doubling

__all__ = [
    "FrequencyRequirement",
    "PopulationRequirement",
    "count_for_fraction",
    "discovery_probability",
    "discovery_probability_for_fraction",
    "min_frequency",
    "min_frequency_for_plan",
    "min_population",
    "survival_probability",
]


def _check_unit_interval(name: str, value, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    low_ok = value >= 0.0 if allow_zero else value > 0.0
    if not (low_ok and value <= 1.0):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return value


def survival_probability(
    count: int, n: int, batch_size: int, theta: int, share: float = 1.0
) -> float:
    """``P(X >= theta)``, the votes X of one round for a sequence held by ``count`` users.

    ``X ~ Hypergeometric(n, count, batch_size)`` when each holder votes for it (``share`` 1,
    Algorithm 1); with ``share`` s < 1, ``X ~ Binomial(H, s)``, H that hypergeometric
    (docs/protocol.md §1, "Utility"), summed over H where it has mass (beyond 40 standard deviations of its
    mean it is left out, which can only lower the result: still a lower bound).

    Args:
      count: f, the number of users holding the sequence (0 <= f <= n).
      n: the population size.
      batch_size: m, the users sampled per round (0 <= m <= n).
      theta: the vote threshold (>= 1).
      share: the smallest share of its holders' records the sequence has, in (0, 1].

    Raises:
      ValueError: for arguments out of range.
    """
    n = check_int("n", n, 1)
    count = check_int("count", count, 0, n)
    batch_size = check_int("batch_size", batch_size, 0, n)
    theta = check_int("theta", theta, 1)
    share = _check_unit_interval("share", share)
    if theta > min(count, batch_size):
        return 0.0
    if share == 1.0:
        # (k, population, successes, draws); sf(k) = P(X > k).
        return float(min(1.0, max(0.0, hypergeom_sf(theta - 1, n, count, batch_size))))
    mean = batch_size * count / n
    spread = 40 * math.sqrt(mean) + 10
    low = max(theta, math.floor(mean - spread))
    high = min(count, batch_size, math.ceil(mean + spread))
    if low > high:
        return 0.0
    sampled = np.arange(low, high + 1)
    total = np.sum(hypergeom_pmf(sampled, n, count, batch_size) * binom_sf(theta - 1, sampled, share))
    return float(min(1.0, max(0.0, total)))


def discovery_probability(
    count: int, n: int, batch_size: int, theta: int, length: int, share: float = 1.0
) -> float:
    """Proposition 1: ``P(X >= theta) ** length``, the worst-case discovery probability.

    Args:
      count, n, batch_size, theta, share: as in ``survival_probability``.
      length: the sequence length in units, terminator included (>= 1).

    Raises:
      ValueError: for arguments out of range.
    """
    length = check_int("length", length, 1)
    return survival_probability(count, n, batch_size, theta, share) ** length


def count_for_fraction(fraction: float, n: int) -> int:
    """The number of users an item of frequency ``fraction`` has: ``ceil(fraction * n)``.

    Ceiling, because an item "of frequency at least phi" has at least that many holders (and
    Proposition 1 is increasing in the count). A product within 1e-9 of an integer counts as
    that integer, so float noise (0.07 * 100 = 7.000000000000001) does not add a user.

    Raises:
      ValueError: fraction outside [0, 1] or n < 1.
    """
    fraction = _check_unit_interval("fraction", fraction, allow_zero=True)
    n = check_int("n", n, 1)
    x = fraction * n
    nearest = round(x)
    if abs(x - nearest) <= 1e-9 * max(1.0, x):
        return min(int(nearest), n)
    return min(math.ceil(x), n)


def discovery_probability_for_fraction(
    fraction: float, n: int, batch_size: int, theta: int, length: int
) -> float:
    """``discovery_probability`` for an item held by ``count_for_fraction(fraction, n)`` users."""
    return discovery_probability(count_for_fraction(fraction, n), n, batch_size, theta, length)


@dataclasses.dataclass(frozen=True)
class FrequencyRequirement:
    """The fewest holders an item needs to be discovered with probability ``target``.

    Attributes:
      target: the probability asked for.
      count: the smallest number of holders reaching it.
      fraction: ``count / n``.
      probability: the discovery probability at ``count`` (>= target; at ``count - 1`` it is
        below target).
      n, batch_size, theta, length: the setting.
      share: the smallest share of its holders' records the item has (1: one item per user).
    """

    target: float
    count: int
    fraction: float
    probability: float
    n: int
    batch_size: int
    theta: int
    length: int
    share: float = 1.0

    def __post_init__(self):
        if not 0 <= self.count <= self.n:
            raise ValueError(f"count must be in [0, n], got {self.count}")

    @property
    def user_equivalents(self) -> float:
        """``count * share``: the holders counted by their share, for reading (not a bound)."""
        return self.count * self.share

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "user_equivalents": self.user_equivalents}


def min_frequency(
    probability: float, n: int, batch_size: int, theta: int, length: int, share: float = 1.0
) -> Optional[FrequencyRequirement]:
    """The smallest count f with ``discovery_probability(f, ..., share) >= probability``.

    The votes are nondecreasing in the number of holders (one more holder can only add a
    vote), so a bisection over the integers 0..n is exact.

    Returns:
      The requirement, or None when even ``f = n`` falls short (e.g. ``m < theta``).

    Raises:
      ValueError: probability outside (0, 1], or invalid setting.
    """
    probability = _check_unit_interval("probability", probability)
    n = check_int("n", n, 1)
    batch_size = check_int("batch_size", batch_size, 0, n)
    theta = check_int("theta", theta, 1)
    length = check_int("length", length, 1)
    share = _check_unit_interval("share", share)

    def prob(count: int) -> float:
        return discovery_probability(count, n, batch_size, theta, length, share)

    if prob(n) < probability:
        return None
    # prob(theta - 1) == 0 < probability (fewer holders than theta), prob(n) is enough.
    hi = first_true(lambda count: prob(count) >= probability, theta - 1, n)
    return FrequencyRequirement(
        target=probability,
        count=hi,
        fraction=hi / n,
        probability=prob(hi),
        n=n,
        batch_size=batch_size,
        theta=theta,
        length=length,
        share=share,
    )


def min_frequency_for_plan(
    plan: planner.Plan, probability: float, length: Optional[int] = None, share: float = 1.0
) -> Optional[FrequencyRequirement]:
    """``min_frequency`` at a plan's n, m and theta.

    Args:
      plan: a feasible ``Plan``.
      probability: the discovery probability wanted, in (0, 1].
      length: the item length in units with terminator; default L, the worst case.
      share: the smallest share of its holders' records the item has (1/K for holders of K
        items in equal counts); default 1, one item per user.

    Raises:
      ValueError: the plan is infeasible, or length is outside [1, L].
    """
    if not plan.feasible:
        raise ValueError("the plan is infeasible: it has no batch size to evaluate")
    length = plan.max_length if length is None else check_int("length", length, 1, plan.max_length)
    return min_frequency(probability, plan.n, plan.batch_size, plan.theta, length, share)


@dataclasses.dataclass(frozen=True)
class PopulationRequirement:
    """The population at which items of a given frequency are discovered with probability p.

    Attributes:
      n: the population found (see ``min_population`` for what "smallest" means).
      fraction, count: the item's frequency and its holders at ``n``.
      target, probability: the probability asked for and the one reached at ``n``.
      probability_below: the discovery probability at ``n - 1`` (0 when infeasible there).
      theta, batch_size, epsilon, delta: the plan at ``n``.
      rule, length: the planning rule and the item length used.
    """

    n: int
    fraction: float
    count: int
    target: float
    probability: float
    probability_below: float
    theta: int
    batch_size: int
    epsilon: float
    delta: float
    rule: str
    length: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _planned_probability(
    n: int, fraction: float, epsilon: float, delta: float, max_length: int, rule: str, length: int
):
    """(plan, probability) at population n; probability 0 when the plan is infeasible."""
    p = planner.plan(n, epsilon, delta, max_length, rule, with_alternatives=False)
    if not p.feasible:
        return p, 0.0
    count = count_for_fraction(fraction, n)
    return p, discovery_probability(count, n, p.batch_size, p.theta, length)


def min_population(
    fraction: float,
    probability: float,
    epsilon: float,
    delta: float,
    max_length: int,
    *,
    rule: str = "authors",
    length: Optional[int] = None,
) -> Optional[PopulationRequirement]:
    """How many users are needed to discover items of frequency ``fraction`` with ``probability``.

    At each candidate n the planner picks theta and m for (epsilon, delta, L) with ``rule``; an
    infeasible plan counts as probability 0. The item has ``count_for_fraction(fraction, n)``
    holders.

    Assumption (documented, not proven): the probability is nondecreasing in n. It is up to
    the flooring of m, the ceiling of the count and the flicker of feasibility near the
    smallest feasible n, each of which moves by at most one unit per step. The search is an
    exponential search followed by an integer bisection that keeps ``ok(lo) = False`` and
    ``ok(hi) = True``, so whatever the shape, the returned n is a transition point: the
    probability is >= target at n and < target at n - 1. It is the smallest such n when the
    assumption holds.

    Args:
      fraction: the item's frequency, in (0, 1].
      probability: the discovery probability wanted, in (0, 1].
      epsilon, delta, max_length: the privacy target and L.
      rule: the planner's rule (``"authors"`` or ``"corollary1"``).
      length: the item length in units with terminator; default L (the worst case).

    Returns:
      The requirement, or None when no population up to 2^53 reaches the target.

    Raises:
      ValueError: for invalid arguments.
    """
    fraction = _check_unit_interval("fraction", fraction)
    probability = _check_unit_interval("probability", probability)
    max_length = check_int("max_length", max_length, 1)
    length = max_length if length is None else check_int("length", length, 1, max_length)
    # Validate the privacy target once, with the planner's own messages.
    parameters.PrivacyTarget(1, epsilon, delta, max_length)
    parameters.rule_theta(rule, epsilon, delta, max_length)

    def ok(n: int) -> bool:
        return _planned_probability(n, fraction, epsilon, delta, max_length, rule, length)[1] >= (
            probability
        )

    hi = 1 if ok(1) else first_true_doubling(ok, 1, 2, parameters.MAX_POPULATION)
    if hi is None:
        return None
    found, reached = _planned_probability(hi, fraction, epsilon, delta, max_length, rule, length)
    below = 0.0
    if hi > 1:
        below = _planned_probability(hi - 1, fraction, epsilon, delta, max_length, rule, length)[1]
    return PopulationRequirement(
        n=hi,
        fraction=fraction,
        count=count_for_fraction(fraction, hi),
        target=probability,
        probability=reached,
        probability_below=below,
        theta=found.theta,
        batch_size=found.batch_size,
        epsilon=found.epsilon,
        delta=found.delta,
        rule=rule,
        length=length,
    )
