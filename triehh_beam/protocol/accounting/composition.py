"""Composition of spends over the same users: basic composition (epsilons add up, deltas add up),
the one sum every accountant and the ledger use, and L sample-and-threshold rounds composed two
ways (docs/protocol.md §2, "Exact accounting"): basic, ``(L eps_r, L delta_r)``, and Google's
``dp_accounting`` PLD accountant over L copies of the pair that dominates every
``(eps_r, delta_r)``-DP mechanism. Both are certificates; a plan claims the smaller and reports
both."""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Tuple

from triehh_beam.protocol.checks import check_int, check_real

__all__ = ["Composition", "basic_composition", "compose_rounds", "round_epsilon"]

#: The PLD's grid of privacy-loss values is at most this fine (dp_accounting's default), and
#: divides eps_r exactly (``_pld_interval``; pessimistic rounding).
PLD_INTERVAL = 1e-4


@dataclasses.dataclass(frozen=True)
class Composition:
    """What L identical rounds of ``(epsilon_round, delta_round)`` spend.

    Attributes:
      epsilon: ``L * epsilon_round`` (both accountants are read there).
      basic_delta: ``L * delta_round``.
      pld_delta: the PLD accountant's delta at ``epsilon``.
      delta: the smaller: what is certified.
      method: "basic" or "pld", whichever gave ``delta`` ("basic" on a tie).
    """

    rounds: int
    epsilon_round: float
    delta_round: float
    epsilon: float
    basic_delta: float
    pld_delta: float
    delta: float
    method: str


def basic_composition(spends: Iterable[Tuple[float, float]]) -> Tuple[float, float]:
    """Basic sequential composition of ``(epsilon, delta)`` spends: ``(sum of epsilons, sum of
    deltas)``, each sum correctly rounded (``math.fsum``), so that the order of the spends never
    changes the total; an infinite spend (a release without a guarantee) makes the total
    infinite. The spends are not checked: callers validate them."""
    spends = list(spends)
    return math.fsum(eps for eps, _ in spends), math.fsum(delta for _, delta in spends)


def round_epsilon(epsilon: float, rounds: int) -> float:
    """``epsilon / rounds``, nudged down so that ``rounds`` copies composed (``basic_composition``)
    never exceed ``epsilon``."""
    eps_r = epsilon / rounds
    while basic_composition([(eps_r, 0.0)] * rounds)[0] > epsilon:
        eps_r = math.nextafter(eps_r, 0.0)
    return eps_r


def _pld_interval(epsilon_round: float) -> float:
    """A grid step of about ``PLD_INTERVAL`` of which ``epsilon_round`` is a whole multiple.

    The pessimistic PLD rounds the pair's loss ``eps_r`` up to the grid; off the grid, L rounds'
    loss lands just above ``L eps_r``, where it is read, and the mass of "every round at +eps_r"
    counts into delta: at eps_r = 0.123456, L = 7 that tripled delta (5.8e-6 for 2.1e-6)."""
    if epsilon_round <= 0.0:
        return PLD_INTERVAL
    steps = math.ceil(epsilon_round / PLD_INTERVAL)
    interval = epsilon_round / steps
    while math.ceil(epsilon_round / interval) > steps:  # float division a hair above steps
        interval = math.nextafter(interval, math.inf)
    return interval


def _pld_delta(epsilon_round: float, delta_round: float, rounds: int, epsilon: float) -> float:
    from dp_accounting.pld import common, privacy_loss_distribution  # local: optional at import

    pair = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(epsilon_round, delta_round),
        value_discretization_interval=_pld_interval(epsilon_round))
    return float(pair.self_compose(rounds).get_delta_for_epsilon(epsilon))


def compose_rounds(epsilon_round: float, delta_round: float, rounds: int) -> Composition:
    """``rounds`` adaptive rounds, each ``(epsilon_round, delta_round)``-DP, composed.

    Raises:
      ValueError: epsilon_round < 0, delta_round outside [0, 1], rounds < 1.
    """
    epsilon_round = check_real("epsilon_round", epsilon_round)
    delta_round = check_real("delta_round", delta_round)
    rounds = check_int("rounds", rounds, 1)
    if not epsilon_round >= 0:
        raise ValueError(f"epsilon_round must be >= 0, got {epsilon_round!r}")
    if not 0.0 <= delta_round <= 1.0:
        raise ValueError(f"delta_round must be in [0, 1], got {delta_round!r}")
    epsilon, basic = basic_composition([(epsilon_round, delta_round)] * rounds)
    basic = min(1.0, basic)
    pld = basic if rounds == 1 else min(1.0, _pld_delta(epsilon_round, delta_round, rounds, epsilon))
    method = "pld" if pld < basic else "basic"
    return Composition(rounds=rounds, epsilon_round=epsilon_round, delta_round=delta_round, epsilon=epsilon,
                       basic_delta=basic, pld_delta=pld, delta=min(basic, pld), method=method)
