"""TrieHH's parameter rules (docs/protocol.md §1, "Choosing parameters"): the threshold theta a
rule picks for a target (epsilon, delta) over L rounds, the batch size m that spends epsilon, and
``evaluate``, the one feasibility test (Theorem 1 at the floored m) that the planner and the
search for alternatives share."""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Optional, Tuple

from triehh_beam.protocol.checks import check_int, check_real
from triehh_beam.protocol.privacy import (
    DPGuarantee,
    delta_fraction,
    epsilon_from_ratio,
    exact,
    theorem1,
    theorem1_violations,
)

__all__ = [
    "MAX_POPULATION",
    "RULES",
    "Evaluation",
    "PrivacyTarget",
    "batch_size_for",
    "check_rule",
    "delta_theta",
    "evaluate",
    "evaluate_rule",
    "rule_theta",
    "theta_ceiling",
]

RULES = ("authors", "corollary1")

# Populations are handled as Python ints but enter float formulas (n * s / theta, sqrt(n)):
# above 2^53 consecutive integers are no longer distinct floats.
MAX_POPULATION = 2**53

# e^(epsilon/L) overflows a float a little above 709; far below that the plan is already
# meaningless (theta >= e^(epsilon/L) - 1 would need more users than exist).
_MAX_EPS_PER_ROUND = 700.0


def _check_epsilon(epsilon, max_length: int) -> float:
    epsilon = check_real("epsilon", epsilon)
    if epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {exact(epsilon)}")
    if epsilon / max_length > _MAX_EPS_PER_ROUND:
        raise ValueError(
            f"epsilon/L = {exact(epsilon / max_length, _MAX_EPS_PER_ROUND)} is too large to plan with "
            f"(e^(epsilon/L) overflows; such an epsilon protects nothing)"
        )
    return epsilon


def _check_delta(delta) -> float:
    delta = check_real("delta", delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta:g}")
    return delta


def check_rule(rule) -> str:
    """``rule`` when it is one of ``RULES``; raises ValueError naming them otherwise."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    return rule


@dataclasses.dataclass(frozen=True)
class PrivacyTarget:
    """What a plan must achieve: (epsilon, delta)-DP for ``n`` users and ``L`` rounds.

    Raises:
      ValueError: epsilon <= 0, delta outside (0, 1), n outside [1, 2^53], L < 1, or
        non-numbers.
    """

    n: int
    epsilon: float
    delta: float
    max_length: int

    def __post_init__(self):
        object.__setattr__(self, "n", check_int("n (population)", self.n, 1, MAX_POPULATION))
        object.__setattr__(self, "max_length", check_int("L (max_length)", self.max_length, 1))
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon, self.max_length))
        object.__setattr__(self, "delta", _check_delta(self.delta))


def theta_ceiling(n: int, epsilon: float, max_length: int) -> float:
    """THETACEIL = sqrt(n) * (1 - e^(-epsilon/L)): the largest theta with gamma >= 1.

    (Before flooring m; with the floored m a theta just below THETACEIL can still fail.)
    """
    return math.sqrt(n) * -math.expm1(-epsilon / max_length)


@functools.lru_cache(maxsize=1024)
def delta_theta(rule: str, delta: float) -> int:
    """The theta the rule needs for delta alone (before raising it for epsilon)."""
    if rule == "authors":
        target = Fraction(delta)
        theta = 5
        while delta_fraction(theta) > target:
            theta += 1
        return theta
    from scipy.special import lambertw  # local: scipy is slow to import, the authors' rule needs none

    c = math.exp(-1.0) * math.log(8.0 / (7.0 * math.sqrt(2.0 * math.pi) * delta))
    w = float(lambertw(c, 0).real)
    return max(10, math.ceil(math.exp(w + 1.0) - 0.5))


def rule_theta(rule: str, epsilon: float, delta: float, max_length: int) -> int:
    """The threshold a rule picks for a target (epsilon, delta) over ``L`` rounds.

    Both rules then raise theta to at least ``e^(epsilon/L) - 1``, which keeps
    ``gamma <= sqrt(n)/(theta+1)``.

    Raises:
      ValueError: for an unknown rule or invalid epsilon, delta, L.
    """
    rule = check_rule(rule)
    max_length = check_int("L (max_length)", max_length, 1)
    epsilon = _check_epsilon(epsilon, max_length)
    delta = _check_delta(delta)
    return _rule_theta(rule, epsilon, delta, max_length)


def batch_size_for(n: int, epsilon: float, max_length: int, theta: int) -> int:
    """``m = floor(n * (1 - e^(-epsilon/L)) / theta)``, the batch size that spends ``epsilon``.

    In exact arithmetic Theorem 1 at this m gives an epsilon <= the target; when float rounding
    would put it one ulp above, m is lowered until it does not.
    """
    s = -math.expm1(-epsilon / max_length)
    m = math.floor(n * s / theta)
    while m > 0 and epsilon_from_ratio(max_length, m * theta / n) > epsilon:
        m -= 1
    return max(m, 0)


def _design_gamma(n: int, epsilon: float, max_length: int, theta: int) -> float:
    """gamma = sqrt(n) (e^(eps/L) - 1) / (theta e^(eps/L)), before m is floored."""
    return math.sqrt(n) * -math.expm1(-epsilon / max_length) / theta


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One theta evaluated for a target: its floored batch size, the rule's gamma, the conditions
    that fail (empty when feasible) and, when feasible, what Theorem 1 gives."""

    theta: int
    batch_size: int
    gamma: float
    violations: Tuple[str, ...]
    guarantee: Optional[DPGuarantee]

    @property
    def feasible(self) -> bool:
        return not self.violations


def evaluate(n: int, epsilon: float, delta: float, max_length: int, theta: int) -> Evaluation:
    """The feasibility test every plan and every alternative goes through.

    Feasible iff Theorem 1's conditions hold at the floored m and the guarantee it gives is
    within the target (delta(theta) <= delta, epsilon <= target).
    """
    m = batch_size_for(n, epsilon, max_length, theta)
    gamma = _design_gamma(n, epsilon, max_length, theta)
    violations = list(theorem1_violations(n, theta, batch_size=m))
    guarantee = None
    if not violations:
        guarantee = theorem1(n, theta, max_length, batch_size=m)
        if guarantee.delta > delta:
            violations.append(
                f"delta(theta) <= delta fails "
                f"(delta({theta}) = {guarantee.delta:.4g} > {delta:.4g})"
            )
        if guarantee.epsilon > epsilon:
            violations.append(
                f"epsilon <= target fails ({guarantee.epsilon:.6g} > {epsilon:.6g})"
            )
        if violations:
            guarantee = None
    return Evaluation(theta, m, gamma, tuple(violations), guarantee)


def _rule_theta(rule: str, epsilon: float, delta: float, max_length: int) -> int:
    return max(delta_theta(rule, delta), math.ceil(math.expm1(epsilon / max_length)))


def evaluate_rule(rule: str, n: int, epsilon: float, delta: float, max_length: int) -> Evaluation:
    """``evaluate`` at the theta ``rule`` picks (arguments already validated)."""
    return evaluate(n, epsilon, delta, max_length, _rule_theta(rule, epsilon, delta, max_length))
