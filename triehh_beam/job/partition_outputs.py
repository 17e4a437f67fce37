"""What a partition-selection job (``--protocol partition-selection``) publishes:
``heavy_hitters.json`` with the kept items and, unless the plan spends its whole epsilon on the
selection, each item's noisy count of contributing users and the 95% interval of the noise
(docs/protocol.md §7). Nothing of a dropped item is in it: the state holds only kept items."""

from __future__ import annotations

from typing import List, Optional, Tuple

from triehh_beam.job import outputs
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.count_intervals import LEVEL
from triehh_beam.protocol.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol import sample_threshold
from triehh_beam.protocol.encoding import ItemEncoder, Units
from triehh_beam.protocol.partition_selection import DEFAULT_SELECTION_SHARE, holders_for
from triehh_beam.protocol.protocols import Protocol

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


def central_advice(plan: state_pb2.PrivacyPlan) -> Optional[str]:
    """discover's ``advice:`` line when partition selection (central: this job reads the records
    on the server) releases a whole item with fewer holders than a sample-and-threshold plan
    (``triehh++``: an item of L units, worst case; ``sample-threshold``), or None. Both figures
    are functions of the target alone (public); it never changes what runs."""
    protocol = Protocol(plan.protocol)
    if protocol.selects_partitions or not protocol.samples_by_probability or plan.no_guarantee:
        return None
    ours = holders_for(0.9, plan.target_epsilon * DEFAULT_SELECTION_SHARE, plan.target_delta)
    length = plan.max_length if protocol.grows_trie else 1
    theirs = sample_threshold.min_holders(0.9, plan.sample_probability, int(plan.theta), length)
    if theirs is None or ours >= theirs:
        return None
    what = f"an item of {plan.max_length} units (worst case)" if protocol.grows_trie else "an item"
    return (f"advice: this job reads the records on the server (central DP): --protocol partition-selection "
            f"releases a whole item held by {ours:,} users 90% of the time at this target, with a noisy count, "
            f"where this plan needs {theirs:,} for {what} (docs/guides/partition-selection.md)")
