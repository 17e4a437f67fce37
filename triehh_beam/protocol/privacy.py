"""Theorem 1 of TrieHH: the (epsilon, delta) a run spends, and simple composition.

TrieHH adds no noise: a run over ``n`` users with batch size ``m = gamma * sqrt(n)``, vote
threshold ``theta`` and at most ``L`` rounds is (epsilon, delta)-DP with user-level adjacency
(Theorem 1 of the TrieHH paper, restated in docs/protocol.md §1) when
``4 <= theta <= sqrt(n)`` and ``1 <= gamma <= sqrt(n) / (theta + 1)``, with
``epsilon = L * ln(1 + 1 / (sqrt(n) / (gamma * theta) - 1)) = -L * ln(1 - m * theta / n)`` and
``delta = (theta - 2) / ((theta - 3) * theta!)``; ``theorem1`` evaluates it (refusing, with
``PrivacyConditionError``, parameters it does not cover), ``theorem1_violations`` names the
conditions that fail, and ``compose`` adds up the spends of several runs over the same users.
Choosing theta and m for a target lives in :mod:`triehh_beam.protocol.planner`. Pure Python
(math, fractions); no Beam.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from fractions import Fraction
from typing import Iterable, List, Optional, Tuple, Union

__all__ = [
    "DPGuarantee",
    "PrivacyConditionError",
    "compose",
    "exact",
    "theorem1",
    "theorem1_delta",
    "theorem1_violations",
]


class PrivacyConditionError(ValueError):
    """Theorem 1 does not apply to these parameters.

    Attributes:
      violations: one line per failed condition, each naming the condition and the numbers.
    """

    def __init__(self, violations: Tuple[str, ...]):
        self.violations = tuple(violations)
        super().__init__("Theorem 1 does not apply: " + "; ".join(self.violations))


# --------------------------------------------------------------------------------------------
# Validation helpers (one-line ValueError messages).


def exact(value: float, bound: Optional[float] = None) -> str:
    """``value`` as a refusal shows it, never rounded across what it is compared with.

    Without ``bound`` (a value the user gave): ``{:g}`` when that reads back as the same number,
    else every digit it takes (``repr``), so that 1.0000001 is never shown as 1. With ``bound``
    (a computed value shown beside the bound it exceeds): the fewest significant digits, from
    6, that keep its order with ``bound`` (4/3 is 1.33333 beside 1; 1.0000001 stays 1.0000001).
    """
    if bound is None:
        short = f"{value:g}"
        return short if float(short) == value else repr(float(value))
    for digits in range(6, 18):
        shown = f"{value:.{digits}g}"
        if (float(shown) > bound) == (value > bound) and (float(shown) < bound) == (value < bound):
            return shown
    return repr(float(value))


def _check_int(name: str, value, minimum: int, maximum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def _check_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# Theorem 1.


@dataclasses.dataclass(frozen=True)
class DPGuarantee:
    """An (epsilon, delta)-DP guarantee or spend. Unpacks as ``epsilon, delta = guarantee``.

    Raises:
      ValueError: for a negative or non-finite epsilon or delta (a delta >= 1 is allowed: it is
        what composing many spends can give, and it is vacuous).
    """

    epsilon: float
    delta: float

    def __post_init__(self):
        for name in ("epsilon", "delta"):
            value = _check_real(name, getattr(self, name))
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value:g}")
            object.__setattr__(self, name, value)

    def __iter__(self):
        return iter((self.epsilon, self.delta))


def theorem1_delta(theta: int) -> float:
    """``delta(theta) = (theta - 2) / ((theta - 3) * theta!)``, for an integer ``theta >= 4``.

    Raises:
      ValueError: for a non-integer theta or theta < 4 (the formula needs theta > 3).
    """
    theta = _check_int("theta", theta, 4)
    if theta <= 1000:
        return float(_delta_fraction(theta))
    log_delta = math.log(theta - 2) - math.log(theta - 3) - math.lgamma(theta + 1)
    return math.exp(log_delta)  # underflows to 0.0, which is what it is


@functools.lru_cache(maxsize=4096)
def _delta_fraction(theta: int) -> Fraction:
    return Fraction(theta - 2, (theta - 3) * math.factorial(theta))


def _epsilon_from_ratio(max_length: int, ratio: float) -> float:
    """``-L * ln(1 - ratio)`` with ``ratio = m * theta / n = gamma * theta / sqrt(n)``."""
    if ratio >= 1.0:
        return math.inf
    return -max_length * math.log1p(-ratio)


def theorem1_violations(
    n: int,
    theta: int,
    *,
    batch_size: Optional[int] = None,
    gamma: Optional[float] = None,
) -> Tuple[str, ...]:
    """The conditions of Theorem 1 that fail, one descriptive line each (empty when it applies).

    Give exactly one of ``batch_size`` (m, then gamma = m / sqrt(n) and the conditions are
    checked in exact integer arithmetic) or ``gamma``.

    Raises:
      ValueError: for invalid arguments (non-integers, n < 1, m < 0, gamma < 0, both or
        neither of batch_size and gamma).
    """
    n = _check_int("n", n, 1)
    theta = _check_int("theta", theta, 1)
    if (batch_size is None) == (gamma is None):
        raise ValueError("give exactly one of batch_size and gamma")
    sqrt_n = math.sqrt(n)
    failed: List[str] = []
    if theta < 4:
        failed.append(f"theta >= 4 fails (theta = {theta})")
    if theta * theta > n:
        failed.append(f"theta <= sqrt(n) fails (theta = {theta} > sqrt(n) = {sqrt_n:.4g}, n = {n})")
    if batch_size is not None:
        m = _check_int("batch_size", batch_size, 0)
        g = m / sqrt_n
        if m * m < n:
            failed.append(
                f"gamma >= 1 fails (gamma = m/sqrt(n) = {m}/{sqrt_n:.4g} = {g:.4g} < 1, n = {n})"
            )
        if m * (theta + 1) > n:
            failed.append(
                f"gamma <= sqrt(n)/(theta+1) fails (gamma = m/sqrt(n) = {g:.4g} > "
                f"{sqrt_n / (theta + 1):.4g}, n = {n}, theta = {theta})"
            )
    else:
        g = _check_real("gamma", gamma)
        if g < 0:
            raise ValueError(f"gamma must be >= 0, got {g:g}")
        if g < 1.0:
            failed.append(f"gamma >= 1 fails (gamma = {g:.4g} < 1)")
        if g * (theta + 1) > sqrt_n:
            failed.append(
                f"gamma <= sqrt(n)/(theta+1) fails (gamma = {g:.4g} > "
                f"{sqrt_n / (theta + 1):.4g}, n = {n}, theta = {theta})"
            )
    return tuple(failed)


def theorem1(
    n: int,
    theta: int,
    max_length: int,
    *,
    batch_size: Optional[int] = None,
    gamma: Optional[float] = None,
) -> DPGuarantee:
    """The (epsilon, delta) of Theorem 1 for ``n`` users, threshold ``theta``, ``L`` rounds.

    Args:
      n: the population size.
      theta: the vote threshold.
      max_length: L, the maximum sequence length in units (the number of rounds).
      batch_size: m, the users sampled per round; or
      gamma: m / sqrt(n) directly (give exactly one of the two).

    Raises:
      PrivacyConditionError: a condition of Theorem 1 fails (4 <= theta <= sqrt(n),
        1 <= gamma <= sqrt(n)/(theta+1)); the message names each failed condition with numbers.
      ValueError: for invalid arguments.
    """
    max_length = _check_int("max_length", max_length, 1)
    violations = theorem1_violations(n, theta, batch_size=batch_size, gamma=gamma)
    if violations:
        raise PrivacyConditionError(violations)
    if batch_size is not None:
        ratio = batch_size * theta / n
    else:
        ratio = float(gamma) * theta / math.sqrt(n)
    return DPGuarantee(_epsilon_from_ratio(max_length, ratio), theorem1_delta(theta))


def compose(spends: Iterable[Union[DPGuarantee, Tuple[float, float]]]) -> DPGuarantee:
    """Basic sequential composition: epsilons add up, deltas add up.

    Args:
      spends: guarantees (or ``(epsilon, delta)`` pairs) of runs over the same users.

    Raises:
      ValueError: for a negative or non-finite epsilon or delta.
    """
    total_eps = 0.0
    total_delta = 0.0
    for spend in spends:
        eps, delta = spend if isinstance(spend, DPGuarantee) else DPGuarantee(*spend)
        total_eps += eps
        total_delta += delta
    return DPGuarantee(total_eps, total_delta)
