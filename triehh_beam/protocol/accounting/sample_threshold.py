"""Sample-and-threshold (TrieHH++, docs/protocol.md §2): the paper's accountant of one round, with
``p_s = alpha (1 - e^(-eps_r))`` and ``delta_r = exp(-C_alpha tau)`` (``sample_threshold``,
refusing parameters outside the theorem with ``SampleThresholdConditionError``), L rounds by basic
composition, and the worst-case utility analogous to Proposition 1 (``discovery_probability``,
``min_holders``). Choosing alpha and tau is :mod:`triehh_beam.protocol.planning.sample_threshold_planner`."""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Tuple

from triehh_beam.protocol.accounting.privacy import DPGuarantee, compose
from triehh_beam.protocol.checks import ConditionError, check_int, check_real
from triehh_beam.protocol.search import first_true_doubling

__all__ = [
    "MAX_ROUND_EPSILON",
    "MAX_TAU",
    "SampleThresholdConditionError",
    "SampleThresholdGuarantee",
    "c_alpha",
    "discovery_probability",
    "min_holders",
    "round_delta",
    "sample_threshold",
    "sample_threshold_violations",
    "sampling_probability",
    "survival_probability",
]

#: The theorem covers eps_r <= 1 per round; above it there is no guarantee, not a weaker one.
MAX_ROUND_EPSILON = 1.0
#: The largest threshold either planner searches (``sample_threshold_planner``, ``exact_planner``).
#: The best tau grows like ln(L / delta): the bound's planner chooses 841 at delta = 1e-300 over
#: L = 40 rounds, the exact planner 323 at delta = 1e-100 in one release; 10,000 leaves a wide
#: margin and keeps the exact planner (one accountant's search per tau) bounded.
MAX_TAU = 10_000
_MAX_HOLDERS = 2**53


class SampleThresholdConditionError(ConditionError):
    """The sample-and-threshold theorem does not apply (``violations``: one line per failed condition)."""

    theorem = "the sample-and-threshold theorem"


def c_alpha(alpha: float) -> float:
    """``C_alpha = ln(1/alpha) - 1/(1 + alpha)``: decreasing in alpha, positive below ~0.517.

    Raises:
      ValueError: alpha is not a number in (0, 1].
    """
    alpha = _check_alpha(alpha)
    return -math.log(alpha) - 1.0 / (1.0 + alpha)


def sampling_probability(alpha: float, epsilon_round: float) -> float:
    """``p_s = alpha * (1 - e^(-eps_r))``, each user's chance to be in a round's sample.

    Raises:
      ValueError: alpha outside (0, 1] or eps_r <= 0 (the theorem's other conditions are
        ``sample_threshold_violations``'s business).
    """
    alpha = _check_alpha(alpha)
    epsilon_round = check_real("epsilon_round", epsilon_round)
    if epsilon_round <= 0:
        raise ValueError(f"epsilon_round must be > 0, got {epsilon_round:g}")
    return alpha * -math.expm1(-epsilon_round)


def round_delta(alpha: float, tau: int) -> float:
    """``delta_r = exp(-C_alpha * tau)`` (meaningful only where ``C_alpha > 0``)."""
    tau = check_int("tau", tau, 1)
    return math.exp(-c_alpha(alpha) * tau)


def _check_alpha(alpha) -> float:
    alpha = check_real("alpha", alpha)
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
    return alpha


def sample_threshold_violations(alpha: float, epsilon_round: float, tau: int) -> Tuple[str, ...]:
    """The theorem's conditions that fail, one line each (empty when it applies).

    Raises:
      ValueError: for arguments that are not numbers, a non-integer tau, or eps_r <= 0.
    """
    alpha = check_real("alpha", alpha)
    epsilon_round = check_real("epsilon_round", epsilon_round)
    tau = check_int("tau", tau, 0)
    if epsilon_round <= 0:
        raise ValueError(f"epsilon_round must be > 0, got {epsilon_round:g}")
    failed: List[str] = []
    if not 0.0 < alpha <= 1.0:
        failed.append(f"0 < alpha <= 1 fails (alpha = {alpha:g})")
    elif c_alpha(alpha) <= 0:
        failed.append(f"C_alpha = ln(1/alpha) - 1/(1+alpha) > 0 fails (alpha = {alpha:.6g} gives "
                      f"C_alpha = {c_alpha(alpha):.4g}; it needs alpha below about 0.517)")
    if epsilon_round > MAX_ROUND_EPSILON:
        failed.append(f"eps_r <= 1 fails (eps_r = {epsilon_round:.6g}): the theorem gives no "
                      f"guarantee above it")
    if tau < 1:
        failed.append(f"tau >= 1 fails (tau = {tau})")
    return tuple(failed)


@dataclasses.dataclass(frozen=True)
class SampleThresholdGuarantee:
    """What sample-and-threshold spends: per round, and over ``rounds`` rounds composed.

    Attributes:
      alpha, tau, epsilon_round, rounds: the parameters.
      sampling_probability: ``p_s = alpha (1 - e^(-eps_r))``.
      c_alpha: ``ln(1/alpha) - 1/(1 + alpha)``.
      per_round: ``(eps_r, exp(-C_alpha tau))``.
      total: ``rounds`` copies of ``per_round``, basic composition.
    """

    alpha: float
    tau: int
    epsilon_round: float
    rounds: int
    sampling_probability: float
    c_alpha: float
    per_round: DPGuarantee
    total: DPGuarantee

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["per_round"] = {"epsilon": self.per_round.epsilon, "delta": self.per_round.delta}
        out["total"] = {"epsilon": self.total.epsilon, "delta": self.total.delta}
        return out


def sample_threshold(alpha: float, epsilon_round: float, tau: int, rounds: int = 1) -> SampleThresholdGuarantee:
    """The (eps, delta) of ``rounds`` sample-and-threshold rounds (docs/protocol.md §2).

    Args:
      alpha: the sampling factor, ``0 < alpha <= 1`` with ``C_alpha > 0``.
      epsilon_round: eps_r, each round's epsilon, ``0 < eps_r <= 1``.
      tau: the threshold, an integer >= 1.
      rounds: L, the rounds over the same users (1 for whole items, no trie).

    Raises:
      SampleThresholdConditionError: a condition of the theorem fails (each named, with numbers).
      ValueError: for invalid arguments.
    """
    rounds = check_int("rounds", rounds, 1)
    violations = sample_threshold_violations(alpha, epsilon_round, tau)
    if violations:
        raise SampleThresholdConditionError(violations)
    per_round = DPGuarantee(float(epsilon_round), round_delta(alpha, tau))
    return SampleThresholdGuarantee(
        alpha=float(alpha),
        tau=int(tau),
        epsilon_round=float(epsilon_round),
        rounds=rounds,
        sampling_probability=sampling_probability(alpha, epsilon_round),
        c_alpha=c_alpha(alpha),
        per_round=per_round,
        total=compose([per_round] * rounds),
    )


# --------------------------------------------------------------------------------------------
# Utility: the worst case, analogous to Proposition 1.


def _check_probability(name: str, value, *, open_low: bool = True) -> float:
    value = check_real(name, value)
    if not ((value > 0.0 if open_low else value >= 0.0) and value <= 1.0):
        raise ValueError(f"{name} must be in {'(0, 1]' if open_low else '[0, 1]'}, got {value!r}")
    return value


def survival_probability(count: int, sample_probability: float, tau: int, share: float = 1.0) -> float:
    """``P(X >= tau)``, ``X ~ Binomial(count, p_s * share)``: one round's survival of an item
    held by ``count`` users that shares no prefix with another (each holder sampled with
    probability ``p_s`` and then voting for it with probability ``share``, independently).

    Raises:
      ValueError: for arguments out of range.
    """
    from scipy.stats import binom  # local: the accountant above needs no SciPy

    count = check_int("count", count, 0)
    sample_probability = _check_probability("sample_probability", sample_probability, open_low=False)
    tau = check_int("tau", tau, 1)
    share = _check_probability("share", share)
    if count < tau:
        return 0.0
    return float(min(1.0, max(0.0, binom.sf(tau - 1, count, sample_probability * share))))


def discovery_probability(count: int, sample_probability: float, tau: int, length: int,
                          share: float = 1.0) -> float:
    """``survival_probability ** length``: rounds sample independently (keyed per round).

    Raises:
      ValueError: for arguments out of range.
    """
    length = check_int("length", length, 1)
    return survival_probability(count, sample_probability, tau, share) ** length


def min_holders(probability: float, sample_probability: float, tau: int, length: int,
                share: float = 1.0) -> Optional[int]:
    """The fewest holders discovered with at least ``probability`` (worst case), or None.

    The votes are nondecreasing in the holders, so an exponential search and an integer
    bisection are exact. None when no count up to 2^53 reaches it (``p_s = 0``).

    Raises:
      ValueError: for arguments out of range.
    """
    probability = _check_probability("probability", probability)

    def ok(count: int) -> bool:
        return discovery_probability(count, sample_probability, tau, length, share) >= probability

    # ok(tau - 1) is False: fewer holders than tau never survive.
    return first_true_doubling(ok, tau - 1, max(tau, 1), _MAX_HOLDERS)
