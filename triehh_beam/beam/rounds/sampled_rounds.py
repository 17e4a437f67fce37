"""Rounds on their samples: ``RunSampledRound`` turns one round's sample tables (``beam.samples.samples``)
into its ``rounds.RoundResult``, voting columnar (``protocol.rounds.columnar``, one call per table, tables
spread over workers) and merging the per-prefix counts and pruning them at theta in a combine per
prefix (``prefix_combine.PruneByPrefix``: nothing below theta leaves it, not as an element nor as a
metric); ``RunAllRounds`` unrolls rounds ``first..last`` in one graph, round ``r``'s frontier a side
input from round ``r - 1``'s result, each result its own element ``(r, RoundResult)``. A deny list
(``denied``, encoded sequences) acts in the vote only, never on the samples.
"""

from __future__ import annotations

from typing import Any, Collection, Dict, FrozenSet, List, Mapping, Optional, Tuple, Union

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics

from triehh_beam.beam.held import HeldRows
from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.rounds.prefix_combine import (MergeAndPruneCombineFn, PartialVotes, Prefix,
                                                    PruneByPrefix, split_by_prefix)
from triehh_beam.beam.samples import samples
from triehh_beam.beam.samples.sample_pass import RoundSample
from triehh_beam.protocol.items.encoding import Units, is_terminated
from triehh_beam.protocol.rounds import columnar
from triehh_beam.protocol.rounds.loop import RoundResult

__all__ = [
    "MergeAndPruneCombineFn",
    "PartialVotes",
    "Prefix",
    "RoundCounters",
    "RunAllRounds",
    "RunSampledRound",
    "frontier_after",
    "frontier_of",
    "of_round",
    "round_result",
    "vote_table",
]


def frontier_after(result: RoundResult) -> FrozenSet[Units]:
    """The frontier a round's kept prefixes open for the next round (``Trie.frontier``'s rule)."""
    return frozenset(p for p in result.kept if not is_terminated(p))


def vote_table(table: pa.Table, frontier: FrozenSet[Units], round_index: int,
               denied: FrozenSet[Units] = frozenset()) -> columnar.RoundVotes:
    """One sample table's votes in round ``round_index`` (``columnar.count_votes``)."""
    users, uniforms = samples.sequence_table(table)
    return columnar.count_votes(users, uniforms, frontier, round_index, denied)


class RoundCounters:
    """A round's vote counters (``{prefix}users_sampled``, ``users_without_items``,
    ``votes_cast``, ``votes_filtered_by_frontier``, ``users_only_denied_items``); create it in
    a DoFn's ``setup``."""

    def __init__(self, prefix: str):
        def counter(name):
            return Metrics.counter(METRICS_NAMESPACE, f"{prefix}{name}")

        self._sampled, self._without = counter("users_sampled"), counter("users_without_items")
        self._cast, self._filtered = counter("votes_cast"), counter("votes_filtered_by_frontier")
        self._only_denied = counter("users_only_denied_items")

    def count(self, votes: columnar.RoundVotes, with_deny_list: bool) -> None:
        self._sampled.inc(votes.users)
        self._without.inc(votes.users_without_items)
        self._cast.inc(votes.votes_cast)
        self._filtered.inc(votes.votes_filtered)
        if with_deny_list:
            self._only_denied.inc(votes.users_only_denied)


@beam.typehints.with_input_types(Union[pa.Table, str], frontier=FrozenSet[Prefix])
@beam.typehints.with_output_types(Tuple[int, PartialVotes])
class _VoteTableDoFn(beam.DoFn):
    """One sample table (or, ``from_paths``, its path: read here, so that no table crosses a
    stage) -> its per-prefix votes (private) and users, columnar, split into ``groups`` by prefix
    (``prefix_combine.split_by_prefix``)."""

    def __init__(self, round_index: int, prefix: str, denied: FrozenSet[Units] = frozenset(), groups: int = 1,
                 from_paths: bool = False):
        self._round = round_index
        self._prefix = prefix
        self._denied = frozenset(denied)
        self._groups = groups
        self._from_paths = from_paths

    def setup(self):
        self._counters = RoundCounters(self._prefix)
        self._held = HeldRows("vote")

    def process(self, table, frontier):
        if self._from_paths:
            table = samples.read_sample_table(table)
        self._held.held(table.num_rows)  # one table (a shard's users) at a time
        votes = vote_table(table, frontier, self._round, self._denied)
        self._counters.count(votes, bool(self._denied))
        yield from split_by_prefix((votes.counts, votes.users), self._groups)


def round_result(
    kept_and_users: Tuple[List[Units], int],
    round_index: int,
    users_required: Optional[int],
    records_ranked: Optional[int],
    sample_sizes: Optional[Dict[int, RoundSample]],
    counter_prefix: str,
) -> Tuple[int, RoundResult]:
    """``MergeAndPruneCombineFn``'s output as round ``round_index``'s ``(round, RoundResult)``:
    users sampled and required and records ranked from ``sample_sizes`` when it has the round,
    else the given ones; a short sample keeps nothing. Counts ``{counter_prefix}prefixes_kept``."""
    kept, users = kept_and_users
    if sample_sizes is not None and round_index in sample_sizes:
        drawn = sample_sizes[round_index]
        users, users_required, records_ranked = drawn.users_sampled, drawn.users_required, drawn.records_ranked
    result = RoundResult(tuple(kept), users, users_required, records_ranked)
    if result.sample_short:
        result = RoundResult((), users, users_required, records_ranked)
    Metrics.counter(METRICS_NAMESPACE, f"{counter_prefix}prefixes_kept").inc(len(result.kept))
    return round_index, result


class _VoteAndPrune(beam.PTransform):
    """The shared body: a round's tables -> one ``(round, RoundResult)``. ``frontier`` is a
    one-element PCollection; ``sample_sizes`` None or a PCollection of ``(round, RoundSample)``."""

    def __init__(self, round_index, theta, frontier, users_required, records_ranked, sample_sizes, counter_prefix,
                 denied: Collection[Units] = frozenset(), groups: int = 1, from_paths: bool = False):
        super().__init__()
        self._denied = frozenset(denied)
        self._groups = groups
        self._from_paths = from_paths
        self._round = round_index
        self._theta = theta
        self._frontier = frontier
        self._required = users_required
        self._ranked = records_ranked
        self._sizes = sample_sizes
        self._prefix = counter_prefix

    def expand(self, tables):
        kept = (
            tables
            | "Vote" >> beam.ParDo(
                _VoteTableDoFn(self._round, self._prefix, self._denied, self._groups, self._from_paths),
                frontier=beam.pvalue.AsSingleton(self._frontier),
            )
            | "PruneBelowTheta" >> PruneByPrefix(self._theta, self._groups)
        )
        sizes = None if self._sizes is None else beam.pvalue.AsDict(self._sizes)
        return kept | "RoundResult" >> beam.Map(
            round_result,
            round_index=self._round,
            users_required=self._required,
            records_ranked=self._ranked,
            sample_sizes=sizes,
            counter_prefix=self._prefix,
        ).with_output_types(Tuple[int, RoundResult])


@beam.typehints.with_input_types(pa.Table)
@beam.typehints.with_output_types(RoundResult)
class RunSampledRound(beam.PTransform):
    """One round over its sample tables -> one ``RoundResult``.

    Args:
      round_index: r, from 1.
      theta: the threshold.
      frontier: the trie's length r-1 prefixes (``{()}`` in round 1).
      users_required: ``min(m, n)`` (from the sampling pass), or None.
      records_ranked: the records the sampling pass ranked, or None.
      denied: the deny list's encoded sequences (none by default).
      prefix_groups: the groups the votes are merged in (``prefix_combine.prefix_groups``: one
        group's prefixes are one step's rows), 1 by default.

    ``users_sampled`` is the number of rows of the tables. A result whose sample is short keeps
    nothing.
    """

    def __init__(
        self,
        round_index: int,
        theta: int,
        frontier: FrozenSet[Units],
        users_required: Optional[int] = None,
        records_ranked: Optional[int] = None,
        denied: Collection[Units] = frozenset(),
        prefix_groups: int = 1,
    ):
        super().__init__()
        self._denied = frozenset(denied)
        self._groups = _checked_groups(prefix_groups)
        if round_index < 1:
            raise ValueError(f"rounds are numbered from 1, got {round_index}")
        self._round = round_index
        self._theta = theta
        self._frontier = frozenset(frontier)
        self._required = users_required
        self._ranked = records_ranked

    def expand(self, tables):
        frontier = tables.pipeline | "Frontier" >> beam.Create([self._frontier]).with_output_types(FrozenSet[Prefix])
        result = tables | f"Round({self._round})" >> _VoteAndPrune(
            self._round, self._theta, frontier, self._required, self._ranked, None, "", self._denied, self._groups
        )
        return result | "Result" >> beam.Values().with_output_types(RoundResult)


def _checked_groups(groups: int) -> int:
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"prefix groups must be an integer of at least 1, got {groups!r}")
    return groups


def of_round(keyed: Tuple[int, Any], round_index: int) -> bool:
    """Whether a ``(round, table or path)`` element is of round ``round_index`` (the unrolled
    rounds' filter, a batch job's or a window's)."""
    return keyed[0] == round_index


def frontier_of(keyed: Tuple[int, RoundResult]) -> FrozenSet[Units]:
    """The next round's frontier from a ``(round, RoundResult)`` element."""
    return frontier_after(keyed[1])


class RunAllRounds(beam.PTransform):
    """Rounds ``first_round..last_round`` unrolled in one graph.

    Args:
      first_round: the first round to run (a resume starts mid-way).
      last_round: the last round (at most L).
      theta: the threshold.
      frontier: the frontier of ``first_round`` (``{()}`` for round 1).
      sample_sizes: optional PCollection of ``(round, RoundSample)`` from ``SampleAllRounds``:
        gives each result its users sampled and required and the records ranked (and so
        ``sample_short``); without it, users sampled are the tables' rows.
      users_required, records_ranked: without ``sample_sizes`` (rounds on samples read from
        files), ``min(m, n)`` (or per round, ``{round: users}``: TrieHH++'s drawn sample sizes)
        and the records the pass ranked: a round whose files hold fewer users than required is
        short, and keeps nothing.
      denied: the deny list's encoded sequences (none by default).
      from_paths: the input is ``(round, sample table's path)``: each round reads its own tables
        (so no step holds more than one table).
      prefix_groups: the groups each round's votes are merged in, one per key of a combine per
        prefix (``prefix_combine.prefix_groups`` of the round's users and the worker budget), 1
        by default.

    Input: ``(round, sample table)`` (or its path) for the rounds. Output: one ``(round, RoundResult)`` per
    round, each its own element.
    """

    def __init__(
        self,
        first_round: int,
        last_round: int,
        theta: int,
        frontier: FrozenSet[Units],
        sample_sizes=None,
        users_required: Union[None, int, Mapping[int, int]] = None,
        records_ranked: Optional[int] = None,
        denied: Collection[Units] = frozenset(),
        from_paths: bool = False,
        prefix_groups: int = 1,
    ):
        super().__init__()
        self._denied = frozenset(denied)
        self._from_paths = from_paths
        self._groups = _checked_groups(prefix_groups)
        if not 1 <= first_round <= last_round:
            raise ValueError(f"rounds {first_round}..{last_round} are not a range from 1")
        self._first = first_round
        self._last = last_round
        self._theta = theta
        self._frontier = frozenset(frontier)
        self._sizes = sample_sizes
        self._required = users_required
        self._ranked = records_ranked

    def expand(self, keyed_tables):
        frontier = keyed_tables.pipeline | "FirstFrontier" >> beam.Create([self._frontier]).with_output_types(
            FrozenSet[Prefix]
        )
        results = {}
        if self._from_paths:  # each table once, spread over workers by its path
            keyed_tables = keyed_tables | "EachTableOnce" >> beam.Distinct().with_output_types(Tuple[int, str])
        for r in range(self._first, self._last + 1):
            label = f"Round{r}"
            tables = keyed_tables | f"{label}Tables" >> beam.Filter(of_round, round_index=r)
            if self._from_paths:  # each round's vote reads its own tables
                tables = tables | f"{label}Paths" >> beam.Values().with_output_types(str)
            else:
                tables = tables | f"{label}Values" >> beam.Values().with_output_types(pa.Table)
            required = self._required.get(r) if isinstance(self._required, Mapping) else self._required
            results[r] = tables | label >> _VoteAndPrune(
                r, self._theta, frontier, required, self._ranked, self._sizes, f"round{r}.", self._denied, self._groups,
                self._from_paths)
            frontier = results[r] | f"{label}NextFrontier" >> beam.Map(frontier_of).with_output_types(
                FrozenSet[Prefix]
            )
        return tuple(results.values()) | "Results" >> beam.Flatten()
