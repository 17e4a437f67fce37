"""TrieHH++'s planner (docs/protocol.md §2): from a target (epsilon, delta) over L rounds to p_s and
tau, or why not. ``"exact"`` accounting (the default) certifies each round with
:mod:`triehh_beam.protocol.planning.exact_planner`; ``"bound"`` is the paper's closed form, searched here:
for each tau the largest alpha with ``exp(-C_alpha tau) <= delta / L``, keeping the (alpha, tau)
that minimises the worst-case holders an item needs to be found. Nothing depends on n."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.accounting.composition import round_epsilon
from triehh_beam.protocol.accounting.privacy import exact
from triehh_beam.protocol.checks import check_int, check_real
from triehh_beam.protocol.protocols import Protocol

__all__ = ["ACCOUNTINGS", "BOUND", "DEFAULT_ACCOUNTING", "DEFAULT_OBJECTIVE", "EXACT", "SampleThresholdPlan",
           "check_accounting", "plan_sample_threshold"]

#: The planner minimises the holders needed for this worst-case discovery probability.
DEFAULT_OBJECTIVE = 0.9
#: The exact accountant (docs/protocol.md §2, "Exact accounting") and the paper's bound.
EXACT = "exact"
BOUND = "bound"
ACCOUNTINGS = (EXACT, BOUND)
DEFAULT_ACCOUNTING = EXACT
# C_alpha > 0 exactly for alpha below this root of ln(1/a) = 1/(1+a) (0.5173...).
_ALPHA_ROOT_BRACKET = (0.5, 0.6)


def _alpha_root() -> float:
    lo, hi = _ALPHA_ROOT_BRACKET
    for _ in range(200):
        mid = (lo + hi) / 2
        if st.c_alpha(mid) > 0:
            lo = mid
        else:
            hi = mid
    return lo


ALPHA_MAX = _alpha_root()


@dataclasses.dataclass(frozen=True)
class SampleThresholdPlan:
    """TrieHH++'s parameters for a target (epsilon, delta) over L rounds, or why there are none.

    Attributes:
      feasible: the theorem certifies the target with these parameters.
      target_epsilon, target_delta, max_length: what was asked for; L rounds.
      objective: the worst-case discovery probability the choice optimises.
      length: the item length (units, terminator included) of the objective; L by default.
      epsilon_round, delta_round_target: eps/L and delta/L.
      alpha, tau, c_alpha, sampling_probability: the choice (None when infeasible).
      round_delta: ``exp(-C_alpha tau)``, achieved per round.
      epsilon, delta: L rounds composed (<= the target).
      holders: the fewest holders found with ``objective`` probability at ``length``.
      reason: why the target is infeasible (None when feasible).
      notes: remarks.
      accounting: "exact" or "bound": how every delta above was computed. Under "exact" alpha is
        derived (``p_s / (1 - e^-eps_r)``) and c_alpha is None.
      basic_delta, pld_delta: the L rounds composed each way (exact accounting; delta is the
        smaller); composition: which one that is.
    """

    feasible: bool
    target_epsilon: float
    target_delta: float
    max_length: int
    objective: float
    length: int
    epsilon_round: float
    delta_round_target: float
    alpha: Optional[float] = None
    tau: Optional[int] = None
    c_alpha: Optional[float] = None
    sampling_probability: Optional[float] = None
    round_delta: Optional[float] = None
    epsilon: Optional[float] = None
    delta: Optional[float] = None
    holders: Optional[int] = None
    reason: Optional[str] = None
    notes: Tuple[str, ...] = ()
    accounting: str = BOUND
    basic_delta: Optional[float] = None
    pld_delta: Optional[float] = None
    composition: Optional[str] = None

    def __post_init__(self):
        object.__setattr__(self, "notes", tuple(self.notes))
        if self.feasible and (self.tau is None or self.alpha is None or self.reason):
            raise ValueError("a feasible plan has alpha and tau and no reason")
        if not self.feasible and not self.reason:
            raise ValueError("an infeasible plan needs a reason")

    def guarantee(self) -> st.SampleThresholdGuarantee:
        """The paper's accountant's evaluation of this plan (raises for an infeasible plan or
        one accounted exactly: ``exact_accountant.release_delta`` evaluates those)."""
        if not self.feasible:
            raise ValueError(f"the plan is infeasible: {self.reason}")
        if self.accounting != BOUND:
            raise ValueError("the plan is accounted exactly; exact_accountant.release_delta evaluates it")
        return st.sample_threshold(self.alpha, self.epsilon_round, self.tau, self.max_length)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["notes"] = list(self.notes)
        out["protocol"] = Protocol.TRIEHH_PP.value
        return out


def _largest_alpha(tau: int, epsilon_round: float, max_length: int, delta: float) -> Optional[float]:
    """The largest alpha (6 significant digits, floored) whose L rounds at ``tau`` compose to a
    delta <= ``delta``; None if none does (it underflows)."""
    need = -math.log(delta / max_length) / tau  # C_alpha must be at least this
    lo, hi = 0.0, ALPHA_MAX  # C(hi) <= 0 < need; C -> infinity as alpha -> 0
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid <= 0.0:
            break
        if st.c_alpha(mid) >= need:
            lo = mid
        else:
            hi = mid
    if lo <= 0.0:
        return None
    scale = 10.0 ** (5 - math.floor(math.log10(lo)))
    alpha = math.floor(lo * scale) / scale
    while alpha > 0:  # the accountant's own sum decides, float rounding included
        if st.sample_threshold(alpha, epsilon_round, tau, max_length).total.delta <= delta:
            return alpha
        alpha -= 1 / scale
    return None


def _holders_lower_bound(tau: int, per_round: float, p_max: float) -> float:
    """No item with fewer holders survives a round with ``per_round`` probability at any alpha:
    Markov (E[X] = f p >= tau P(X >= tau)) and, above 1/2, the median (P(X >= tau) <= 1/2 when
    ceil(f p) <= tau - 1)."""
    bound = tau * per_round / p_max
    if per_round > 0.5:
        bound = max(bound, (tau - 1) / p_max)
    return bound


def plan_sample_threshold(
    epsilon: float,
    delta: float,
    max_length: int,
    *,
    objective: float = DEFAULT_OBJECTIVE,
    length: Optional[int] = None,
    share: float = 1.0,
    accounting: str = DEFAULT_ACCOUNTING,
) -> SampleThresholdPlan:
    """Chooses p_s and tau for a target over ``max_length`` rounds, or says why it cannot.

    Args:
      epsilon: the target epsilon of the whole run, > 0.
      delta: the target delta of the whole run, in (0, 1).
      max_length: L, the rounds (units per item, terminator included).
      objective: the worst-case discovery probability whose holders are minimised, in (0, 1).
      length: the item length in units of the objective; default L, the worst case.
      share: the smallest share of its holders' records the item has (1: one item per user).
      accounting: "exact" (default) or "bound" (the paper's closed form).

    Returns:
      A ``SampleThresholdPlan``; under the bound a target outside the theorem (eps/L > 1) comes
      back infeasible with the reason, never adjusted.

    Raises:
      ValueError: for invalid arguments.
    """
    epsilon = check_real("epsilon", epsilon)
    delta = check_real("delta", delta)
    max_length = check_int("max_length", max_length, 1)
    objective = check_real("objective", objective)
    if epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon:g}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta:g}")
    if not 0 < objective < 1:
        raise ValueError(f"objective must be in (0, 1), got {objective:g}")
    length = max_length if length is None else check_int("length", length, 1, max_length)
    share = check_real("share", share)
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share:g}")
    accounting = check_accounting(accounting)
    common = dict(target_epsilon=epsilon, target_delta=delta, max_length=max_length,
                  objective=objective, length=length, delta_round_target=delta / max_length,
                  accounting=accounting)
    if accounting == EXACT:
        return _plan_exact(epsilon, delta, max_length, objective, length, share, common)
    if epsilon / max_length > st.MAX_ROUND_EPSILON:
        return SampleThresholdPlan(
            feasible=False, epsilon_round=epsilon / max_length,
            reason=(f"the sample-and-threshold theorem covers eps_r = epsilon/L <= 1 per round; "
                    f"epsilon = {exact(epsilon)} over L = {max_length} rounds gives eps_r = "
                    f"{exact(epsilon / max_length, 1.0)} > 1, outside it (no guarantee, not a weaker one). "
                    f"It certifies at most epsilon = {max_length:g} over {max_length} rounds: ask "
                    f"for that, or use TrieHH (--protocol {Protocol.TRIEHH})"),
            **common)
    eps_r = round_epsilon(epsilon, max_length)
    per_round = objective ** (1.0 / length)
    p_max = ALPHA_MAX * -math.expm1(-eps_r)
    best = None  # (holders, tau, alpha)
    for tau in range(1, st.MAX_TAU + 1):
        if best is not None and _holders_lower_bound(tau, per_round, p_max) > best[0]:
            break
        alpha = _largest_alpha(tau, eps_r, max_length, delta)
        if alpha is None:
            continue
        holders = st.min_holders(objective, st.sampling_probability(alpha, eps_r), tau, length, share)
        if holders is not None and (best is None or holders < best[0]):
            best = (holders, tau, alpha)
    if best is None:  # pragma: no cover - only for deltas far below what floats resolve
        return SampleThresholdPlan(feasible=False, epsilon_round=eps_r, **common,
                                   reason=f"no tau up to {st.MAX_TAU:,} reaches delta = {delta:.4g}")
    holders, tau, alpha = best
    guarantee = st.sample_threshold(alpha, eps_r, tau, max_length)
    return SampleThresholdPlan(
        feasible=True,
        epsilon_round=eps_r,
        alpha=alpha,
        tau=tau,
        c_alpha=guarantee.c_alpha,
        sampling_probability=guarantee.sampling_probability,
        round_delta=guarantee.per_round.delta,
        epsilon=guarantee.total.epsilon,
        delta=guarantee.total.delta,
        holders=holders,
        basic_delta=guarantee.total.delta,
        composition="basic",
        **common,
    )


def check_accounting(accounting) -> str:
    """``accounting`` if it is one of ``ACCOUNTINGS``.

    Raises:
      ValueError: it is not.
    """
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting must be one of {', '.join(ACCOUNTINGS)}, got {accounting!r}")
    return accounting


def _plan_exact(epsilon: float, delta: float, max_length: int, objective: float, length: int, share: float,
                common: dict) -> SampleThresholdPlan:
    from triehh_beam.protocol.planning.exact_planner import plan_exact  # local: SciPy only when planning

    chosen = plan_exact(epsilon, delta, max_length, objective, length, share)
    if chosen is None:
        return SampleThresholdPlan(feasible=False, epsilon_round=epsilon / max_length, **common,
                                   reason=(f"no threshold up to {st.MAX_TAU:,} reaches delta = {delta:.4g} "
                                           f"over {max_length} rounds at epsilon = {exact(epsilon)}"))
    composed = chosen.composition
    return SampleThresholdPlan(
        feasible=True,
        epsilon_round=chosen.epsilon_round,
        alpha=chosen.sampling_probability / -math.expm1(-chosen.epsilon_round),
        tau=chosen.tau,
        sampling_probability=chosen.sampling_probability,
        round_delta=chosen.delta_round,
        epsilon=composed.epsilon,
        delta=composed.delta,
        holders=chosen.holders,
        basic_delta=composed.basic_delta,
        pld_delta=composed.pld_delta,
        composition=composed.method,
        **common,
    )
