"""A round's merge and prune as a combine per prefix (``PruneByPrefix``): each table's private
partial counts are split into ``groups`` by a stable hash of the prefix (``split_by_prefix``),
grouped by key so that each group is merged on whichever worker holds that key and pruned at theta
there (``MergeAndPruneCombineFn``, over ``counting.PrefixCounter``), and only the kept prefixes and
the users are gathered. No step holds more than one group's prefixes (each merge reports them in
``rows_held``, ``beam.held``), and nothing below theta leaves the combine.
"""

from __future__ import annotations

import math
import zlib
from typing import Dict, Iterator, List, Tuple, Union

import apache_beam as beam

from triehh_beam.beam.held import HeldRows
from triehh_beam.protocol.rounds.counting import PrefixCounter

__all__ = [
    "GroupedVotes",
    "MergeAndPruneCombineFn",
    "PartialVotes",
    "Prefix",
    "PruneByPrefix",
    "prefix_group",
    "prefix_groups",
    "split_by_prefix",
]

Prefix = Tuple[Union[str, bytes], ...]
# (prefix -> votes of one table, users in it): private counts, consumed only by
# ``MergeAndPruneCombineFn``.
PartialVotes = Tuple[Dict[Prefix, int], int]
# (the prefixes' group, their partial votes): the combine's input.
GroupedVotes = Tuple[int, PartialVotes]


def prefix_groups(expected_users: int, budget: int) -> int:
    """Groups for a round of about ``expected_users`` votes: enough that one group's prefixes
    (at most its votes) stay within a quarter of the worker budget; at least 1."""
    return max(1, math.ceil(max(0, expected_users) / max(1, budget // 4)))


def prefix_group(prefix: Prefix, groups: int) -> int:
    """The group of ``prefix`` among ``groups``: a hash of its ``repr``, the same in every process
    (unlike ``hash()``); a partition only, never published."""
    if groups == 1:
        return 0
    return zlib.crc32(repr(prefix).encode("utf-8", "backslashreplace")) % groups


def split_by_prefix(partial: PartialVotes, groups: int) -> Iterator[GroupedVotes]:
    """A table's ``(counts, users)`` as ``(group, (its counts, users))``: group 0 always (it
    carries the table's users), the others when they hold a vote."""
    counts, users = partial
    if groups == 1:
        yield 0, (counts, users)
        return
    split: Dict[int, Dict[Prefix, int]] = {0: {}}
    for prefix, count in counts.items():
        split.setdefault(prefix_group(prefix, groups), {})[prefix] = count
    for group, group_counts in split.items():
        yield group, (group_counts, users if group == 0 else 0)


@beam.typehints.with_input_types(PartialVotes)
@beam.typehints.with_output_types(Tuple[List[Prefix], int])
class MergeAndPruneCombineFn(beam.CombineFn):
    """Partial counts -> (kept prefixes sorted, users); counts never leave (``PrefixCounter``).
    ``report_held``: report the prefixes merged as ``rows_held`` (``beam.held``)."""

    def __init__(self, theta: int, report_held: bool = False):
        self._core = PrefixCounter(theta)
        self._report_held = report_held
        self._held = None

    def setup(self):
        self._held = HeldRows("prefix_merge") if self._report_held else None

    def create_accumulator(self):
        return self._core.create(), 0

    def add_input(self, accumulator, partial):
        counts, users = accumulator
        return self._reported((PrefixCounter.merge([counts, partial[0]]), users + partial[1]))

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        return self._reported((PrefixCounter.merge(a[0] for a in accumulators), sum(a[1] for a in accumulators)))

    def extract_output(self, accumulator):
        counts, users = accumulator
        return self._core.extract_kept(counts), users

    def _reported(self, accumulator):
        if self._held is not None:
            self._held.held(len(accumulator[0]))
        return accumulator


@beam.typehints.with_input_types(Tuple[List[Prefix], int])
@beam.typehints.with_output_types(Tuple[List[Prefix], int])
class _GatherKeptCombineFn(beam.CombineFn):
    """Every group's (kept prefixes, users) -> the round's (kept prefixes sorted, users)."""

    def create_accumulator(self):
        return [], 0

    def add_input(self, accumulator, kept_and_users):
        kept, users = accumulator
        return kept + list(kept_and_users[0]), users + kept_and_users[1]

    def merge_accumulators(self, accumulators):
        kept, users = [], 0
        for more, more_users in accumulators:
            kept, users = kept + list(more), users + more_users
        return kept, users

    def extract_output(self, accumulator):
        kept, users = accumulator
        return sorted(kept), users


@beam.typehints.with_input_types(GroupedVotes)
@beam.typehints.with_output_types(Tuple[List[Prefix], int])
class PruneByPrefix(beam.PTransform):
    """``(group, PartialVotes)`` of ``groups`` groups -> one ``(kept prefixes sorted, users)``,
    also for no input.

    With several groups each is merged and pruned on its own after a ``GroupByKey`` (not a lifted
    ``CombinePerKey``, whose pre-combine would hold every group a bundle meets at once), so a
    worker holds one group's prefixes, and the kept ones of every group are gathered and sorted;
    one group (a round whose votes fit) is one ``CombineGlobally``, a stage fewer.
    """

    def __init__(self, theta: int, groups: int = 1):
        super().__init__()
        self._theta = theta
        self._groups = groups

    def expand(self, grouped):
        if self._groups == 1:
            return (
                grouped
                | "Votes" >> beam.Values().with_output_types(PartialVotes)
                | "MergeAndPrune" >> beam.CombineGlobally(MergeAndPruneCombineFn(self._theta, report_held=True))
            )
        return (
            grouped
            | "GroupByPrefix" >> beam.GroupByKey()
            | "MergeAndPrune" >> beam.CombineValues(MergeAndPruneCombineFn(self._theta, report_held=True))
            | "KeptOfGroup" >> beam.Values().with_output_types(Tuple[List[Prefix], int])
            | "GatherKept" >> beam.CombineGlobally(_GatherKeptCombineFn())
        )
