"""Privacy accounting for TrieHH: Theorem 1, parameter choice and simple composition.

TrieHH adds no noise: a run over ``n`` users with batch size ``m = gamma * sqrt(n)``, vote
threshold ``theta`` and at most ``L`` rounds is (epsilon, delta)-DP with user-level adjacency
(Theorem 1 of the TrieHH paper, restated in docs/protocol.md §1) when

    4 <= theta <= sqrt(n)   and   1 <= gamma <= sqrt(n) / (theta + 1),

with

    epsilon = L * ln(1 + 1 / (sqrt(n) / (gamma * theta) - 1)) = -L * ln(1 - m * theta / n)
    delta   = (theta - 2) / ((theta - 3) * theta!).

``plan`` goes the other way: from a target (epsilon, delta) for ``n`` users and ``L`` rounds it
picks ``theta`` and the batch size with one of two rules,

- ``"authors"``: the smallest ``theta >= 5`` with ``delta(theta) <= delta`` (exact, computed with
  rationals), raised while ``theta < e^(epsilon/L) - 1``;
- ``"corollary1"``: Corollary 1, ``theta = ceil(max{10, e^(W0(C) + 1) - 1/2, e^(epsilon/L) - 1})``
  with ``C = e^-1 * ln(8 / (7 * sqrt(2 pi) * delta))`` (a Stirling bound: never below the exact
  theta, sometimes above it, and never below 10);

then ``m = floor(n * (1 - e^(-epsilon/L)) / theta)`` (which is ``gamma * sqrt(n)`` floored, with
``gamma = sqrt(n) (e^(epsilon/L) - 1) / (theta e^(epsilon/L))``), and evaluates Theorem 1 at the
*floored* ``m``. A target that Theorem 1 cannot certify (typically: the delta-driven theta exceeds
``THETACEIL = sqrt(n) (1 - e^(-epsilon/L))``, so ``gamma < 1``) is reported infeasible, with
the honest alternatives and their numbers: a lower theta and the larger delta it gives, the
smallest epsilon that works at this delta (or, when epsilon/L is so large that the rule's
theta >= e^(epsilon/L) - 1 does not fit, a smaller epsilon that does), the smallest population
that works at this (epsilon, delta).

Pure Python (math, fractions, scipy.special); no Beam.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from fractions import Fraction
from typing import Iterable, List, Optional, Tuple, Union

from scipy.special import lambertw

__all__ = [
    "ALTERNATIVE_KINDS",
    "MAX_POPULATION",
    "RULES",
    "Alternative",
    "DPGuarantee",
    "Plan",
    "PrivacyConditionError",
    "PrivacyTarget",
    "batch_size_for",
    "compose",
    "plan",
    "rule_theta",
    "theorem1",
    "theorem1_delta",
    "theorem1_violations",
    "theta_ceiling",
]

RULES = ("authors", "corollary1")
ALTERNATIVE_KINDS = ("lower_theta", "raise_epsilon", "lower_epsilon", "raise_population")

# Populations are handled as Python ints but enter float formulas (n * s / theta, sqrt(n)):
# above 2^53 consecutive integers are no longer distinct floats.
MAX_POPULATION = 2**53

# e^(epsilon/L) overflows a float a little above 709; far below that the plan is already
# meaningless (theta >= e^(epsilon/L) - 1 would need more users than exist).
_MAX_EPS_PER_ROUND = 700.0

# Alternatives for epsilon are rounded *up* to this many significant digits (more if needed).
_EPSILON_DIGITS = 3


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


def _check_epsilon(epsilon, max_length: int) -> float:
    epsilon = _check_real("epsilon", epsilon)
    if epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon:g}")
    if epsilon / max_length > _MAX_EPS_PER_ROUND:
        raise ValueError(
            f"epsilon/L = {epsilon / max_length:g} is too large to plan with "
            f"(e^(epsilon/L) overflows; such an epsilon protects nothing)"
        )
    return epsilon


def _check_delta(delta) -> float:
    delta = _check_real("delta", delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta:g}")
    return delta


def _check_rule(rule) -> str:
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    return rule


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


# --------------------------------------------------------------------------------------------
# Parameter choice.


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
        object.__setattr__(self, "n", _check_int("n (population)", self.n, 1, MAX_POPULATION))
        object.__setattr__(self, "max_length", _check_int("L (max_length)", self.max_length, 1))
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon, self.max_length))
        object.__setattr__(self, "delta", _check_delta(self.delta))


def theta_ceiling(n: int, epsilon: float, max_length: int) -> float:
    """THETACEIL = sqrt(n) * (1 - e^(-epsilon/L)): the largest theta with gamma >= 1.

    (Before flooring m; with the floored m a theta just below THETACEIL can still fail.)
    """
    return math.sqrt(n) * -math.expm1(-epsilon / max_length)


@functools.lru_cache(maxsize=1024)
def _delta_theta(rule: str, delta: float) -> int:
    """The theta the rule needs for delta alone (before raising it for epsilon)."""
    if rule == "authors":
        target = Fraction(delta)
        theta = 5
        while _delta_fraction(theta) > target:
            theta += 1
        return theta
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
    rule = _check_rule(rule)
    max_length = _check_int("L (max_length)", max_length, 1)
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
    while m > 0 and _epsilon_from_ratio(max_length, m * theta / n) > epsilon:
        m -= 1
    return max(m, 0)


def _design_gamma(n: int, epsilon: float, max_length: int, theta: int) -> float:
    """gamma = sqrt(n) (e^(eps/L) - 1) / (theta e^(eps/L)), before m is floored."""
    return math.sqrt(n) * -math.expm1(-epsilon / max_length) / theta


@dataclasses.dataclass(frozen=True)
class _Evaluation:
    theta: int
    batch_size: int
    gamma: float
    violations: Tuple[str, ...]
    guarantee: Optional[DPGuarantee]

    @property
    def feasible(self) -> bool:
        return not self.violations


def _evaluate(n: int, epsilon: float, delta: float, max_length: int, theta: int) -> _Evaluation:
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
    return _Evaluation(theta, m, gamma, tuple(violations), guarantee)


def _rule_theta(rule: str, epsilon: float, delta: float, max_length: int) -> int:
    return max(_delta_theta(rule, delta), math.ceil(math.expm1(epsilon / max_length)))


def _evaluate_rule(rule: str, n: int, epsilon: float, delta: float, max_length: int) -> _Evaluation:
    return _evaluate(n, epsilon, delta, max_length, _rule_theta(rule, epsilon, delta, max_length))


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


@dataclasses.dataclass(frozen=True)
class Plan:
    """The parameters for a target (epsilon, delta), or why there are none.

    Attributes:
      feasible: Theorem 1 certifies the target with these parameters.
      rule: ``"authors"`` or ``"corollary1"``.
      n, max_length: population and L.
      target_epsilon, target_delta: what was asked for.
      theta: the threshold the rule picks (also when infeasible: the one that did not fit).
      gamma: the rule's gamma, before flooring m.
      batch_size: m, floored.
      effective_gamma: m / sqrt(n), what Theorem 1 is evaluated at.
      theta_ceiling: THETACEIL = sqrt(n) (1 - e^(-epsilon/L)).
      epsilon, delta: what Theorem 1 gives at the floored m (None when infeasible: Theorem 1
        then gives no guarantee at all).
      reason: why the target is infeasible (None when feasible).
      alternatives: when infeasible, the ways out that exist (see ``Alternative``).
      notes: remarks (e.g. an alternative that does not exist, and why).
    """

    feasible: bool
    rule: str
    n: int
    max_length: int
    target_epsilon: float
    target_delta: float
    theta: int
    gamma: float
    batch_size: int
    effective_gamma: float
    theta_ceiling: float
    epsilon: Optional[float]
    delta: Optional[float]
    reason: Optional[str] = None
    alternatives: Tuple[Alternative, ...] = ()
    notes: Tuple[str, ...] = ()

    def __post_init__(self):
        _check_rule(self.rule)
        object.__setattr__(self, "alternatives", tuple(self.alternatives))
        object.__setattr__(self, "notes", tuple(self.notes))
        if self.feasible and (self.epsilon is None or self.delta is None or self.reason):
            raise ValueError("a feasible plan has an epsilon and a delta and no reason")
        if not self.feasible and not self.reason:
            raise ValueError("an infeasible plan needs a reason")

    @property
    def sampling_rate(self) -> float:
        """m / n, the share of the population sampled in each round."""
        return self.batch_size / self.n

    def to_dict(self) -> dict:
        """A JSON-ready dict (alternatives as a list of dicts)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["alternatives"] = [a.to_dict() for a in self.alternatives]
        out["notes"] = list(self.notes)
        out["sampling_rate"] = self.sampling_rate
        return out


def plan(
    n: int,
    epsilon: float,
    delta: float,
    max_length: int,
    rule: str = "authors",
    *,
    with_alternatives: bool = True,
) -> Plan:
    """Chooses theta and the batch size for a target (epsilon, delta), or says why it cannot.

    Args:
      n: the population size (users), 1 <= n <= 2^53.
      epsilon: the target epsilon, > 0.
      delta: the target delta, in (0, 1).
      max_length: L, the maximum sequence length in units (terminator included).
      rule: ``"authors"`` (default: the exact smallest theta, hence the largest batch) or
        ``"corollary1"``.
      with_alternatives: compute the alternatives of an infeasible target (a few searches;
        turn off in loops that only need ``feasible``).

    Returns:
      A ``Plan``; infeasible targets are returned with ``feasible=False``, never adjusted.

    Raises:
      ValueError: for invalid arguments (one-line messages).
    """
    rule = _check_rule(rule)
    target = PrivacyTarget(n, epsilon, delta, max_length)
    n, epsilon, delta, max_length = target.n, target.epsilon, target.delta, target.max_length
    ev = _evaluate_rule(rule, n, epsilon, delta, max_length)
    ceiling = theta_ceiling(n, epsilon, max_length)
    common = dict(
        rule=rule,
        n=n,
        max_length=max_length,
        target_epsilon=epsilon,
        target_delta=delta,
        theta=ev.theta,
        gamma=ev.gamma,
        batch_size=ev.batch_size,
        effective_gamma=ev.batch_size / math.sqrt(n),
        theta_ceiling=ceiling,
    )
    notes: List[str] = []
    delta_theta = _delta_theta(rule, delta)
    if ev.theta > delta_theta:
        notes.append(
            f"theta raised from {delta_theta} to {ev.theta} = ceil(e^(epsilon/L) - 1) "
            f"to keep gamma <= sqrt(n)/(theta+1)"
        )
    if ev.feasible:
        return Plan(
            feasible=True,
            epsilon=ev.guarantee.epsilon,
            delta=ev.guarantee.delta,
            notes=tuple(notes),
            **common,
        )
    reason = _reason(ev, delta_theta, ceiling, n, epsilon, delta, max_length, rule)
    alternatives: List[Alternative] = []
    if with_alternatives:
        for search in (_lower_theta, _raise_epsilon, _raise_population):
            found, note = search(rule, n, epsilon, delta, max_length)
            if found is not None:
                alternatives.append(found)
            if note:
                notes.append(note)
    return Plan(
        feasible=False,
        epsilon=None,
        delta=None,
        reason=reason,
        alternatives=tuple(alternatives),
        notes=tuple(notes),
        **common,
    )


def _reason(ev, delta_theta, ceiling, n, epsilon, delta, max_length, rule) -> str:
    origin = (
        f"the smallest theta with delta(theta) <= {delta:.4g}"
        if ev.theta == delta_theta
        else "ceil(e^(epsilon/L) - 1)"
    )
    if rule == "corollary1" and ev.theta == delta_theta:
        origin = f"Corollary 1's theta for delta = {delta:.4g}"
    lead = (
        f"Theorem 1 cannot certify (epsilon={epsilon:g}, delta={delta:.4g}) "
        f"for n={n}, L={max_length}"
    )
    if ev.theta > ceiling:
        why = (
            f"theta = {ev.theta} ({origin}) exceeds THETACEIL = sqrt(n)*(1 - e^(-epsilon/L)) = "
            f"{ceiling:.4g}, so gamma = {ev.gamma:.4g} < 1 even before m is floored "
            f"(m = {ev.batch_size})"
        )
    else:
        why = f"with theta = {ev.theta} ({origin}) and m = {ev.batch_size}"
    return f"{lead}: {why}. " + "; ".join(ev.violations)


def _alternative(kind, description, n, epsilon, delta, ev: _Evaluation, step=None) -> Alternative:
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
    )


def _lower_theta(rule, n, epsilon, delta, max_length):
    """Keep epsilon and n; the largest theta <= floor(THETACEIL) Theorem 1 accepts, its delta.

    Usually floor(THETACEIL) itself; lower only when flooring m pushes gamma just below 1.
    The rule's own minimum theta (5 or 10) does not apply: only Theorem 1's theta >= 4. When
    the rule's theta came from epsilon (theta >= e^(epsilon/L) - 1), not from delta, the lower
    theta may even keep delta within the target.
    """
    ceiling = theta_ceiling(n, epsilon, max_length)
    top = min(math.floor(ceiling), _rule_theta(rule, epsilon, delta, max_length) - 1)
    if top < 4:
        return None, (
            f"lowering theta cannot help: THETACEIL = {ceiling:.4g} < 4, Theorem 1's smallest theta"
        )
    for theta in range(top, 3, -1):
        # The guarantee is delta(theta) when that exceeds the target: evaluate against it.
        new_delta = max(theorem1_delta(theta), delta)
        if new_delta >= 1.0:
            break
        ev = _evaluate(n, epsilon, new_delta, max_length, theta)
        if ev.batch_size * (theta + 1) > n:
            break  # gamma <= sqrt(n)/(theta+1) fails, and only gets worse as theta decreases
        if not ev.feasible:
            continue  # gamma >= 1 missed by flooring m: a smaller theta has a larger m
        if new_delta > delta:
            effect = f"but delta grows to {ev.guarantee.delta:.4g}"
        else:
            effect = f"and delta(theta) {_format_delta(ev.guarantee.delta)} is within the target"
        return (
            _alternative(
                "lower_theta",
                f"lower theta to {theta} (<= THETACEIL = {ceiling:.4g}): keeps epsilon = "
                f"{epsilon:g} and n = {n}, {effect}",
                n,
                epsilon,
                new_delta,
                ev,
            ),
            None,
        )
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


def _raise_epsilon(rule, n, epsilon, delta, max_length):
    """Keep delta and n; the smallest epsilon the same feasibility test accepts.

    With theta fixed at the delta-driven value, the batch size grows with epsilon, so
    feasibility is monotone in epsilon up to eps_top = L ln(1 + theta_delta), where the rule
    starts raising theta (beyond it the batch shrinks again: if eps_top fails, no epsilon
    works). Bisection finds the boundary; the answer is rounded up to 3 significant digits and
    checked so that one unit less in the last digit is infeasible.
    """
    theta_d = _delta_theta(rule, delta)
    eps_top = max_length * math.log1p(theta_d)
    while math.ceil(math.expm1(eps_top / max_length)) > theta_d:
        eps_top = math.nextafter(eps_top, 0.0)

    def feasible(eps: float) -> bool:
        return _evaluate_rule(rule, n, eps, delta, max_length).feasible

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
    ev = _evaluate_rule(rule, n, value, delta, max_length)
    return (
        _alternative(
            "raise_epsilon",
            f"raise epsilon to {value:g} (the smallest, to {unit:g}, that works at "
            f"delta = {delta:.4g}, n = {n}, L = {max_length})",
            n,
            value,
            delta,
            ev,
            step=unit,
        ),
        None,
    )


def _lower_epsilon(rule, n, epsilon, delta, max_length, eps_min, eps_top, feasible):
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
    ev = _evaluate_rule(rule, n, value, delta, max_length)
    return (
        _alternative(
            "lower_epsilon",
            f"spend less: epsilon = {value:g} works at delta = {delta:.4g}, n = {n}, "
            f"L = {max_length} (so does any epsilon in [{eps_min:g}, {value:g}]); above "
            f"L*ln(1 + {ev.theta}) = {eps_top:.4g} the rule raises theta to e^(epsilon/L) - 1 "
            f"and the batch shrinks",
            n,
            value,
            delta,
            ev,
        ),
        None,
    )


def _raise_population(rule, n, epsilon, delta, max_length):
    """Keep (epsilon, delta); the smallest N such that every population >= N works.

    theta does not depend on n, and the only condition that does is gamma >= 1, i.e.
    m(n)^2 >= n with m(n) = floor(n s / theta) nondecreasing. Because m is floored, feasibility
    can flicker just above the continuous bound (theta/s)^2; the answer is the end of the
    flicker: N - 1 is infeasible and everything from N on is feasible.
    """
    theta = _rule_theta(rule, epsilon, delta, max_length)

    def feasible(pop: int) -> bool:
        return _evaluate(pop, epsilon, delta, max_length, theta).feasible

    def m_of(pop: int) -> int:
        return batch_size_for(pop, epsilon, max_length, theta)

    def last_with_m_at_most(k: int) -> int:
        lo, hi = 0, MAX_POPULATION + 1  # m_of(lo) <= k < m_of(hi) (m_of(0) is 0)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if m_of(mid) <= k:
                lo = mid
            else:
                hi = mid
        return lo

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
    while not feasible(candidate):
        candidate += 1
    while candidate > 1 and feasible(candidate - 1):
        candidate -= 1
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
    ev = _evaluate(candidate, epsilon, delta, max_length, theta)
    return (
        _alternative(
            "raise_population",
            f"collect at least n = {candidate} users (from there on every n works at "
            f"epsilon = {epsilon:g}, delta = {delta:.4g}, L = {max_length}{flicker})",
            candidate,
            epsilon,
            delta,
            ev,
            step=1,
        ),
        None,
    )
