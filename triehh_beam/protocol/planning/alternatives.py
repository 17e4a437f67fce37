"""The honest ways out of an infeasible TrieHH target (docs/protocol.md §1, "Choosing
parameters"), each certified by the same feasibility test as the plan itself
(:func:`triehh_beam.protocol.planning.parameters.evaluate`) and tight at the resolution it reports: lower
theta (accepting a larger delta), raise (or, when epsilon/L is too large, lower) epsilon, or
raise the population."""

from __future__ import annotations

import dataclasses
import functools
import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Callable, List, Optional, Tuple

from triehh_beam.protocol.accounting.privacy import theorem1_delta
from triehh_beam.protocol.planning.parameters import (MAX_POPULATION, Evaluation, batch_size_for,
                                                      crowding_violation, delta_theta, evaluate,
                                                      evaluate_rule, rule_theta, theta_ceiling)
from triehh_beam.protocol.search import first_true, first_true_doubling

__all__ = ["ALTERNATIVE_KINDS", "Alternative", "alternatives_for"]

ALTERNATIVE_KINDS = ("lower_theta", "raise_epsilon", "lower_epsilon", "raise_population")

# Alternatives for epsilon are rounded *up* to this many significant digits (more if needed).
_EPSILON_DIGITS = 3


@dataclasses.dataclass(frozen=True)
class Alternative:
    """An honest way out of an infeasible target, with the numbers Theorem 1 certifies.

    Attributes:
      kind: ``"lower_theta"`` (keep epsilon and n, accept a larger delta), ``"raise_epsilon"``
        (keep delta and n), ``"lower_epsilon"`` (keep delta and n: the target epsilon is so
        large that the rule's theta >= e^(epsilon/L) - 1 does not fit, a smaller one does) or
        ``"raise_population"`` (keep epsilon and delta).
      description: one line for people.
      n, target_epsilon, target_delta: the target this alternative plans for.
      theta, gamma, batch_size: its parameters (gamma before flooring m, as in the rule).
      epsilon, delta: what Theorem 1 gives at the floored batch size.
      step: the resolution of a searched quantity: asking for ``target_epsilon - step``
        (raise_epsilon) or ``n - step`` users (raise_population) is infeasible. None for
        lower_theta.
    """

    kind: str
    description: str
    n: int
    target_epsilon: float
    target_delta: float
    theta: int
    gamma: float
    batch_size: int
    epsilon: float
    delta: float
    step: Optional[float] = None

    def __post_init__(self):
        if self.kind not in ALTERNATIVE_KINDS:
            raise ValueError(
                f"kind must be one of {', '.join(ALTERNATIVE_KINDS)}, got {self.kind!r}"
            )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# What each search returns: the alternative, or None and a note saying why there is none.
_Found = Tuple[Optional[Alternative], Optional[str]]


def alternatives_for(
    rule: str, n: int, epsilon: float, delta: float, max_length: int
) -> Tuple[Tuple[Alternative, ...], Tuple[str, ...]]:
    """The alternatives that exist for an infeasible target, and notes on those that do not.

    Args:
      rule: ``"authors"`` or ``"corollary1"`` (already validated).
      n, epsilon, delta, max_length: the target (already validated, see ``PrivacyTarget``).

    Returns:
      ``(alternatives, notes)``: in the order lower theta, raise (or lower) epsilon, raise
      population; a note says why a kind is missing.
    """
    found: List[Alternative] = []
    notes: List[str] = []
    for search in (_lower_theta, _raise_epsilon, _raise_population):
        alternative, note = search(rule, n, epsilon, delta, max_length)
        if alternative is not None:
            found.append(alternative)
        if note:
            notes.append(note)
    return tuple(found), tuple(notes)


def _found(
    kind: str, description: str, n: int, epsilon: float, delta: float, ev: Evaluation,
    step: Optional[float] = None,
) -> _Found:
    """A search's answer: the alternative planned for (n, epsilon, delta) with ``ev``'s numbers."""
    return Alternative(
        kind=kind,
        description=description,
        n=n,
        target_epsilon=epsilon,
        target_delta=delta,
        theta=ev.theta,
        gamma=ev.gamma,
        batch_size=ev.batch_size,
        epsilon=ev.guarantee.epsilon,
        delta=ev.guarantee.delta,
        step=step,
    ), None


def _lower_theta(rule: str, n: int, epsilon: float, delta: float, max_length: int) -> _Found:
    """Keep epsilon and n; the largest theta <= floor(THETACEIL) Theorem 1 accepts, its delta.

    Usually floor(THETACEIL) itself; lower only when flooring m pushes gamma just below 1.
    The rule's own minimum theta (5 or 10) does not apply: only Theorem 1's theta >= 4. When
    the rule's theta came from epsilon (theta >= e^(epsilon/L) - 1), not from delta, the lower
    theta may even keep delta within the target.
    """
    ceiling = theta_ceiling(n, epsilon, max_length)
    top = min(math.floor(ceiling), rule_theta(rule, epsilon, delta, max_length) - 1)
    if top < 4:
        return None, (
            f"lowering theta cannot help: THETACEIL = {ceiling:.4g} < 4, Theorem 1's smallest theta"
        )
    for theta in range(top, 3, -1):
        # The guarantee is delta(theta) when that exceeds the target: evaluate against it.
        new_delta = max(theorem1_delta(theta), delta)
        if new_delta >= 1.0:
            break
        ev = evaluate(n, epsilon, new_delta, max_length, theta)
        if ev.batch_size * (theta + 1) > n:
            break  # gamma <= sqrt(n)/(theta+1) fails, and only gets worse as theta decreases
        if not ev.feasible:
            continue  # gamma >= 1 missed by flooring m: a smaller theta has a larger m
        if new_delta > delta:
            effect = f"but delta grows to {ev.guarantee.delta:.4g}"
        else:
            effect = f"and delta(theta) {_format_delta(ev.guarantee.delta)} is within the target"
        return _found("lower_theta", f"lower theta to {theta} (<= THETACEIL = {ceiling:.4g}): keeps "
                      f"epsilon = {epsilon:g} and n = {n}, {effect}", n, epsilon, new_delta, ev)
    return None, (
        f"lowering theta cannot help: no theta <= {top} satisfies Theorem 1 at epsilon = "
        f"{epsilon:g}, n = {n}"
    )


def _format_delta(delta: float) -> str:
    """``= 1.2e-11``, or ``< 1e-308`` for a delta that underflowed to 0."""
    return f"= {delta:.4g}" if delta > 0 else "< 1e-308"


def _ceil_significant(x: float, digits: int) -> Tuple[Decimal, Decimal]:
    """``x`` rounded up to ``digits`` significant digits, and one unit of that last digit."""
    unit = Decimal(1).scaleb(math.floor(math.log10(x)) - digits + 1)
    return (Decimal(x) / unit).to_integral_value(rounding=ROUND_CEILING) * unit, unit


def _raise_epsilon(rule: str, n: int, epsilon: float, delta: float, max_length: int) -> _Found:
    """Keep delta and n; the smallest epsilon the same feasibility test accepts.

    With theta fixed at the delta-driven value, the batch size grows with epsilon, so
    feasibility is monotone in epsilon up to eps_top = L ln(1 + theta_delta), where the rule
    starts raising theta (beyond it the batch shrinks again: if eps_top fails, no epsilon
    works). Bisection finds the boundary; the answer is rounded up to 3 significant digits and
    checked so that one unit less in the last digit is infeasible.
    """
    theta_d = delta_theta(rule, delta)
    eps_top = max_length * math.log1p(theta_d)
    while math.ceil(math.expm1(eps_top / max_length)) > theta_d:
        eps_top = math.nextafter(eps_top, 0.0)

    def feasible(eps: float) -> bool:
        return evaluate_rule(rule, n, eps, delta, max_length).feasible

    if not feasible(eps_top):
        return None, (
            f"raising epsilon cannot help at delta = {delta:.4g}: theta = {theta_d} needs "
            f"n >= (theta+1)^2 = {(theta_d + 1) ** 2} users at any epsilon (n = {n})"
        )
    lo, hi = 0.0, eps_top
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    for digits in range(_EPSILON_DIGITS, 16):
        value, unit = _ceil_significant(hi, digits)
        if float(value) <= eps_top and feasible(float(value)):
            break
    else:
        value, unit = Decimal(hi), Decimal(hi - lo)
    # Tight at the reported resolution: one unit less must fail (same test).
    while value - unit > 0 and feasible(float(value - unit)):
        value -= unit
    value, unit = float(value), float(unit)
    if value < epsilon:
        return _lower_epsilon(rule, n, epsilon, delta, max_length, value, eps_top, feasible)
    return _found("raise_epsilon", f"raise epsilon to {value:g} (the smallest, to {unit:g}, that works at "
                  f"delta = {delta:.4g}, n = {n}, L = {max_length})", n, value, delta,
                  evaluate_rule(rule, n, value, delta, max_length), step=unit)


def _lower_epsilon(
    rule: str,
    n: int,
    epsilon: float,
    delta: float,
    max_length: int,
    eps_min: float,
    eps_top: float,
    feasible: Callable[[float], bool],
) -> _Found:
    """The target epsilon is above eps_top = L ln(1 + theta_delta): spend less.

    Beyond eps_top the rule raises theta to e^(epsilon/L) - 1 and the batch shrinks, so a
    larger epsilon can be infeasible while a smaller one works; an (eps', delta) plan with
    eps' < epsilon meets the target too. The best is eps_top (largest batch), rounded down to
    3 significant digits (more if needed).
    """
    for digits in range(_EPSILON_DIGITS, 16):
        unit = Decimal(1).scaleb(math.floor(math.log10(eps_top)) - digits + 1)
        value = float((Decimal(eps_top) / unit).to_integral_value(rounding=ROUND_FLOOR) * unit)
        if value >= eps_min and feasible(value):
            break
    else:
        value = eps_top
    ev = evaluate_rule(rule, n, value, delta, max_length)
    return _found("lower_epsilon", f"spend less: epsilon = {value:g} works at delta = {delta:.4g}, n = {n}, "
                  f"L = {max_length} (so does any epsilon in [{eps_min:g}, {value:g}]); above "
                  f"L*ln(1 + {ev.theta}) = {eps_top:.4g} the rule raises theta to e^(epsilon/L) - 1 "
                  f"and the batch shrinks", n, value, delta, ev)


def _past_crowding(candidate: int, theta: int, max_length: int, epsilon: float, delta: float,
                   last_with_m_at_most: Callable[[int], int]) -> int:
    """The first n >= ``candidate`` from which the crowding guard refuses no batch size m.

    The bound is largest at a plateau's first n (it falls with n at a fixed m) and periodic in m
    (largest where theta - 1 divides m - 1), falling from period to period: the answer is the
    start of the first period of theta - 1 clean plateaus, found by doubling and bisection over
    m, then confirmed over one more period (scanned one plateau at a time from there).
    """
    period = max(1, theta - 1)
    last_with_m_at_most = functools.lru_cache(maxsize=None)(last_with_m_at_most)

    @functools.lru_cache(maxsize=None)
    def crowded(m: int) -> bool:
        start = max(candidate, last_with_m_at_most(m - 1) + 1)
        return last_with_m_at_most(m) >= start and crowding_violation(
            start, theta, m, max_length, theorem1_delta(theta))[1] is not None

    def clean_from(m: int) -> bool:
        return not any(crowded(k) for k in range(m, m + period))

    first_m = batch_size_for(candidate, epsilon, max_length, theta)
    if clean_from(first_m):
        m = first_m
    else:
        hi = first_true_doubling(clean_from, first_m, first_m + period,
                                 batch_size_for(MAX_POPULATION, epsilon, max_length, theta))
        if hi is None:
            return MAX_POPULATION + 1
        m = hi
    clean, k = 0, m
    while clean < 2 * period:
        if crowded(k):
            m, clean = k + 1, 0
        else:
            clean += 1
        k += 1
    return max(candidate, last_with_m_at_most(m - 1) + 1)


def _raise_population(rule: str, n: int, epsilon: float, delta: float, max_length: int) -> _Found:
    """Keep (epsilon, delta); the smallest N such that every population >= N works.

    theta does not depend on n; the conditions that do are gamma >= 1, i.e. m(n)^2 >= n with
    m(n) = floor(n s / theta) nondecreasing, and the crowding guard (``_past_crowding``). Because
    m is floored, feasibility can flicker just above the continuous bound (theta/s)^2; the answer
    is the end of the flicker: N - 1 is infeasible and everything from N on is feasible.
    """
    theta = rule_theta(rule, epsilon, delta, max_length)

    def feasible(pop: int) -> bool:
        return evaluate(pop, epsilon, delta, max_length, theta).feasible

    def feasible_but_crowding(pop: int) -> bool:  # every condition but the crowding guard
        ev = evaluate(pop, epsilon, delta, max_length, theta)
        return ev.feasible or (ev.crowded and len(ev.violations) == 1)

    def m_of(pop: int) -> int:
        return batch_size_for(pop, epsilon, max_length, theta)

    def last_with_m_at_most(k: int) -> int:
        # m_of(0) = 0 <= k < m_of(MAX_POPULATION + 1), and m is nondecreasing.
        return first_true(lambda pop: m_of(pop) > k, 0, MAX_POPULATION + 1) - 1

    if not feasible(MAX_POPULATION):
        return None, (
            f"no population up to 2^53 makes (epsilon={epsilon:g}, delta={delta:.4g}) feasible"
        )
    s = -math.expm1(-epsilon / max_length)
    c = theta / s  # m(n) ~ n / c; gamma >= 1 needs m(n) >= sqrt(n)
    # For k >= c + 3 the users with m(n) = k number at most ~c <= k, all n <= k^2: feasible.
    k = math.ceil(c) + 3
    while k > 0 and last_with_m_at_most(k) <= k * k:
        k -= 1
    candidate = last_with_m_at_most(k) + 1 if k > 0 else 1
    # Confirm with the plan's own test; move to the nearest tight point if floats disagree.
    while not feasible_but_crowding(candidate):
        candidate += 1
    while candidate > 1 and feasible_but_crowding(candidate - 1):
        candidate -= 1
    candidate = _past_crowding(candidate, theta, max_length, epsilon, delta, last_with_m_at_most)
    while not feasible(candidate):
        candidate += 1
    if candidate > MAX_POPULATION:
        return None, "no population up to 2^53 works"
    # The first n that works at all: the first n of the first plateau m(n) = k with n <= k^2.
    k = max(1, math.floor(c) - 3)
    while last_with_m_at_most(k - 1) + 1 > k * k:
        k += 1
    first = last_with_m_at_most(k - 1) + 1
    flicker = ""
    if first < candidate and feasible(first):
        flicker = (
            f"; n = {first} already works but some n in between do not, because m is floored"
        )
    return _found("raise_population", f"collect at least n = {candidate} users (from there on every n "
                  f"works at epsilon = {epsilon:g}, delta = {delta:.4g}, L = {max_length}{flicker})",
                  candidate, epsilon, delta, evaluate(candidate, epsilon, delta, max_length, theta), step=1)
