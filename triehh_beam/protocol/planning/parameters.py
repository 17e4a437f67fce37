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

from triehh_beam.protocol.accounting.crowding import CrowdingBound, neighbours_bound
from triehh_beam.protocol.accounting.privacy import (DPGuarantee, log_theorem1_delta, delta_fraction,
                                                     epsilon_from_ratio, exact, theorem1,
                                                     theorem1_violations)
from triehh_beam.protocol.checks import check_int, check_real

__all__ = [
    "CROWDING_SHARE",
    "MAX_POPULATION",
    "RULES",
    "Evaluation",
    "PrivacyTarget",
    "batch_size_for",
    "check_rule",
    "crowding_violation",
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

# A TrieHH plan is refused when the crowding lower bound on one round's delta (protocol.accounting.crowding)
# exceeds this share of Theorem 1's delta per round (delta / L): Theorem 1 is then shown false, or
# too close to false to trust, for fixed-size sampling at that plan.
CROWDING_SHARE = 0.1

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
    that fail (empty when feasible), when feasible what Theorem 1 gives, and the crowding lower
    bound at (n, theta, m) (None where Theorem 1 does not apply); ``crowded``: the crowding guard
    failed."""

    theta: int
    batch_size: int
    gamma: float
    violations: Tuple[str, ...]
    guarantee: Optional[DPGuarantee]
    crowding: Optional[CrowdingBound] = None
    crowded: bool = False

    @property
    def feasible(self) -> bool:
        return not self.violations


def crowding_violation(n: int, theta: int, batch_size: int, max_length: int,
                       delta: float) -> Tuple[CrowdingBound, Optional[str]]:
    """The crowding lower bound of one round at (n, theta, m) and, when it exceeds
    ``CROWDING_SHARE`` of ``delta / L`` (Theorem 1's delta per round; 0: Theorem 1's delta at
    theta, underflowed), the line that says so."""
    bound = neighbours_bound(n, theta, batch_size)
    per_round = delta / max_length
    # In logs: both can underflow (Theorem 1's delta below 1e-308 from theta ~ 170 on).
    log_delta = math.log(delta) if delta > 0 else log_theorem1_delta(theta)
    if bound.log_delta <= math.log(CROWDING_SHARE) + log_delta - math.log(max_length):
        return bound, None
    return bound, (f"The crowding guard fails: with m = {batch_size:,} fixed seats one user can push every "
                   f"prefix below theta = {theta}, so delta >= {bound.delta:.3g} for n = {n:,} "
                   f"(> {CROWDING_SHARE:g} x Theorem 1's delta per round, {per_round:.3g}); Theorem 1 "
                   "is unproven for fixed-size sampling: use --protocol triehh++ (certified exactly), or plan for more "
                   "users")


def evaluate(n: int, epsilon: float, delta: float, max_length: int, theta: int,
             batch_size: Optional[int] = None) -> Evaluation:
    """The feasibility test every plan and every alternative goes through.

    Feasible iff Theorem 1's conditions hold at the floored m (or ``batch_size``, when given),
    the guarantee it gives is within the target (delta(theta) <= delta, epsilon <= target), and
    the crowding guard passes (``crowding_violation``).
    """
    m = batch_size_for(n, epsilon, max_length, theta) if batch_size is None else batch_size
    gamma = _design_gamma(n, epsilon, max_length, theta)
    violations = list(theorem1_violations(n, theta, batch_size=m))
    guarantee = crowding = None
    crowded = False
    if not violations:
        guarantee = theorem1(n, theta, max_length, batch_size=m)
        crowding, crowded_line = crowding_violation(n, theta, m, max_length, guarantee.delta)
        if crowded_line:
            violations.append(crowded_line)
            crowded = True
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
    return Evaluation(theta, m, gamma, tuple(violations), guarantee, crowding, crowded)


def _rule_theta(rule: str, epsilon: float, delta: float, max_length: int) -> int:
    return max(delta_theta(rule, delta), math.ceil(math.expm1(epsilon / max_length)))


def evaluate_rule(rule: str, n: int, epsilon: float, delta: float, max_length: int) -> Evaluation:
    """``evaluate`` at the theta ``rule`` picks (arguments already validated). A theta raised to
    e^(epsilon/L) - 1 leaves m/theta small, so the crowding guard caps the raise: such a plan is
    refused, and the alternatives offer to spend less (``alternatives``: lower_epsilon)."""
    return evaluate(n, epsilon, delta, max_length, _rule_theta(rule, epsilon, delta, max_length))
