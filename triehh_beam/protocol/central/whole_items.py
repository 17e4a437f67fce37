"""Whole-item sample-and-threshold (``--protocol sample-threshold``, docs/protocol.md §2, "Whole
items, one release"): one release, no trie. Each user is kept with probability ``p_s``, each kept
user reports one whole item chosen as the vote chooses, and items with at least ``tau`` reports
are released with their count (``WholeItemCounter.extract_released`` is the only way out of the
count). ``plan_whole_items`` chooses p_s and tau, or says why it cannot, and
``estimate_interval`` is a 95% interval for an item's users given its release."""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Mapping, Optional, Tuple

import numpy as np

from triehh_beam.protocol.accounting import sample_threshold as st
from triehh_beam.protocol.accounting.privacy import exact
from triehh_beam.protocol.estimates import count_intervals
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.planning.sample_threshold_planner import (BOUND, DEFAULT_ACCOUNTING,
                                                                    DEFAULT_OBJECTIVE,
                                                                    SampleThresholdPlan,
                                                                    plan_sample_threshold)
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.protocol.rounds import columnar
from triehh_beam.protocol.rounds.vote import WeightedSequences, choose_sequence

__all__ = [
    "MAX_EPSILON",
    "Released",
    "WholeItemCounter",
    "WholeItemReports",
    "count_whole_items",
    "estimate",
    "estimate_interval",
    "plan_whole_items",
    "release_probability",
    "whole_item_report",
]

#: The theorem's range for one release (L = 1): above it there is no guarantee, not a weaker one.
MAX_EPSILON = st.MAX_ROUND_EPSILON

#: One released item: (its encoded sequence, terminator included; its sampled count >= tau).
Released = Tuple[Units, int]


def whole_item_report(weighted: WeightedSequences, u: float) -> Optional[Units]:
    """The one report of a sampled user: its item drawn by local frequency with ``u`` (the
    vote's choice, ``vote.choose_sequence``), whole; None when it holds nothing."""
    return choose_sequence(weighted, u)


@dataclasses.dataclass(frozen=True)
class WholeItemReports:
    """A batch's reports. ``counts`` are private: merge them with ``WholeItemCounter.merge``
    and let only ``WholeItemCounter.extract_released`` out.

    Attributes:
      counts: sequence -> reports in this batch (sequences with at least one).
      users: users in the batch.
      users_without_items: users holding no sequence (they report nothing).
      reports: users that reported (``users - users_without_items``).
    """

    counts: Dict[Units, int]
    users: int
    users_without_items: int
    reports: int


def count_whole_items(table: columnar.SequenceTable, uniforms: np.ndarray) -> WholeItemReports:
    """The reports of a batch of sampled users, counted per whole sequence, columnar: user ``i``
    reports exactly ``whole_item_report(table.weighted(i), uniforms[i])``.

    Raises:
      ValueError: bad uniforms (``columnar.choose_codes``).
    """
    chosen = columnar.choose_codes(table, uniforms)
    picked = chosen[chosen >= 0]
    tally = np.bincount(picked, minlength=len(table.sequences))
    counts = {table.sequences[c]: int(tally[c]) for c in np.flatnonzero(tally).tolist()}
    return WholeItemReports(counts=counts, users=table.users, users_without_items=int(table.users - len(picked)),
                            reports=int(len(picked)))


class WholeItemCounter:
    """create / merge / extract for whole-item report counts, with the threshold on the way out.

    Args:
      tau: the threshold; items with at least ``tau`` reports are released, with their count.
    """

    def __init__(self, tau: int):
        if isinstance(tau, bool) or not isinstance(tau, int) or tau < 1:
            raise ValueError(f"tau must be an integer >= 1, got {tau!r}")
        self.tau = tau

    @staticmethod
    def create() -> Dict[Units, int]:
        return {}

    @staticmethod
    def add(accumulator: Dict[Units, int], counts: Mapping[Units, int]) -> Dict[Units, int]:
        """``counts`` added into ``accumulator`` in place; returns it."""
        get = accumulator.get
        for sequence, count in counts.items():
            accumulator[sequence] = get(sequence, 0) + count
        return accumulator

    @staticmethod
    def merge(accumulators: Iterable[Mapping[Units, int]]) -> Dict[Units, int]:
        merged: Dict[Units, int] = {}
        for counts in accumulators:
            WholeItemCounter.add(merged, counts)
        return merged

    def extract_released(self, counts: Mapping[Units, int]) -> Tuple[Released, ...]:
        """The items with at least ``tau`` reports and their counts, sorted by sequence; the
        counts below tau stay in the accumulator (and go when it goes)."""
        return tuple(sorted((s, int(c)) for s, c in counts.items() if c >= self.tau))


def estimate(count: int, sample_probability: float) -> float:
    """``count / p_s``: unbiased for the weighted users, the sum over users of the probability
    that the user's choice is the item (its share of the user's records: the holders, for
    one-item users), unconditionally; a released count is conditioned on ``count >= tau``,
    which biases it upward near tau."""
    if not 0.0 < sample_probability <= 1.0:
        raise ValueError(f"sample_probability must be in (0, 1], got {sample_probability!r}")
    return count / sample_probability


def estimate_interval(count: int, sample_probability: float, tau: int) -> Tuple[int, int]:
    """The published 95% interval of a released item's weighted users: it holds them with
    probability at least 95% given that the item was released (``count >= tau``), the sample's
    and the choice's spread both counted (``count_intervals.sampled_count_interval``; its low
    end is 0 for a count at tau).

    Raises:
      ValueError: a count below tau, a bad tau or probability.
    """
    return count_intervals.sampled_count_interval(count, sample_probability, tau, count_intervals.LEVEL)


def release_probability(holders: int, sample_probability: float, tau: int, share: float = 1.0) -> float:
    """``P(Binomial(holders, p_s * share) >= tau)``: an item held by ``holders`` users who each
    choose it with probability ``share`` is released with it (``sample_threshold.survival_probability``)."""
    return st.survival_probability(holders, sample_probability, tau, share)


def plan_whole_items(epsilon: float, delta: float, *, objective: float = DEFAULT_OBJECTIVE,
                     share: float = 1.0, accounting: str = DEFAULT_ACCOUNTING) -> SampleThresholdPlan:
    """p_s and tau for one whole-item release at ``(epsilon, delta)``, or why not.

    The rule: ``plan_sample_threshold(epsilon, delta, 1)``, one release (L = 1): for each tau
    the largest p_s whose delta (exact, or the bound ``exp(-C_alpha tau)``) is at most delta, and
    of those the (p_s, tau) that releases an item with the fewest holders with probability
    ``objective`` (90%; one item per user unless ``share`` says otherwise). Under the bound the
    theorem needs ``epsilon <= 1``: a larger target comes back infeasible with the condition
    named and what is certified instead; the exact accountant has no such range.

    Raises:
      ValueError: for invalid arguments (epsilon <= 0, delta outside (0, 1), ...).
    """
    plan = plan_sample_threshold(epsilon, delta, 1, objective=objective, share=share, accounting=accounting)
    if not plan.feasible and plan.accounting == BOUND and plan.target_epsilon > MAX_EPSILON:
        plan = dataclasses.replace(plan, reason=(
            f"the sample-and-threshold theorem needs epsilon <= 1 for one release (eps_r <= 1 with "
            f"L = 1); epsilon = {exact(plan.target_epsilon)} > 1 is outside it (no guarantee, not a weaker one). "
            f"It certifies at most --epsilon 1 with --protocol {Protocol.WHOLE_ITEMS}; a larger epsilon is "
            f"for --protocol {Protocol.TRIEHH} (or {Protocol.TRIEHH_PP} over L rounds, epsilon/L <= 1 each)"))
    return plan
