"""TrieHH's planner (docs/protocol.md §1, "Choosing parameters"): from a target (epsilon, delta)
for n users and L rounds to a ``Plan`` (theta and the batch size a parameter rule picks, certified
by Theorem 1 at the floored batch), or an infeasible ``Plan`` with its reason in numbers and the
honest alternatives; never an adjusted target. ``fixed_over_target`` checks a theta and m fixed by
hand against the same target."""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Tuple

from triehh_beam.protocol.accounting import privacy
from triehh_beam.protocol.planning.alternatives import Alternative, alternatives_for
from triehh_beam.protocol.planning.parameters import (Evaluation, PrivacyTarget, check_rule, delta_theta,
                                                      evaluate_rule, theta_ceiling)

__all__ = ["Plan", "fixed_over_target", "plan"]


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
      crowding_delta: the crowding lower bound on one round's delta at (n, theta, m)
        (``protocol.accounting.crowding``; None where Theorem 1's conditions fail).
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
    crowding_delta: Optional[float] = None

    def __post_init__(self):
        check_rule(self.rule)
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
        out["theorem1"] = privacy.THEOREM1_STATUS
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
    rule = check_rule(rule)
    target = PrivacyTarget(n, epsilon, delta, max_length)
    n, epsilon, delta, max_length = target.n, target.epsilon, target.delta, target.max_length
    ev = evaluate_rule(rule, n, epsilon, delta, max_length)
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
        crowding_delta=None if ev.crowding is None else ev.crowding.delta,
    )
    notes: List[str] = []
    theta_for_delta = delta_theta(rule, delta)
    if ev.theta > theta_for_delta:
        notes.append(
            f"theta raised from {theta_for_delta} to {ev.theta} = ceil(e^(epsilon/L) - 1) "
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
    reason = _reason(ev, theta_for_delta, ceiling, n, epsilon, delta, max_length, rule)
    alternatives: Tuple[Alternative, ...] = ()
    if with_alternatives:
        alternatives, more_notes = alternatives_for(rule, n, epsilon, delta, max_length)
        notes.extend(more_notes)
    return Plan(
        feasible=False,
        epsilon=None,
        delta=None,
        reason=reason,
        alternatives=tuple(alternatives),
        notes=tuple(notes),
        **common,
    )


def fixed_over_target(
    n: int,
    epsilon: float,
    delta: float,
    max_length: int,
    theta: int,
    batch_size: int,
    rule: str = "authors",
) -> Optional[Tuple[str, Tuple[Alternative, ...]]]:
    """Why a fixed theta and batch size spend more than the target, or None when they do not.

    Theorem 1 at (n, theta, m, L) must give epsilon <= the target epsilon and delta <= the
    target delta; otherwise the job would record, and charge, more than was asked for.

    Returns:
      None when the fixed values meet the target; else (one line with Theorem 1's numbers and
      the planner's answer for the target, the planner's alternatives when the target itself
      is infeasible).

    Raises:
      privacy.PrivacyConditionError: Theorem 1 does not apply to the fixed values at all.
    """
    guarantee = privacy.theorem1(n, theta, max_length, batch_size=batch_size)
    if guarantee.epsilon <= epsilon and guarantee.delta <= delta:
        return None
    over = []
    if guarantee.epsilon > epsilon:
        over.append(f"epsilon = {privacy.exact(guarantee.epsilon, epsilon)} > {privacy.exact(epsilon)}")
    if guarantee.delta > delta:
        over.append(f"delta = {guarantee.delta:.4g} > {delta:.4g}")
    lead = (f"fixed theta = {theta} and m = {batch_size} exceed the target: Theorem 1 gives "
            f"{' and '.join(over)} for n = {n}, L = {max_length}")
    planned = plan(n, epsilon, delta, max_length, rule)
    if planned.feasible:
        return (f"{lead}; the planner meets the target with theta = {planned.theta}, "
                f"m = {planned.batch_size} (epsilon = {planned.epsilon:.6g}, delta = "
                f"{planned.delta:.4g}); use those, or raise the target to what the fixed values "
                f"give", ())
    return f"{lead}; and the target itself: {planned.reason}", planned.alternatives


def _reason(
    ev: Evaluation,
    theta_for_delta: int,
    ceiling: float,
    n: int,
    epsilon: float,
    delta: float,
    max_length: int,
    rule: str,
) -> str:
    origin = (
        f"the smallest theta with delta(theta) <= {delta:.4g}"
        if ev.theta == theta_for_delta
        else "ceil(e^(epsilon/L) - 1)"
    )
    if rule == "corollary1" and ev.theta == theta_for_delta:
        origin = f"Corollary 1's theta for delta = {delta:.4g}"
    lead = (
        f"Theorem 1 cannot certify (epsilon={privacy.exact(epsilon)}, delta={delta:.4g}) "
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
