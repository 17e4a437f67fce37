"""What the census's counts must show before a job spends any budget: no more bad rows than
``max_bad_fraction`` allows (``BadInputError``), and no more users without a usable item than
``max_unusable_fraction`` allows (``UnusableItemsError``): a user all of whose items are longer
than L allows (when too-long items are dropped) or cannot be encoded is sampled like any other
but never votes, so such a population spends its budget on nothing. The refusal names the fixes,
each with what the planner says it would cost: ``--truncate-long-items`` (the same plan; only the
first L units of long items can be found), a larger ``--max-length`` (the plan at that L: larger
L, larger epsilon per unit of theta and m) and a larger ``--unit-size`` (the same plan; each unit
holds more characters, so votes split over more extensions). Every figure here is a count, so
private operator data, like the refusal messages themselves.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Dict, List, Optional

from triehh_beam.beam.census import NEVER, Census
from triehh_beam.io.drops import bad_fraction, describe_drops
from triehh_beam.job.release.planning import InfeasiblePlanError, plan_for
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind

if TYPE_CHECKING:
    from triehh_beam.job.settings.config import DiscoveryConfig

__all__ = ["BadInputError", "UnusableItemsError", "check_census", "describe_item_counters", "describe_unusable",
           "unusable_fixes"]

# A fix is aimed at leaving at most this share of the users without a usable item (or at most
# the job's ``max_unusable_fraction``, when that is lower).
FIX_TARGET = 0.05


class BadInputError(ValueError):
    """More of the input is bad than the job allows (``max_bad_fraction``, or
    ``max_unusable_fraction`` for ``UnusableItemsError``)."""


class UnusableItemsError(BadInputError):
    """More of the users than the job allows hold no usable item (``max_unusable_fraction``)."""


def _unit_name(encoder: ItemEncoder) -> str:
    return {ItemKind.TEXT: "characters", ItemKind.BYTES: "bytes", ItemKind.INT: "bits"}[encoder.kind]


def _unusable_at(census: Census, limit: float) -> int:
    """Users with no usable item if items of up to ``limit`` base units were usable."""
    return sum(users for length, users in census.unusable_lengths.items() if length > limit)


def _smallest_limit(census: Census, allowed: float) -> Optional[int]:
    """The shortest item length (base units) that would leave at most ``allowed`` users without a
    usable item, or None if items that cannot be encoded alone are more."""
    left = census.unusable_users
    if left <= allowed:
        return 0
    for length in sorted(census.unusable_lengths):
        if length == NEVER:
            break
        left -= census.unusable_lengths[length]
        if left <= allowed:
            return length
    return None


def _share(users: int, census: Census) -> str:
    return f"{users / census.users:.1%}" if users else "none"


def _plan_text(config: "DiscoveryConfig", population: int, **changes) -> str:
    """What the planner says of ``config`` with ``changes``, in a few words."""
    changed = dataclasses.replace(config, **changes) if changes else config
    try:
        plan = plan_for(changed, population)
    except InfeasiblePlanError as e:
        text = (f"infeasible at epsilon={config.epsilon:g}, delta={config.delta:g}, "
                f"L={changed.max_length} for this population")
        # The planner's way out that keeps the population and delta, in its own words.
        raise_epsilon = [a for a in getattr(e.plan, "alternatives", ()) if a.kind == "raise_epsilon"]
        return text + (f" ({raise_epsilon[0].description.split(' (')[0]})" if raise_epsilon else "")
    if plan.no_guarantee:
        return f"theta={plan.theta}, m={plan.batch_size:,} (no DP guarantee)"
    return (f"feasible: theta={plan.theta}, m={plan.batch_size:,} per round, "
            f"epsilon={plan.epsilon:.4g} at L={plan.max_length}")


def _valid_encoder(config: "DiscoveryConfig", **changes) -> bool:
    try:
        dataclasses.replace(config.encoder, **changes)
    except ValueError:
        return False
    return True


def unusable_fixes(config: "DiscoveryConfig", census: Census, population: int) -> List[str]:
    """The settings that would give more users a usable item, each with its plan (one phrase
    each, most direct first; empty when no setting helps: the items cannot be encoded)."""
    encoder = config.encoder
    unit = _unit_name(encoder)
    limit = encoder.max_item_units * encoder.unit_size
    threshold = config.max_unusable_fraction if config.max_unusable_fraction is not None else 1.0
    current_plan = _plan_text(config, population)
    fixes = []
    never = census.unusable_lengths.get(NEVER, 0)
    if not config.truncate_long_items and census.unusable_users > never:
        fixes.append(
            f"--truncate-long-items (cuts long items to their first {encoder.max_length} units, so only "
            f"those prefixes can be found, never the whole items; leaves {_share(never, census)} of the "
            f"users without a usable item; the plan is unchanged, {current_plan})")
    length = None
    for target in sorted({min(threshold, FIX_TARGET), threshold}):
        length = _smallest_limit(census, target * census.users)
        if length is not None:
            break
    if length is None or length <= limit:
        return fixes
    left = _share(_unusable_at(census, length), census)
    longer = math.ceil(length / encoder.unit_size) + 1
    if _valid_encoder(config, max_length=longer):
        fixes.append(
            f"--max-length {longer} (items of up to {length:,} {unit}; leaves {left} of the users "
            f"without a usable item; {_plan_text(config, population, max_length=longer)})")
    wider = math.ceil(length / encoder.max_item_units)
    if _valid_encoder(config, unit_size=wider):
        fixes.append(
            f"--unit-size {wider} (units of {wider} {unit}: items of up to {encoder.max_item_units * wider:,} "
            f"{unit} at L={encoder.max_length}; leaves {left} of the users without a usable item; the plan "
            f"is unchanged, {current_plan}; a round then extends prefixes by {wider} {unit}, so the votes "
            "split over more extensions)")
    return fixes


def describe_item_counters(counters: Dict[str, int]) -> str:
    """``"; items too long 12, not encodable 3"`` for a census's item counters ("" for none)."""
    parts = [f"{what} {counters[name]:,}" for name, what in (("items_too_long", "items too long"),
                                                            ("items_unencodable", "items not encodable"))
             if counters.get(name)]
    return f"; {', '.join(parts)}" if parts else ""


def describe_unusable(config: "DiscoveryConfig", census: Census) -> str:
    """One phrase for an operator: the users without a usable item and why (counts: private)."""
    encoder = config.encoder
    limit = encoder.max_item_units * encoder.unit_size
    never = census.unusable_lengths.get(NEVER, 0)
    why = []
    if census.unusable_users > never:
        why.append(f"{census.unusable_users - never:,} hold only items longer than {limit:,} "
                   f"{_unit_name(encoder)} (--max-length {encoder.max_length})")
    if never:
        why.append(f"{never:,} only items that cannot be encoded")
    line = (f"{census.unusable_users:,} of {census.users:,} users ({_share(census.unusable_users, census)}) "
            "hold no usable item")
    return line + (f": {'; '.join(why)}" if why else "")


def check_census(config: "DiscoveryConfig", counters: Dict[str, int], census: Census, population: int) -> None:
    """Refuses, before any budget is spent, input that is too bad or too unusable.

    Args:
      config: the job.
      counters: the census job's counters (records read, dropped per reason).
      census: what the census counted.
      population: the population the job plans for (the census count, or the public N).

    Raises:
      BadInputError: more of the rows are bad than ``config.max_bad_fraction``.
      UnusableItemsError: more of the users hold no usable item than
        ``config.max_unusable_fraction``; the message names the fixes and their plans.
    """
    bad = bad_fraction(counters)
    if config.max_bad_fraction is not None and bad > config.max_bad_fraction:
        raise BadInputError(
            f"{bad:.2%} of the records are bad, more than --max-bad-fraction "
            f"{config.max_bad_fraction:g} ({describe_drops(counters)}); no round was run and no budget was spent "
            "(--dead-letter PATH writes the bad rows; --max-bad-fraction 1 runs anyway)"
        )
    if not census.users:
        raise BadInputError(
            f"the input {config.source} holds no usable records: check that --input names non-empty "
            "files and that --format, --user-column and --item-column match them; no round was run and "
            "no budget was spent")
    threshold = config.max_unusable_fraction
    if threshold is None or not census.users or census.unusable_users <= threshold * census.users:
        return
    fixes = unusable_fixes(config, census, population)
    message = (f"{describe_unusable(config, census)}, more than --max-unusable-fraction {threshold:g}: "
               "they would be sampled but could never vote; no round was run and no budget was spent. ")
    if fixes:
        message += "Fixes (each planned for this input): " + "; ".join(fixes)
    else:
        message += "No length or unit setting makes their items usable: check --item-type and the item column"
    raise UnusableItemsError(message + " (--max-unusable-fraction 1 runs anyway)")
