"""Unit-size advice (docs/protocol.md §2, "Unit-size advice (both protocols)"): for each unit size
1..4 and the whole item, under TrieHH and TrieHH++, what the planners give at ``L = ceil(c/k) + 1``
and the holders an item of ``c`` characters needs to be found (``compare_units``); the
recommendation (``recommend``) is the smallest unit size whose 90% holders are at most ceil(F n),
and ``discover_advice`` is what ``discover`` says when another unit size finds items ``FAR``
times rarer than the user's choice."""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Iterable, List, Optional, Tuple

from triehh_beam.protocol.accounting import sample_threshold
from triehh_beam.protocol.checks import check_int, check_real
from triehh_beam.protocol.planning import parameters, planner, utility
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
from triehh_beam.protocol.protocols import Protocol

__all__ = [
    "FAR",
    "PROBABILITIES",
    "PROTOCOLS",
    "RECOMMEND_PROBABILITY",
    "UNIT_SIZES",
    "DiscoverAdvice",
    "Recommendation",
    "UnitAdvice",
    "UnitOption",
    "compare_units",
    "discover_advice",
    "max_length_for",
    "option",
    "percent",
    "recommend",
]

#: The protocols compared (those that grow a trie of units).
PROTOCOLS = (Protocol.TRIEHH, Protocol.TRIEHH_PP)
_NAMES = {Protocol.TRIEHH: "TrieHH", Protocol.TRIEHH_PP: "TrieHH++"}
#: The unit sizes compared, besides the whole item.
UNIT_SIZES = (1, 2, 3, 4)
#: The discovery probabilities of the table.
PROBABILITIES = (0.5, 0.9, 0.99)
#: The recommendation compares the holders needed for this discovery probability.
RECOMMEND_PROBABILITY = 0.9
#: ``discover`` advises when another unit size finds items this many times rarer at 90%.
FAR = 2.0


def _check_protocol(protocol) -> Protocol:
    """``protocol`` as a ``Protocol`` of ``PROTOCOLS``; raises ValueError naming them otherwise."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    return Protocol(protocol)


def max_length_for(max_characters: int, unit_size: int) -> int:
    """``L = ceil(c / k) + 1``: the units (terminator included) of an item of ``c`` characters."""
    max_characters = check_int("max_characters", max_characters, 1)
    unit_size = check_int("unit_size", unit_size, 1)
    return -(-max_characters // unit_size) + 1


@dataclasses.dataclass(frozen=True)
class UnitOption:
    """One (protocol, unit size) row of the comparison.

    Attributes:
      protocol: ``Protocol.TRIEHH`` or ``Protocol.TRIEHH_PP``.
      unit_size: characters per unit (the whole item's: ``max_characters``).
      whole_item: one unit is the whole item (L = 2).
      max_length: L, the units of the longest item, terminator included (also the rounds).
      reveals: the most characters of its item a sampled user reveals per round (one unit).
      feasible: the protocol's planner certifies the target at this L (and n).
      reason: the planner's reason when it does not (None when feasible).
      threshold: theta (TrieHH) or tau (TrieHH++); None when infeasible.
      batch_size: TrieHH's m per round; None for TrieHH++ or when infeasible.
      sampling_rate: the share of users in each round's sample: m / n (TrieHH) or p_s (TrieHH++).
      holders: the fewest holders found with each of ``PROBABILITIES`` in the worst case (None
        where unreachable); empty when infeasible.
      n: the population (None: TrieHH++ holders only; TrieHH cannot be planned without it).
      epsilon, delta: what the plan achieves (None when infeasible).
    """

    protocol: Protocol
    unit_size: int
    whole_item: bool
    max_length: int
    reveals: int
    feasible: bool
    reason: Optional[str] = None
    threshold: Optional[int] = None
    batch_size: Optional[int] = None
    sampling_rate: Optional[float] = None
    holders: Tuple[Optional[int], ...] = ()
    n: Optional[int] = None
    epsilon: Optional[float] = None
    delta: Optional[float] = None

    def holders_for(self, probability: float) -> Optional[int]:
        """The holders needed for one of ``PROBABILITIES`` (None: infeasible or unreachable)."""
        if not self.feasible:
            return None
        return self.holders[PROBABILITIES.index(probability)]

    def fraction_for(self, probability: float) -> Optional[float]:
        """``holders_for(probability) / n`` (None without n, or when there is no count)."""
        count = self.holders_for(probability)
        return None if count is None or self.n is None else count / self.n

    @property
    def label(self) -> str:
        """``"unit 3"`` or ``"whole item"``."""
        return "whole item" if self.whole_item else f"unit {self.unit_size}"

    @property
    def flags(self) -> str:
        """The ``discover`` flags that select this row: ``--unit-size K --max-length L``, and
        what they mean when one unit holds the whole item."""
        whole = " (one unit per item: whole items)" if self.whole_item else ""
        return f"--unit-size {self.unit_size} --max-length {self.max_length}{whole}"

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["holders"] = [
            {"probability": p, "count": count,
             "fraction": None if count is None or self.n is None else count / self.n}
            for p, count in zip(PROBABILITIES, self.holders)
        ]
        return out


def option(
    protocol: str,
    unit_size: int,
    max_characters: int,
    epsilon: float,
    delta: float,
    n: Optional[int] = None,
    *,
    rule: str = "authors",
    share: float = 1.0,
) -> UnitOption:
    """One row: ``protocol``'s plan at ``L = max_length_for(max_characters, unit_size)`` and the
    holders an item of ``max_characters`` characters (``L`` units, the worst case) needs.

    ``unit_size >= max_characters`` is the whole item (L = 2; ``unit_size`` is recorded as
    ``max_characters``, the characters it reveals).

    Raises:
      ValueError: for invalid arguments (the planners' own messages).
    """
    protocol = _check_protocol(protocol)
    max_characters = check_int("max_characters", max_characters, 1)
    unit_size = min(check_int("unit_size", unit_size, 1), max_characters)
    length = max_length_for(max_characters, unit_size)
    common = dict(protocol=protocol, unit_size=unit_size, whole_item=unit_size == max_characters,
                  max_length=length, reveals=unit_size, n=n)
    if protocol is Protocol.TRIEHH:
        if n is None:
            return UnitOption(feasible=False, reason="TrieHH's batch m depends on the population: "
                              "give n to plan it", **common)
        result = planner.plan(n, epsilon, delta, length, rule, with_alternatives=False)
        if not result.feasible:
            return UnitOption(feasible=False, reason=result.reason, **common)
        holders = []
        for p in PROBABILITIES:
            need = utility.min_frequency(p, n, result.batch_size, result.theta, length, share)
            holders.append(None if need is None else need.count)
        return UnitOption(feasible=True, threshold=result.theta, batch_size=result.batch_size,
                          sampling_rate=result.sampling_rate, holders=tuple(holders),
                          epsilon=result.epsilon, delta=result.delta, **common)
    result = plan_sample_threshold(epsilon, delta, length, objective=RECOMMEND_PROBABILITY,
                                   share=share)
    if not result.feasible:
        return UnitOption(feasible=False, reason=result.reason, **common)
    holders = tuple(
        sample_threshold.min_holders(p, result.sampling_probability, result.tau, length, share)
        for p in PROBABILITIES)
    return UnitOption(feasible=True, threshold=result.tau,
                      sampling_rate=result.sampling_probability, holders=holders,
                      epsilon=result.epsilon, delta=result.delta, **common)


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """The advice for one protocol.

    Attributes:
      protocol: the protocol the rows compared are of.
      option: the recommended row (None when no row qualifies).
      find_frequency: the target frequency F (None: the fewest holders was asked for).
      target_count: ``ceil(F n)``, the holders an item of frequency F has (None without F).
      closest: when nothing qualifies, the feasible row needing the fewest holders (else None).
      explanation: one or two sentences: the rule and the figures that decided it.
    """

    protocol: str
    option: Optional[UnitOption]
    find_frequency: Optional[float]
    target_count: Optional[int]
    closest: Optional[UnitOption]
    explanation: str

    def to_dict(self) -> dict:
        return {
            "protocol": self.protocol,
            "unit_size": None if self.option is None else self.option.unit_size,
            "whole_item": None if self.option is None else self.option.whole_item,
            "max_length": None if self.option is None else self.option.max_length,
            "find_frequency": self.find_frequency,
            "target_count": self.target_count,
            "closest_unit_size": None if self.closest is None else self.closest.unit_size,
            "explanation": self.explanation,
        }


def percent(fraction: float) -> str:
    """A share as a percentage to 3 significant digits (trailing zeros dropped), never in
    exponent notation: 0.0028 is ``0.28%``, 4.86e-7 is ``0.0000486%``."""
    x = 100 * fraction
    decimals = 2 if x <= 0 else max(0, 2 - math.floor(math.log10(x)))
    text = f"{x:.{decimals}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "%"


def _who(row: UnitOption) -> str:
    count = row.holders_for(RECOMMEND_PROBABILITY)
    share = "" if row.n is None else f" ({percent(count / row.n)} of n)"
    return f"{row.label} (L = {row.max_length}) needs {count:,} holders{share}"


def recommend(
    options: Iterable[UnitOption],
    protocol: str,
    find_frequency: Optional[float] = None,
) -> Recommendation:
    """The recommended row of ``protocol`` among ``options`` (all of one n and target).

    With ``find_frequency`` F: the smallest unit size whose holders for 90% discovery are at
    most ``ceil(F n)`` (``utility.count_for_fraction``), since all those find an item of
    frequency F and a smaller unit reveals fewer characters per round; none when no feasible
    row qualifies (``closest`` is then the one needing the fewest). Without F: the row needing
    the fewest holders for 90%, the smaller unit on a tie.

    Raises:
      ValueError: F given without n, F outside (0, 1], or an unknown protocol.
    """
    protocol = _check_protocol(protocol)
    rows = sorted((o for o in options if o.protocol == protocol), key=lambda o: o.unit_size)
    found = [o for o in rows if o.holders_for(RECOMMEND_PROBABILITY) is not None]
    fewest = min(found, key=lambda o: (o.holders_for(RECOMMEND_PROBABILITY), o.unit_size),
                 default=None)
    name = _NAMES[protocol]
    if find_frequency is None:
        if fewest is None:
            return Recommendation(protocol, None, None, None, None,
                                  f"{name}: no unit size is feasible at this target")
        return Recommendation(protocol, fewest, None, None, None,
                              f"{name}: {_who(fewest)} for 90% discovery, the fewest of the unit "
                              f"sizes compared")
    n = {o.n for o in rows}
    if len(n) != 1 or None in n:
        raise ValueError("a target frequency needs the population n (holders = ceil(F n))")
    find_frequency = check_real("find_frequency", find_frequency)
    if not 0 < find_frequency <= 1:
        raise ValueError(f"find_frequency must be in (0, 1], got {find_frequency:g}")
    target = utility.count_for_fraction(find_frequency, n.pop())
    rule = (f"the smallest unit size whose 90% holders are at most ceil(F n) = {target:,} "
            f"(F = {percent(find_frequency)}), as smaller units reveal less of an item per round")
    for row in found:
        if row.holders_for(RECOMMEND_PROBABILITY) <= target:
            return Recommendation(protocol, row, find_frequency, target, None,
                                  f"{name}: {_who(row)} for 90%; the rule: {rule}")
    why = "no unit size is feasible at this target" if fewest is None else (
        f"no unit size finds it at 90%: the closest, {_who(fewest)}")
    return Recommendation(protocol, None, find_frequency, target, fewest, f"{name}: {why}; the rule: {rule}")


@dataclasses.dataclass(frozen=True)
class UnitAdvice:
    """The comparison table and one recommendation per protocol compared."""

    epsilon: float
    delta: float
    max_characters: int
    n: Optional[int]
    share: float
    rule: str
    find_frequency: Optional[float]
    options: Tuple[UnitOption, ...]
    recommendations: Tuple[Recommendation, ...]

    def recommendation(self, protocol: str) -> Recommendation:
        return next(r for r in self.recommendations if r.protocol == protocol)

    def to_dict(self) -> dict:
        return {
            "epsilon": self.epsilon, "delta": self.delta, "max_characters": self.max_characters,
            "population": self.n, "item_share": self.share, "rule": self.rule,
            "find_frequency": self.find_frequency,
            "recommendation_probability": RECOMMEND_PROBABILITY,
            "options": [o.to_dict() for o in self.options],
            "recommendations": [r.to_dict() for r in self.recommendations],
        }


def _candidates(max_characters: int, unit_sizes: Iterable[int]) -> List[int]:
    """Unit sizes below the item's length, then the whole item (larger ones repeat it)."""
    return sorted({k for k in unit_sizes if k < max_characters} | {max_characters})


def compare_units(
    epsilon: float,
    delta: float,
    max_characters: int,
    n: Optional[int] = None,
    *,
    protocols: Iterable[str] = PROTOCOLS,
    unit_sizes: Iterable[int] = UNIT_SIZES,
    rule: str = "authors",
    share: float = 1.0,
    find_frequency: Optional[float] = None,
) -> UnitAdvice:
    """Every (protocol, unit size) row and the recommendation of each protocol.

    Args:
      epsilon, delta: the target of the whole run (all rounds).
      max_characters: c, the longest item in characters (the rows plan for it: the worst case).
      n: the population; None gives TrieHH++'s holders only (TrieHH rows are then infeasible).
      protocols: a subset of ``PROTOCOLS``.
      unit_sizes: the unit sizes besides the whole item (those >= c are the whole item).
      rule: TrieHH's parameter rule.
      share: the smallest share of its holders' records an item has (1: one item per user).
      find_frequency: F, the item frequency to find (needs n); see ``recommend``.

    Raises:
      ValueError: for invalid arguments.
    """
    epsilon = check_real("epsilon", epsilon)
    delta = check_real("delta", delta)
    if n is not None:
        n = check_int("n", n, 1)
    if find_frequency is not None:
        find_frequency = check_real("find_frequency", find_frequency)
        if not 0 < find_frequency <= 1:
            raise ValueError(f"find_frequency must be in (0, 1], got {find_frequency:g}")
        if n is None:
            raise ValueError("a target frequency needs the population n (holders = ceil(F n))")
    protocols = tuple(_check_protocol(protocol) for protocol in protocols)
    sizes = _candidates(check_int("max_characters", max_characters, 1), unit_sizes)
    options = tuple(option(p, k, max_characters, epsilon, delta, n, rule=rule, share=share)
                    for p in protocols for k in sizes)
    recommendations = tuple(recommend(options, p, find_frequency) for p in protocols)
    return UnitAdvice(epsilon, delta, max_characters, n, share, rule, find_frequency, options,
                      recommendations)


@dataclasses.dataclass(frozen=True)
class DiscoverAdvice:
    """``discover``'s advice: a unit size that finds items ``FAR`` times rarer than the user's.

    Attributes:
      recommended: the row advised.
      yours: the row of the user's ``--unit-size`` and ``--max-length``.
    """

    recommended: UnitOption
    yours: UnitOption

    def line(self, with_figures: bool) -> str:
        """One line; the frequencies (functions of n) only ``with_figures``."""
        chosen, mine = self.recommended, self.yours
        need = mine.fraction_for(RECOMMEND_PROBABILITY)
        if not with_figures:
            than = (f"at least {FAR:g}x rarer items than your {mine.label}" if need is not None
                    else f"items your {mine.label} cannot")
            return (f"advice: {chosen.flags} finds {than} (90%, worst case, same target; "
                    f"triehh plan --compare-units)")
        yours = ("is infeasible at this target" if not mine.feasible else
                 "cannot reach 90%" if need is None else f"needs {percent(need)}")
        return (f"advice: {chosen.flags} finds items held by "
                f"{percent(chosen.fraction_for(RECOMMEND_PROBABILITY))} of users at 90% (worst "
                f"case); your {mine.label} {yours} (same target; triehh plan --compare-units)")

    def detail(self) -> str:
        """The figures of ``line(True)`` alone (the private part when n is not public)."""
        return self.line(with_figures=True).split("(same target", 1)[0].removeprefix("advice: ").strip()

    def figures(self) -> Dict[str, object]:
        """The frequencies behind the advice (private where n is)."""
        return {"unit_size": self.recommended.unit_size, "max_length": self.recommended.max_length,
                "holders": self.recommended.holders_for(RECOMMEND_PROBABILITY),
                "fraction": self.recommended.fraction_for(RECOMMEND_PROBABILITY),
                "your_holders": self.yours.holders_for(RECOMMEND_PROBABILITY),
                "your_fraction": self.yours.fraction_for(RECOMMEND_PROBABILITY)}


def discover_advice(
    n: int,
    epsilon: float,
    delta: float,
    unit_size: int,
    max_length: int,
    *,
    protocol: str = Protocol.TRIEHH,
    rule: str = "authors",
) -> Optional[DiscoverAdvice]:
    """What ``discover`` says when the user's unit size is far from the advice, or None.

    The user's items are up to ``c = (L - 1) k`` characters (what ``--unit-size k
    --max-length L`` admits). ``recommend``'s rule runs with F n = floor(H / ``FAR``), H the
    holders the user's own choice needs for 90%: it picks the smallest unit size needing at most
    H / ``FAR`` holders, i.e. finding items at least ``FAR`` times rarer. A choice that finds
    nothing (infeasible, or 90% unreachable) is far from any that does (F n is then the fewest
    holders of any row). None when no unit size qualifies, or for a protocol or rule the
    planners do not know (e.g. theta fixed by hand). Advice never changes what runs.

    Raises:
      ValueError: for invalid arguments.
    """
    if protocol not in PROTOCOLS or rule not in parameters.RULES:
        return None
    unit_size = check_int("unit_size", unit_size, 1)
    max_length = check_int("max_length", max_length, 2)
    max_characters = (max_length - 1) * unit_size
    mine = option(protocol, unit_size, max_characters, epsilon, delta, n, rule=rule)
    advice = compare_units(epsilon, delta, max_characters, n, protocols=(protocol,), rule=rule)
    options = [o for o in advice.options if o.unit_size != mine.unit_size] + [mine]
    need = mine.holders_for(RECOMMEND_PROBABILITY)
    if need is None:
        best = recommend(options, protocol).option
        if best is None:
            return None
        target = best.holders_for(RECOMMEND_PROBABILITY)
    else:
        target = math.floor(need / FAR)  # so that the advised row needs at most need / FAR
    if target < 1:
        return None
    chosen = recommend(options, protocol, target / n).option
    if chosen is None or chosen.unit_size == mine.unit_size:
        return None
    return DiscoverAdvice(chosen, mine)
