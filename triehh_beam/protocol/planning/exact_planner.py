"""Sample-and-threshold's planner under the exact accountant (docs/protocol.md §2, "Exact
accounting"): from a target (epsilon, delta) over L rounds to the (p_s, tau) that minimises the
worst-case holders an item needs to be found, each round given ``epsilon / L`` and ``delta / L``
and certified by ``exact_accountant.release_delta``; or why there is none."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional

from triehh_beam.protocol.accounting import exact_accountant
from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.accounting.composition import Composition, compose_rounds, round_epsilon

__all__ = ["ExactChoice", "largest_probability", "plan_exact"]

_DIGITS = 6


@dataclasses.dataclass(frozen=True)
class ExactChoice:
    """What the exact planner chooses for a target over L rounds.

    Attributes:
      holders: the fewest holders an item needs to be found with the objective's probability.
      tau: the threshold.
      sampling_probability: p_s, the largest that fits at ``tau`` (6 significant digits).
      epsilon_round: each round's epsilon (``composition.round_epsilon``).
      delta_round: the exact accountant's delta of one round at ``epsilon_round``.
      composition: the L rounds composed (basic and PLD).
    """

    holders: int
    tau: int
    sampling_probability: float
    epsilon_round: float
    delta_round: float
    composition: Composition

    def __post_init__(self):
        if self.holders < 1 or self.tau < 1:
            raise ValueError(f"holders and tau must be >= 1, got {self.holders} and {self.tau}")
        if not 0.0 < self.sampling_probability < 1.0:
            raise ValueError(f"sampling_probability must be in (0, 1), got {self.sampling_probability!r}")


def _log_excess(p: float, tau: int, epsilon_round: float, delta_round: float) -> float:
    """``ln(delta(eps_r; p, tau) / delta_r)``: <= 0 exactly when p fits (above ln 1000 it may be
    a lower bound: the search stops early there, which keeps the root bracketed)."""
    delta = exact_accountant.release_delta(epsilon_round, p, tau, above=1e3 * delta_round).delta
    return (math.log(delta) if delta > 0 else -745.0) - math.log(delta_round)


def _fits(p: float, tau: int, epsilon_round: float, delta_round: float) -> bool:
    return exact_accountant.release_delta(epsilon_round, p, tau, above=delta_round).delta <= delta_round


def largest_probability(tau: int, epsilon_round: float, delta_round: float,
                        start: float = 0.0) -> Optional[float]:
    """The largest p_s (floored to 6 significant digits) whose one release at ``tau`` has
    ``delta(eps_r) <= delta_r``, searched above ``start`` (a p_s known to fit, or 0); None if
    none above 1e-12 does. Regula falsi (Illinois) on ``ln delta``, which is smooth in p; the
    answer is checked by the accountant itself."""
    # With f = tau - 1 others, tau reports are only possible with the user: delta >= p^tau.
    hi = min(1.0 - 1e-12, math.nextafter(delta_round ** (1.0 / tau), 2.0))
    lo = start if 0 < start < hi and _fits(start, tau, epsilon_round, delta_round) else 1e-12
    g_lo, g_hi = _log_excess(lo, tau, epsilon_round, delta_round), _log_excess(hi, tau, epsilon_round, delta_round)
    if g_lo > 0:
        return None
    if g_hi <= 0:
        lo = hi
    side = 0
    for _ in range(200):
        if hi - lo <= 1e-8 * hi or lo == hi:
            break
        mid = hi - g_hi * (hi - lo) / (g_hi - g_lo) if g_hi > g_lo else (lo + hi) / 2
        if not lo < mid < hi:
            mid = (lo + hi) / 2
        g_mid = _log_excess(mid, tau, epsilon_round, delta_round)
        if g_mid <= 0:
            lo, g_lo = mid, g_mid
            if side == -1:
                g_hi /= 2
            side = -1
        else:
            hi, g_hi = mid, g_mid
            if side == 1:
                g_lo /= 2
            side = 1
    scale = 10.0 ** (_DIGITS - 1 - math.floor(math.log10(lo)))
    p = math.floor(lo * scale) / scale
    while p > 0:
        if _fits(p, tau, epsilon_round, delta_round):
            return p
        p = (round(p * scale) - 1) / scale
    return None


@functools.lru_cache(maxsize=256)
def plan_exact(epsilon: float, delta: float, rounds: int, objective: float, length: int,
               share: float) -> Optional[ExactChoice]:
    """The exact planner's ``ExactChoice`` (holders, tau, p_s, eps_r, delta_r, composition), or
    None if no tau up to ``sample_threshold.MAX_TAU`` has a p_s. Arguments are checked by the
    caller (``plan_sample_threshold``).

    Branch and bound over tau: a larger threshold is post-processing of a smaller one (it hides
    more counts), so the largest p_s that fits, ``p(tau)``, is nondecreasing in tau, and the
    holders needed grow with tau and shrink with p_s. A block ``[a, b]`` of thresholds therefore
    needs at least ``min_holders(p(b), a)``; a block whose bound exceeds the best found is
    skipped, any other is halved. Past ``tau * per_round`` holders (Markov, ``p_s < 1``) no
    threshold can do better, which ends the search.
    """
    eps_r = round_epsilon(epsilon, rounds)
    delta_r = delta / rounds
    per_round = objective ** (1.0 / length)
    probability = {}

    def p_of(tau: int) -> float:
        if tau not in probability:
            below = max((t for t in probability if t < tau and probability[t]), default=None)
            probability[tau] = largest_probability(tau, eps_r, delta_r, start=probability[below] if below else 0.0) or 0.0
        return probability[tau]

    def holders(tau: int, p: float) -> float:
        if p <= 0.0:
            return math.inf
        found = st.min_holders(objective, p, tau, length, share)
        return math.inf if found is None else found

    def never_better(tau: int) -> float:
        return tau * per_round if per_round <= 0.5 else max(tau * per_round, tau - 1)

    best = (math.inf, None)  # (holders, tau)
    low, width = 1, 8
    while low <= st.MAX_TAU and never_better(low) <= best[0]:
        high = min(low + width - 1, st.MAX_TAU)
        blocks = [(low, high)]
        while blocks:
            a, b = blocks.pop()
            if holders(a, p_of(b)) > best[0]:
                continue
            if a == b:
                found = holders(a, p_of(a))
                if found < best[0]:
                    best = (found, a)
                continue
            middle = (a + b) // 2
            blocks.extend([(middle + 1, b), (a, middle)])
        low, width = high + 1, 2 * width
    if best[1] is None:
        return None
    found, tau = best
    p = probability[tau]
    delta_round = exact_accountant.release_delta(eps_r, p, tau).delta
    return ExactChoice(holders=int(found), tau=tau, sampling_probability=p, epsilon_round=eps_r,
                       delta_round=delta_round, composition=compose_rounds(eps_r, delta_round, rounds))
