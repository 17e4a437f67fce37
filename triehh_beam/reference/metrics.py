"""How discovery results are judged (docs/protocol.md §4): ground truth (``ground_truth``: item ->
the number of distinct users holding it, the frequency TrieHH's guarantee speaks of, with the
record counts beside it), recall, precision, F1 and NCR at K, and discovery rates. Ties in the
true ranking are resolved in the run's favour: within equally frequent items the discovered ones
rank first (the best value over all strict rankings consistent with the frequencies), one
tie-break for all four metrics so they describe the same top-K, independent of mapping order and
item type; when fewer than K items have a positive frequency, K is that number. A truth may also
be a sequence of items, best first (a strict ranking).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import numbers
from typing import (
    Any,
    Collection,
    Counter as CounterT,
    Dict,
    FrozenSet,
    Hashable,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from triehh_beam.protocol.randomness.sampling import UserId, user_id_bytes

__all__ = [
    "GroundTruth",
    "TopK",
    "discovery_rates",
    "f1_at_k",
    "ground_truth",
    "item_counts",
    "ncr_at_k",
    "precision_at_k",
    "recall_at_k",
    "true_top_k",
    "user_records",
]

Item = Hashable
# A user's items: a list of records (an item may repeat) or a mapping item -> record count.
UserItems = Union[Sequence[Item], Mapping[Item, int]]
# The truth: item -> frequency (ties possible), or a sequence of items, best first (strict).
Truth = Union[Mapping[Item, float], Sequence[Item]]


def item_counts(items: UserItems) -> CounterT:
    """One user's local item counts, from a list of records or a mapping item -> count.

    Zero counts are ignored.

    Raises:
      TypeError: ``items`` is a single ``str``/``bytes`` (a common slip for ``[item]``).
      ValueError: a count is negative or not an integer.
    """
    if isinstance(items, (str, bytes, bytearray)):
        raise TypeError(
            f"a user's items must be a list of items or a mapping item -> count, "
            f"not a single {type(items).__name__}; wrap it in a list"
        )
    counts: CounterT = collections.Counter()
    if isinstance(items, Mapping):
        for item, count in items.items():
            if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
                raise ValueError(f"record counts must be non-negative integers, got {count!r}")
            if count:
                counts[item] += int(count)
    else:
        counts.update(items)
    return counts


def user_records(users: Mapping[UserId, UserItems]) -> Dict[bytes, CounterT]:
    """The population as canonical user id bytes -> local item counts.

    Ids that sampling treats as one user (``42``, ``"42"`` and ``b"42"``; see
    ``sampling.user_id_bytes``) are merged, their records summed. Users without any record are
    left out: they are not part of the population that the protocol samples. The caller's
    mapping is not modified.

    Raises:
      TypeError, ValueError: for an invalid user id or invalid items (see ``item_counts``).
    """
    merged: Dict[bytes, CounterT] = {}
    for user_id, items in users.items():
        counts = item_counts(items)
        if not counts:
            continue
        merged.setdefault(user_id_bytes(user_id), collections.Counter()).update(counts)
    return merged


@dataclasses.dataclass(frozen=True)
class GroundTruth:
    """The true frequencies of a population.

    Attributes:
      user_counts: item -> number of distinct users holding it (the frequency of TrieHH's
        guarantee and the one to rank by).
      record_counts: item -> total number of records.
      n_users: users with at least one record (the ``n`` of the privacy and utility formulas).
    """

    user_counts: CounterT
    record_counts: CounterT
    n_users: int


def ground_truth(users: Mapping[UserId, UserItems], encoder: Any = None) -> GroundTruth:
    """Per-item user counts and record counts of a population.

    Args:
      users: user id -> items (a list of records, or a mapping item -> count).
      encoder: optional ``ItemEncoder``; when given, items are counted in their normalised form
        (``encoder.normalize``: NFC, case folding), which is the form TrieHH discovers. Items are
        counted whatever their length: one that is too long to discover still belongs to the
        truth, and recall will show that it was missed.

    Raises:
      EncodingError: an item has the wrong type for ``encoder``.
      TypeError, ValueError: for invalid user ids or items (see ``item_counts``).
    """
    user_counts: CounterT = collections.Counter()
    record_counts: CounterT = collections.Counter()
    population = user_records(users)
    for counts in population.values():
        if encoder is not None:
            normalized: CounterT = collections.Counter()
            for item, count in counts.items():
                normalized[encoder.normalize(item)] += count
            counts = normalized
        user_counts.update(counts.keys())
        record_counts.update(counts)
    return GroundTruth(
        user_counts=user_counts, record_counts=record_counts, n_users=len(population)
    )


@dataclasses.dataclass(frozen=True)
class TopK:
    """The true top-K of a ranking, ties kept as groups.

    Attributes:
      k: the effective K, ``min(requested k, number of items with positive frequency)``.
      groups: the tie groups that cover the top K, most frequent first: each is a frozenset of
        equally frequent items. Every item of the last group ties at the boundary; the groups
        may hold more than ``k`` items in all when the boundary is tied.
    """

    k: int
    groups: Tuple[FrozenSet[Item], ...]

    @property
    def certain(self) -> FrozenSet[Item]:
        """Items in every valid top-K set (strictly more frequent than the boundary)."""
        if sum(len(g) for g in self.groups) == self.k:
            return frozenset().union(*self.groups)
        return frozenset().union(*self.groups[:-1])

    @property
    def candidates(self) -> FrozenSet[Item]:
        """Items in at least one valid top-K set (the ties-expanded truth set)."""
        return frozenset().union(*self.groups)


def _frequency_groups(truth: Truth) -> List[FrozenSet[Item]]:
    """All items with positive frequency, grouped by frequency, most frequent first."""
    if isinstance(truth, Mapping):
        by_frequency: Dict[float, set] = {}
        for item, frequency in truth.items():
            if isinstance(frequency, bool) or not isinstance(frequency, numbers.Real):
                raise ValueError(f"frequencies must be numbers, got {frequency!r} for {item!r}")
            if not math.isfinite(frequency) or frequency < 0:
                raise ValueError(f"frequencies must be finite and >= 0, got {frequency!r}")
            if frequency > 0:
                by_frequency.setdefault(frequency, set()).add(item)
        return [frozenset(by_frequency[f]) for f in sorted(by_frequency, reverse=True)]
    if isinstance(truth, (str, bytes, bytearray)):
        raise TypeError("the truth must be a mapping item -> frequency or a sequence of items")
    ranking = list(truth)
    if len(set(ranking)) != len(ranking):
        raise ValueError("a ranking given as a sequence must not repeat items")
    return [frozenset([item]) for item in ranking]


def true_top_k(truth_ranking: Truth, k: int) -> TopK:
    """The true top-K with its tie groups (see the module docstring for the rule).

    Args:
      truth_ranking: item -> frequency (items with frequency 0 are not part of the truth), or a
        sequence of distinct items, best first.
      k: the requested K, >= 1.

    Raises:
      ValueError: ``k < 1``, no item has a positive frequency, or a frequency is negative or
        not finite.
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    groups = _frequency_groups(truth_ranking)
    total = sum(len(g) for g in groups)
    if total == 0:
        raise ValueError("the truth holds no item with a positive frequency")
    k_eff = min(int(k), total)
    covering: List[FrozenSet[Item]] = []
    covered = 0
    for group in groups:
        if covered >= k_eff:
            break
        covering.append(group)
        covered += len(group)
    return TopK(k=k_eff, groups=tuple(covering))


def _discovered_positions(discovered: Iterable[Item], top: TopK) -> List[int]:
    """True ranks (1-based, <= K) of the discovered top-K items, ties resolved in their favour."""
    found = set(discovered)
    positions = []
    start = 1
    for group in top.groups:
        hits = len(group & found)
        positions.extend(p for p in range(start, start + hits) if p <= top.k)
        start += len(group)
    return positions


def recall_at_k(discovered: Iterable[Item], truth_ranking: Truth, k: int) -> float:
    """Share of the true top-K that a run discovered, in [0, 1].

    Args:
      discovered: the items a run returned (duplicates count once; items outside the truth are
        allowed and simply do not count).
      truth_ranking: item -> frequency, or a sequence of items best first.
      k: K; the effective K is ``min(k, number of true items)``.

    Ties at the boundary are resolved in the run's favour and the denominator stays the
    effective K (module docstring).

    Raises:
      ValueError: see ``true_top_k``.
    """
    top = true_top_k(truth_ranking, k)
    return len(_discovered_positions(discovered, top)) / top.k


def precision_at_k(discovered: Iterable[Item], truth_ranking: Truth, k: int) -> float:
    """Share of the discovered items that belong to the true top-K, in [0, 1].

    Uses the same favourable tie-break as ``recall_at_k``: at most as many boundary-tied items
    count as there are slots left at the boundary. An empty discovered set has precision 0 (it
    returned nothing right; this also keeps means over runs finite).

    Raises:
      ValueError: see ``true_top_k``.
    """
    found = set(discovered)
    if not found:
        true_top_k(truth_ranking, k)  # validates the arguments all the same
        return 0.0
    top = true_top_k(truth_ranking, k)
    return len(_discovered_positions(found, top)) / len(found)


def f1_at_k(discovered: Iterable[Item], truth_ranking: Truth, k: int) -> float:
    """The harmonic mean of ``precision_at_k`` and ``recall_at_k`` (PEM paper's F1), in [0, 1].

    Equal to ``2·hits / (|discovered| + K)``; 0 when nothing true was discovered.

    Raises:
      ValueError: see ``true_top_k``.
    """
    found = set(discovered)
    top = true_top_k(truth_ranking, k)
    hits = len(_discovered_positions(found, top))
    return 2.0 * hits / (len(found) + top.k)


def ncr_at_k(discovered: Iterable[Item], truth_ranking: Truth, k: int) -> float:
    """Normalised cumulative rank (PEM paper), in [0, 1].

    The item of true rank ``i`` (1-based, ``i <= K``) scores ``K - i + 1`` when discovered (the
    top item K, the K-th item 1, anything else 0); the sum is divided by ``K(K+1)/2``. Within a
    tie group discovered items take the best ranks of the group (module docstring).

    Raises:
      ValueError: see ``true_top_k``.
    """
    top = true_top_k(truth_ranking, k)
    score = sum(top.k - p + 1 for p in _discovered_positions(discovered, top))
    return score / (top.k * (top.k + 1) / 2)


def discovery_rates(
    runs: Iterable[Iterable[Item]], items: Optional[Iterable[Item]] = None
) -> Dict[Item, float]:
    """Per item, the fraction of runs that discovered it.

    Args:
      runs: one collection of discovered items per run (duplicates within a run count once).
      items: the items to report (e.g. the keys of the ground truth, so that never-discovered
        items show a rate of 0); by default every item discovered at least once.

    Raises:
      ValueError: there are no runs.
    """
    found_sets = [set(run) for run in runs]
    if not found_sets:
        raise ValueError("discovery rates need at least one run")
    counts: CounterT = collections.Counter()
    for found in found_sets:
        counts.update(found)
    keys: Collection[Item] = list(dict.fromkeys(items)) if items is not None else list(counts)
    return {item: counts[item] / len(found_sets) for item in keys}
