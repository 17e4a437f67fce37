"""What an evaluation needs to run TrieHH++ beside TrieHH: its plan, its privacy block and its
per-item worst-case bound. The plan is ``protocol.sample_threshold_planner``'s at the same
(ε, δ, L) TrieHH is evaluated at (its default accounting, exact, as ``discover``'s); the privacy
block records alpha, tau, p_s, the accounting and the per-round and composed (ε, δ)
(docs/protocol.md §2); the bound is ``P(Binomial(f, p_s) >= tau) ** len``,
exact for one item per user sharing no prefix (``protocol.sample_threshold``). The runs
themselves are the pipeline's (``discover --protocol triehh++``) or the keyed simulation's
(``simulation.simulate_many_sample_threshold``), which are the same draws (``experiment``).
"""

from __future__ import annotations

from typing import Callable

from triehh_beam.protocol import privacy
from triehh_beam.protocol import sample_threshold as st
from triehh_beam.protocol.sample_threshold_planner import SampleThresholdPlan, plan_sample_threshold

__all__ = ["bound_for", "is_sample_threshold", "plan", "privacy_block"]


def plan(epsilon: float, delta: float, max_length: int) -> SampleThresholdPlan:
    """TrieHH++'s plan for one configuration, accounted exactly (infeasible ones carry the reason)."""
    return plan_sample_threshold(epsilon, delta, max_length)


def is_sample_threshold(plan_or_other) -> bool:
    return isinstance(plan_or_other, SampleThresholdPlan)


def bound_for(plan: SampleThresholdPlan) -> Callable[[int, int], float]:
    """``(holders, length) -> P(Binomial(holders, p_s) >= tau) ** length``."""
    return lambda users, length: st.discovery_probability(users, plan.sampling_probability, plan.tau, length)


def privacy_block(plan: SampleThresholdPlan, runs: int) -> dict:
    """The ``privacy`` of a TrieHH++ configuration in ``evaluation.json``."""
    total = privacy.compose([(plan.epsilon, plan.delta)] * runs)
    return {
        "model": "central",
        "guarantee": (
            "(epsilon, delta)-DP with user-level adjacency (sample-and-threshold), each of max_length "
            "rounds (epsilon_round, delta_round), composed (docs/protocol.md §2)"
        ),
        # How delta_round was certified ("exact" or "bound") and how the rounds were composed.
        "accounting": plan.accounting,
        "composition": plan.composition,
        "epsilon": plan.epsilon,
        "delta": plan.delta,
        "target_epsilon": plan.target_epsilon,
        "target_delta": plan.target_delta,
        "alpha": plan.alpha,
        "tau": plan.tau,
        "sampling_probability": plan.sampling_probability,
        "epsilon_round": plan.epsilon_round,
        "delta_round": plan.round_delta,
        "max_length": plan.max_length,
        "all_runs_composed": {
            "epsilon": total.epsilon,
            "delta": total.delta,
            "note": "R runs on the same users are R releases (basic composition): evaluate on "
                    "data whose privacy is not at stake",
        },
    }
