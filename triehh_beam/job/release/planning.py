"""The privacy plan a discovery records before any round: TrieHH's planned (or fixed, with their
Theorem 1 guarantee) theta and m for the target and the census's n (or a public ``--population``,
which the census must reach), the sample-and-threshold planner's p_s, tau and alpha for TrieHH++
and whole items (none of them depends on n), and the frequency estimates' epsilon; an infeasible
target is refused with the planner's explanation, before any record is read where n plays no
part.
"""

from __future__ import annotations

import dataclasses

from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.settings.fields import (SAMPLE_AND_THRESHOLD, planned_count_epsilon,
                                             recorded_accounting)
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.accounting import privacy
from triehh_beam.protocol.central.noisy_rounds import NoisyRoundsPlan, plan_noisy_rounds
from triehh_beam.protocol.central.partition_selection import (PartitionSelectionPlan,
                                                              plan_partition_selection)
from triehh_beam.protocol.central.whole_items import plan_whole_items
from triehh_beam.protocol.planning import parameters, planner
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
from triehh_beam.protocol.protocols import Protocol

__all__ = ["InfeasiblePlanError", "PopulationError", "check_before_census", "plan_for", "plan_for_census",
           "noisy_plan", "protocol_of", "selection_plan", "window_coverage"]


class PopulationError(ValueError):
    """The input does not hold the population the operator declared public."""


class InfeasiblePlanError(ValueError):
    """The privacy target cannot be met for this population; ``plan`` explains why."""

    def __init__(self, plan):
        super().__init__(plan.reason)
        self.plan = plan


@dataclasses.dataclass(frozen=True)
class _Refusal:
    """Stands in for a planner ``Plan`` when fixed parameters give no guarantee or exceed the
    target."""

    reason: str
    feasible: bool = False
    alternatives: tuple = ()


def protocol_of(plan: state_pb2.PrivacyPlan) -> Protocol:
    """The protocol a plan records."""
    return Protocol(plan.protocol)


def _plan_sample_threshold(config: DiscoveryConfig, population: int) -> state_pb2.PrivacyPlan:
    """TrieHH++'s plan (``plan_sample_threshold``), or whole items' (``plan_whole_items``: one
    release), as the job records it; n for the report."""
    accounting = recorded_accounting(config)
    if not config.protocol.grows_trie:
        chosen = plan_whole_items(config.epsilon, config.delta, accounting=accounting)
    else:
        chosen = plan_sample_threshold(config.epsilon, config.delta, config.max_length, accounting=accounting)
    if not chosen.feasible:
        raise InfeasiblePlanError(chosen)
    return state_pb2.PrivacyPlan(
        protocol=config.protocol,
        rule=SAMPLE_AND_THRESHOLD,
        population=population,
        max_length=config.max_length,
        target_epsilon=config.epsilon,
        target_delta=config.delta,
        theta=chosen.tau,
        epsilon=chosen.epsilon,
        delta=chosen.delta,
        alpha=chosen.alpha,
        sample_probability=chosen.sampling_probability,
        round_epsilon=chosen.epsilon_round,
        round_delta=chosen.round_delta,
        accounting=chosen.accounting,
        basic_delta=chosen.basic_delta or 0.0,
        pld_delta=chosen.pld_delta or 0.0,
        composition=chosen.composition or "",
    )


def _plan_partition_selection(config: DiscoveryConfig, population: int) -> state_pb2.PrivacyPlan:
    """Partition selection's plan (``plan_partition_selection``: always feasible), as the job
    records it: every user contributes (p_s = 1), any item with a contributing user is a
    candidate (theta = 1), epsilon is the selection's and estimate_epsilon the counts'."""
    chosen = plan_partition_selection(config.epsilon, config.delta, config.max_items_per_user, config.selection_share)
    return state_pb2.PrivacyPlan(
        protocol=config.protocol, rule=SAMPLE_AND_THRESHOLD, population=population, max_length=config.max_length,
        target_epsilon=config.epsilon, target_delta=config.delta, theta=1, epsilon=chosen.selection_epsilon,
        delta=chosen.delta, sample_probability=1.0, round_epsilon=chosen.item_epsilon, round_delta=chosen.item_delta,
        accounting=recorded_accounting(config), basic_delta=chosen.delta, composition="basic",
        estimate_epsilon=planned_count_epsilon(config), max_items_per_user=chosen.max_items,
        selection_share=chosen.selection_share)


def selection_plan(plan: state_pb2.PrivacyPlan) -> PartitionSelectionPlan:
    """The ``PartitionSelectionPlan`` a recorded partition-selection plan holds."""
    return plan_partition_selection(plan.target_epsilon, plan.target_delta, int(plan.max_items_per_user),
                                    plan.selection_share)


def _plan_noisy_rounds(config: DiscoveryConfig, population: int) -> state_pb2.PrivacyPlan:
    """Noisy prefix rounds' plan (``plan_noisy_rounds``: always feasible), as the job records it:
    every user votes (p_s = 1), theta 0 (each round's threshold follows its public frontier),
    round_epsilon each round's discrete Laplace parameter, the accountant that certified the L
    rounds, and the target (epsilon, delta) as what the ledger is charged."""
    chosen = plan_noisy_rounds(config.epsilon, config.delta, config.max_length, config.false_prefixes)
    return state_pb2.PrivacyPlan(
        protocol=config.protocol, rule=SAMPLE_AND_THRESHOLD, population=population, max_length=config.max_length,
        target_epsilon=config.epsilon, target_delta=config.delta, theta=0, epsilon=chosen.epsilon,
        delta=chosen.delta, sample_probability=1.0, round_epsilon=chosen.round_epsilon,
        accounting=chosen.accountant, composition=chosen.accountant, alphabet=config.alphabet,
        false_prefixes=chosen.false_prefixes)


def noisy_plan(plan: state_pb2.PrivacyPlan) -> NoisyRoundsPlan:
    """The ``NoisyRoundsPlan`` a recorded noisy-rounds plan holds (its noise and thresholds; the
    certificate is not recorded: the job is charged the target, ``plan.epsilon``)."""
    return NoisyRoundsPlan(epsilon=plan.epsilon, delta=plan.delta, rounds=int(plan.max_length),
                           round_epsilon=plan.round_epsilon, accountant=plan.accounting,
                           certified_epsilon=plan.epsilon, false_prefixes=plan.false_prefixes)


def check_before_census(config: DiscoveryConfig) -> None:
    """Refuses, before any record is read, a target that no population size makes feasible:
    TrieHH++'s and whole items' (their plans do not depend on n), and TrieHH's for a public
    ``--population`` (the plan for it, crowding guard included). TrieHH's for a private n needs
    the census (which counts users and reads nothing else before the plan).

    Raises:
      InfeasiblePlanError: as ``plan_for``.
    """
    if config.protocol.samples_by_probability and not config.protocol.central_only:
        _plan_sample_threshold(config, 0)
    elif config.population is not None and config.window is None:
        plan_for(config, config.population)


def plan_for(config: DiscoveryConfig, population: int) -> state_pb2.PrivacyPlan:
    """The privacy plan of ``config`` for ``population`` users, as the job records it.

    The planner picks theta and m for (epsilon, delta, L, n), or the config fixes them (the
    guarantee is then Theorem 1's for those values, which must not exceed the target; with
    ``allow_no_guarantee`` values that give none, or more than the target, run with none).

    Raises:
      InfeasiblePlanError: the target cannot be met, fixed values spend more than the target,
        or fixed values give no guarantee and ``allow_no_guarantee`` is not set.
    """
    if config.protocol.selects_partitions:
        return _plan_partition_selection(config, population)
    if config.protocol.noises_rounds:
        return _plan_noisy_rounds(config, population)
    if config.protocol.samples_by_probability:
        return _plan_sample_threshold(config, population)
    recorded = state_pb2.PrivacyPlan(
        protocol=Protocol.TRIEHH,
        rule=config.rule if config.theta is None else "fixed",
        population=population,
        max_length=config.max_length,
        target_epsilon=config.epsilon,
        target_delta=config.delta,
    )
    if config.theta is None:
        plan = planner.plan(population, config.epsilon, config.delta, config.max_length, rule=config.rule)
        if not plan.feasible:
            raise InfeasiblePlanError(plan)
        recorded.theta, recorded.gamma, recorded.batch_size = plan.theta, plan.gamma, plan.batch_size
        recorded.epsilon, recorded.delta = plan.epsilon, plan.delta
        return recorded
    recorded.theta, recorded.batch_size = config.theta, config.batch_size
    recorded.gamma = config.batch_size / population**0.5
    try:
        guarantee = privacy.theorem1(population, config.theta, config.max_length, batch_size=config.batch_size)
    except privacy.PrivacyConditionError as e:
        if not config.allow_no_guarantee:
            raise InfeasiblePlanError(_Refusal(f"fixed theta and batch size give no DP guarantee: {e}"))
        recorded.no_guarantee = True
        return recorded
    # Refused (or, for an experiment, run with no guarantee) where crowding shows Theorem 1 false
    # or too close to false to trust at these values (parameters.crowding_violation).
    _, crowded = parameters.crowding_violation(population, config.theta, config.batch_size, config.max_length,
                                               guarantee.delta)
    if crowded:
        if not config.allow_no_guarantee:
            raise InfeasiblePlanError(_Refusal(f"fixed theta = {config.theta} and m = {config.batch_size}: {crowded}"))
        recorded.no_guarantee = True
        return recorded
    # Refused, not recorded: the job would charge the ledger more than the target it was given.
    over = planner.fixed_over_target(population, config.epsilon, config.delta, config.max_length,
                                     config.theta, config.batch_size, config.rule)
    if over is not None:
        if not config.allow_no_guarantee:
            raise InfeasiblePlanError(_Refusal(*over))
        # An experiment's values: the target is not met, so the job claims no guarantee at all
        # (charged as unbounded), never one larger than it was asked for.
        recorded.no_guarantee = True
        return recorded
    recorded.epsilon, recorded.delta = guarantee.epsilon, guarantee.delta
    return recorded


def plan_for_census(config: DiscoveryConfig, counted: int) -> state_pb2.PrivacyPlan:
    """The plan for a census that counted ``counted`` distinct users: for the count, or for
    the public population ``config.population`` (recorded as ``public_population``).

    Raises:
      PopulationError: the input holds fewer users than the declared population (m of fewer
        users is a higher sampling rate than planned), or so many more that Theorem 1's
        conditions fail for them at the planned m and theta.
      InfeasiblePlanError: as ``plan_for``.
    """
    declared = config.population
    if declared is None:
        return _with_estimates(plan_for(config, counted), config)
    if counted < declared:
        raise PopulationError(
            f"--population {declared:,} is more than the {counted:,} distinct users the input "
            "holds: sampling m of fewer users than planned would exceed the planned epsilon; "
            "no round was run")
    plan = plan_for(config, declared)
    plan.public_population = declared
    if counted > declared and not plan.no_guarantee and not protocol_of(plan).samples_by_probability:
        violations = privacy.theorem1_violations(counted, plan.theta, batch_size=plan.batch_size)
        if violations:
            raise PopulationError(
                f"the input holds {counted:,} distinct users, so many more than --population "
                f"{declared:,} that Theorem 1 fails for them at m={plan.batch_size:,}: "
                + "; ".join(violations))
    return _with_estimates(plan, config)


def _with_estimates(plan: state_pb2.PrivacyPlan, config: DiscoveryConfig) -> state_pb2.PrivacyPlan:
    """``plan`` with the frequency estimates' epsilon (``--estimate-frequencies``), spent on top
    of the discovery's by basic composition (``ledger.plan_spend``)."""
    plan.estimate_epsilon = planned_count_epsilon(config)  # partition selection: its counts' share
    return plan


def window_coverage(plan: state_pb2.PrivacyPlan) -> int:
    """The most users a TrieHH window planned for a declared population N may hold with the plan's
    guarantee: m^2. Below N the window is sampled as one of N (phantom users who hold nothing);
    from N to m^2 Theorem 1's conditions hold at the window's n (gamma = m/sqrt(n) >= 1, the
    others only ease as n grows) with a smaller epsilon and the same delta, and the crowding bound
    falls with n at a fixed m. Above m^2 gamma < 1: no guarantee, which every window's document
    states alike, whatever its n (``windowed``)."""
    return plan.batch_size * plan.batch_size
