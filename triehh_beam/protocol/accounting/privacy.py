"""Theorem 1 of TrieHH (docs/protocol.md §1): the (epsilon, delta) a run over ``n`` users with
batch size m, threshold theta and L rounds spends, the conditions it needs, and basic composition
of several runs over the same users. Choosing theta and m for a target is
:mod:`triehh_beam.protocol.planning.planner`."""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Iterable, List, Optional, Tuple, Union

from triehh_beam.protocol.accounting.composition import basic_composition
from triehh_beam.protocol.checks import ConditionError, check_int, check_real

__all__ = [
    "THEOREM1_STATUS",
    "DPGuarantee",
    "PrivacyConditionError",
    "compose",
    "delta_fraction",
    "epsilon_from_ratio",
    "exact",
    "log_theorem1_delta",
    "theorem1",
    "theorem1_delta",
    "theorem1_violations",
]


# What every TrieHH plan and release says of its guarantee (docs/protocol.md §1, Privacy).
THEOREM1_STATUS = (
    "Theorem 1 is the paper's bound, unproven for fixed-size sampling (m of n users): it is false "
    "near m ~ theta (n = 36, theta = 5, m = 6: one more user empties a round with probability 0.0225 "
    "> its delta 0.0125); plans whose crowding lower bound exceeds a tenth of delta per round are "
    "refused; TrieHH++ (--protocol triehh++) is certified exactly")


class PrivacyConditionError(ConditionError):
    """Theorem 1 does not apply to these parameters (``violations``: one line per failed condition)."""

    theorem = "Theorem 1"


# --------------------------------------------------------------------------------------------
# Showing numbers in refusals.


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
            value = check_real(name, getattr(self, name))
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
    theta = check_int("theta", theta, 4)
    if theta <= 1000:
        return float(delta_fraction(theta))
    return math.exp(log_theorem1_delta(theta))  # underflows to 0.0, which is what it is


def log_theorem1_delta(theta: int) -> float:
    """``ln delta(theta)``, finite where ``delta(theta)`` underflows (theta >= 4; unchecked)."""
    return math.log(theta - 2) - math.log(theta - 3) - math.lgamma(theta + 1)


@functools.lru_cache(maxsize=4096)
def delta_fraction(theta: int) -> Fraction:
    """``delta(theta)`` as an exact fraction (for ``theta >= 4``; unchecked)."""
    return Fraction(theta - 2, (theta - 3) * math.factorial(theta))


def epsilon_from_ratio(max_length: int, ratio: float) -> float:
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
    n = check_int("n", n, 1)
    theta = check_int("theta", theta, 1)
    if (batch_size is None) == (gamma is None):
        raise ValueError("give exactly one of batch_size and gamma")
    sqrt_n = math.sqrt(n)
    failed: List[str] = []
    if theta < 4:
        failed.append(f"theta >= 4 fails (theta = {theta})")
    if theta * theta > n:
        failed.append(f"theta <= sqrt(n) fails (theta = {theta} > sqrt(n) = {sqrt_n:.4g}, n = {n})")
    if batch_size is not None:
        m = check_int("batch_size", batch_size, 0)
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
        g = check_real("gamma", gamma)
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
    max_length = check_int("max_length", max_length, 1)
    violations = theorem1_violations(n, theta, batch_size=batch_size, gamma=gamma)
    if violations:
        raise PrivacyConditionError(violations)
    if batch_size is not None:
        ratio = batch_size * theta / n
    else:
        ratio = float(gamma) * theta / math.sqrt(n)
    return DPGuarantee(epsilon_from_ratio(max_length, ratio), theorem1_delta(theta))


def compose(spends: Iterable[Union[DPGuarantee, Tuple[float, float]]]) -> DPGuarantee:
    """Basic sequential composition: epsilons add up, deltas add up (``composition.basic_composition``).

    Args:
      spends: guarantees (or ``(epsilon, delta)`` pairs) of runs over the same users.

    Raises:
      ValueError: for a negative or non-finite epsilon or delta.
    """
    checked = [spend if isinstance(spend, DPGuarantee) else DPGuarantee(*spend) for spend in spends]
    return DPGuarantee(*basic_composition(checked))
