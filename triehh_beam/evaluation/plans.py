"""How an evaluation plans, bounds and describes each protocol: TrieHH's plan is the planner's at
(ε, δ, L) with the evaluation's rule; TrieHH++'s and the whole-item release's are the
sample-and-threshold planners' at the same (ε, δ), accounted exactly as ``discover``'s default.
Each item's bound is TrieHH's Proposition 1, TrieHH++'s ``P(Binomial(f, p_s) >= tau) ** len`` or
the whole-item release probability ``P(Binomial(f, p_s) >= tau)``, each exact for one item per
user sharing no prefix; the privacy block is what ``evaluation.json`` records of a configuration,
R runs composed included."""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

from triehh_beam.protocol.accounting import privacy
from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.central.whole_items import plan_whole_items, release_probability
from triehh_beam.protocol.planning import planner, utility
from triehh_beam.protocol.planning.sample_threshold_planner import (SampleThresholdPlan,
                                                                    plan_sample_threshold)
from triehh_beam.protocol.protocols import Protocol

__all__ = ["bound_for", "plan_for", "plan_triehh_pp", "privacy_block", "whole_item_plans"]

_REPEATED_RUNS = ("R runs on the same users are R releases (basic composition): evaluate on data whose "
                  "privacy is not at stake")
_GUARANTEES = {
    Protocol.TRIEHH: "(epsilon, delta)-DP with user-level adjacency (TrieHH Theorem 1), for one run, "
                     "covering all max_length rounds",
    Protocol.TRIEHH_PP: "(epsilon, delta)-DP with user-level adjacency (sample-and-threshold), each of "
                        "max_length rounds (epsilon_round, delta_round), composed (docs/protocol.md §2)",
    Protocol.WHOLE_ITEMS: "(epsilon, delta)-DP with user-level adjacency (sample-and-threshold, one release)",
}


def plan_triehh_pp(epsilon: float, delta: float, max_length: int) -> SampleThresholdPlan:
    """TrieHH++'s plan for one configuration, accounted exactly (infeasible ones carry the reason)."""
    return plan_sample_threshold(epsilon, delta, max_length)


def plan_for(protocol: Protocol, n: int, epsilon: float, delta: float, max_length: int, rule: str):
    """The plan of one TrieHH or TrieHH++ configuration (infeasible ones carry the reason)."""
    if protocol is Protocol.TRIEHH_PP:
        return plan_triehh_pp(epsilon, delta, max_length)
    return planner.plan(n, epsilon, delta, max_length, rule, with_alternatives=False)


def whole_item_plans(epsilons: Sequence[float], delta: float, max_length: int
                     ) -> Tuple[List[Tuple[float, SampleThresholdPlan]], List[dict]]:
    """(feasible (ε, plan) pairs, the infeasible ones as ``evaluation.json``'s ``infeasible``
    entries) of the whole-item release, which runs at unit size 1 with ``max_length`` units."""
    feasible, infeasible = [], []
    for epsilon in epsilons:
        plan = plan_whole_items(epsilon, delta)
        if plan.feasible:
            feasible.append((epsilon, plan))
        else:
            infeasible.append({"protocol": Protocol.WHOLE_ITEMS.value, "epsilon": epsilon, "unit_size": 1,
                               "max_length": max_length, "reason": plan.reason})
    return feasible, infeasible


def bound_for(protocol: Protocol, plan, n: int) -> Callable[[int, int], float]:
    """``(holders, length in units with the terminator) -> `` the probability that a run finds an
    item with that many holders, for one item per user sharing no prefix."""
    if protocol is Protocol.TRIEHH_PP:
        return lambda users, length: st.discovery_probability(users, plan.sampling_probability, plan.tau, length)
    if protocol is Protocol.WHOLE_ITEMS:
        return lambda users, length: release_probability(users, plan.sampling_probability, plan.tau)
    return lambda users, length: utility.discovery_probability(users, n, plan.batch_size, plan.theta, length)


def privacy_block(protocol: Protocol, plan, runs: int) -> dict:
    """The ``privacy`` of a configuration in ``evaluation.json``: the plan's guarantee and
    parameters, and the ``runs`` runs composed."""
    total = privacy.compose([(plan.epsilon, plan.delta)] * runs)
    block = {"model": "central", "guarantee": _GUARANTEES[protocol]}
    if protocol.samples_by_probability:
        # How delta was certified ("exact" or "bound"), and for TrieHH++ how rounds composed.
        block["accounting"] = plan.accounting
        if protocol.grows_trie:
            block["composition"] = plan.composition
    block.update(epsilon=plan.epsilon, delta=plan.delta, target_epsilon=plan.target_epsilon,
                 target_delta=plan.target_delta)
    if protocol is Protocol.TRIEHH:
        block.update(theta=plan.theta, batch_size=plan.batch_size, gamma=plan.gamma, population=plan.n,
                     max_length=plan.max_length, rule=plan.rule)
    else:
        block.update(alpha=plan.alpha, tau=plan.tau, sampling_probability=plan.sampling_probability)
    if protocol is Protocol.TRIEHH_PP:
        block.update(epsilon_round=plan.epsilon_round, delta_round=plan.round_delta, max_length=plan.max_length)
    block["all_runs_composed"] = {"epsilon": total.epsilon, "delta": total.delta, "note": _REPEATED_RUNS}
    return block
