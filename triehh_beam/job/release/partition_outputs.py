"""What a partition-selection job (``--protocol partition-selection``) publishes:
``heavy_hitters.json`` with the kept items and, unless the plan spends its whole epsilon on the
selection, each item's noisy count of contributing users and the 95% interval of the noise
(docs/protocol.md §7). Nothing of a dropped item is in it: the state holds only kept items."""

from __future__ import annotations

from typing import List, Optional, Tuple

from triehh_beam.job.release import outputs
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.accounting import sample_threshold
from triehh_beam.protocol.central.partition_selection import DEFAULT_SELECTION_SHARE, holders_for
from triehh_beam.protocol.estimates.count_intervals import LEVEL
from triehh_beam.protocol.items.encoding import ItemEncoder, Units
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric

__all__ = ["ESTIMATE_QUANTITY", "INTERVAL_NOTE", "STOP_REASON", "central_advice", "published_document"]

STOP_REASON = "one release (partition selection: every user contributing, no rounds, no trie)"
#: What a released count counts.
ESTIMATE_QUANTITY = (
    "contributing users: the users whose contributed items (up to max_items_per_user distinct items "
    "each, drawn by their share of the user's records) include this item; its number of holders when "
    "no user holds more than max_items_per_user items"
)
INTERVAL_NOTE = (
    "count: the item's contributing users plus two-sided geometric noise of epsilon "
    "count_epsilon / max_items_per_user (it may be below the true count, even negative); interval: "
    "count +- the noise's 95% half-width, which holds the contributing users with probability at "
    "least 95% whatever the selection (the noise is drawn independently of the keep coin)"
)


def published_document(state: state_pb2.JobState, items: List[Tuple[Units, int]], encoder: ItemEncoder) -> dict:
    """``heavy_hitters.json``: discover's top-level shape (``heavy_hitters``, an empty
    ``frequent_prefixes``, the privacy block, the encoding) plus ``released``: per item its noisy
    ``count`` and ``interval`` when the plan publishes counts (``plan.estimate_epsilon > 0``),
    else the item alone. ``items``: the state's release, most counted first."""
    plan = state.plan
    with_counts = plan.estimate_epsilon > 0
    half = TwoSidedGeometric(plan.estimate_epsilon / plan.max_items_per_user).half_width(LEVEL) if with_counts else 0
    values = [(outputs.json_value(encoder.decode(s), encoder), count) for s, count in items]
    document = {
        "heavy_hitters": [value for value, _ in values],
        "released": [{"item": value, "count": count, "interval": [count - half, count + half]} if with_counts
                     else {"item": value} for value, count in values],
        "frequent_prefixes": [],
        "rounds_run": 1,
        "stop_reason": state.stop_reason,
        "privacy": outputs.published_plan_document(plan),
        "encoding": outputs.encoding_document(state, encoder),
        "job_id": state.job_id,
        "created_at": state.created_at,
    }
    if with_counts:
        document["estimates"] = {"quantity": ESTIMATE_QUANTITY, "level": LEVEL, "half_width": half,
                                 "interval_note": INTERVAL_NOTE}
    return document


def central_advice(plan: state_pb2.PrivacyPlan, unit_size: int = 1) -> Optional[str]:
    """discover's ``advice:`` line when a central protocol (this job reads the records on the
    server) releases an item with fewer holders than a sample-and-threshold plan (``triehh++``:
    an item of L units, worst case; ``sample-threshold``): partition selection (a whole item),
    and for a trie noisy prefix rounds (the same worst-case item, units of ``unit_size`` letters
    a-z, a frontier of 100 after round 1); None when neither does. Every figure is a function of
    the target alone (public); it never changes what runs."""
    protocol = Protocol(plan.protocol)
    if protocol.central_only or not protocol.samples_by_probability or plan.no_guarantee:
        return None
    length = plan.max_length if protocol.grows_trie else 1
    theirs = sample_threshold.min_holders(0.9, plan.sample_probability, int(plan.theta), length)
    if theirs is None:
        return None
    what = f"an item of {plan.max_length} units (worst case)" if protocol.grows_trie else "an item"
    found = []
    ours = holders_for(0.9, plan.target_epsilon * DEFAULT_SELECTION_SHARE, plan.target_delta)
    if ours < theirs:
        found.append(f"--protocol partition-selection releases a whole item held by {ours:,} users "
                     "(docs/guides/partition-selection.md)")
    if protocol.grows_trie:
        noisy = _noisy_rounds_holders(plan, unit_size)
        if noisy < theirs:
            found.append(f"--protocol noisy-rounds releases it with {noisy:,} (a-z units, a frontier of 100; "
                         "docs/protocol.md §8)")
    if not found:
        return None
    return (f"advice: this job reads the records on the server (central DP): {'; '.join(found)}, 90% of the "
            f"time at this target, with noisy counts, where this plan needs {theirs:,} for {what}")


def _noisy_rounds_holders(plan: state_pb2.PrivacyPlan, unit_size: int) -> int:
    """The holders noisy prefix rounds need for a 90% release of a worst-case item of L units
    at ``plan``'s target (``NoisyRoundsPlan.holders_for``; candidates: a-z units, 100 prefixes)."""
    from triehh_beam.protocol.central.noisy_release import candidate_units
    from triehh_beam.protocol.central.noisy_rounds import DEFAULT_ALPHABET, plan_noisy_rounds

    noisy = plan_noisy_rounds(plan.target_epsilon, plan.target_delta, int(plan.max_length))
    units = len(candidate_units(DEFAULT_ALPHABET, unit_size))
    return noisy.holders_for(0.9, [units - 1] + [100 * units] * (int(plan.max_length) - 1))
