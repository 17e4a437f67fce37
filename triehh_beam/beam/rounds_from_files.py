"""Rounds on written sample tables, in order, inside one DoFn (``RunRoundsFromFiles``): once every
round's tables are files (``round_cut.CutRounds``), each round reads its own, votes them a table at
a time (``sampled_rounds.vote_table``), merges the counts and keeps the prefixes with at least
theta votes (``counting.PrefixCounter``: nothing below theta leaves it), and opens the next round's
frontier. It gives exactly ``sampled_rounds.RunAllRounds``'s results and counters without its ten
unrolled sub-graphs, whose stages and graph construction cost a job more than the votes themselves
on Beam's in-process runner; a worker holds one table and one round's counts at a time.
"""

from __future__ import annotations

from typing import Collection, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple, Union

import apache_beam as beam

from triehh_beam.beam import sampled_rounds, samples
from triehh_beam.beam.held import HeldRows
from triehh_beam.beam.sample_pass import RoundSample
from triehh_beam.beam.sampled_rounds import RoundCounters, frontier_after, round_result
from triehh_beam.protocol.counting import PrefixCounter
from triehh_beam.protocol.encoding import Units
from triehh_beam.protocol.rounds import RoundResult

__all__ = ["RunRoundsFromFiles"]


@beam.typehints.with_input_types(List[Tuple[int, str]], sample_sizes=Dict[int, RoundSample])
@beam.typehints.with_output_types(Tuple[int, RoundResult])
class _RoundsInOrderDoFn(beam.DoFn):
    """Every table written, ``[(round, path)]`` -> ``(round, RoundResult)`` per round, in order."""

    def __init__(self, first_round: int, last_round: int, theta: int, frontier: FrozenSet[Units],
                 denied: FrozenSet[Units], users_required=None, records_ranked: Optional[int] = None):
        self._rounds = range(first_round, last_round + 1)
        self._required = users_required
        self._ranked = records_ranked
        self._counter = PrefixCounter(theta)
        self._frontier = frontier
        self._denied = denied

    def setup(self):
        self._counters = {r: RoundCounters(f"round{r}.") for r in self._rounds}
        self._held = HeldRows()

    def process(self, written, sample_sizes=None):
        paths: Dict[int, List[str]] = {}
        for round_index, path in written:
            paths.setdefault(round_index, []).append(path)
        frontier = self._frontier
        for r in self._rounds:
            counts, users = self._counter.create(), 0
            for path in sorted(set(paths.get(r, ()))):  # each table once, whatever is delivered
                table = samples.read_sample_table(path)
                self._held.held(table.num_rows)  # one table (a shard's users) at a time
                votes = sampled_rounds.vote_table(table, frontier, r, self._denied)
                self._counters[r].count(votes, bool(self._denied))
                counts, users = PrefixCounter.merge([counts, votes.counts]), users + votes.users
            kept = self._counter.extract_kept(counts)
            required = self._required.get(r) if isinstance(self._required, Mapping) else self._required
            result = round_result((kept, users), r, required, self._ranked, sample_sizes, f"round{r}.")
            yield result
            frontier = frontier_after(result[1])


class RunRoundsFromFiles(beam.PTransform):
    """Rounds ``first_round..last_round`` on their written sample tables.

    Args:
      first_round, last_round: the rounds, in order.
      theta: the threshold.
      frontier: ``first_round``'s frontier (``{()}`` for round 1).
      sample_sizes: a PCollection of ``(round, RoundSample)`` (the cut's): each result's users
        sampled and required and records ranked; a round short of its required users keeps
        nothing. None (a resume's rounds on samples drawn before): users sampled are the tables'
        rows, checked against ``users_required`` (one for every round, or per round), and
        ``records_ranked`` is reported.
      denied: the deny list's encoded sequences (none by default).

    Input: ``(round, path)`` of every sample table (the cut's output); the rounds start once all
    are written. Output: one ``(round, RoundResult)`` per round. Counters: as ``RunAllRounds``'s
    (``round{r}.users_sampled``, ``.votes_cast``, ``.prefixes_kept``, ...).
    """

    def __init__(self, first_round: int, last_round: int, theta: int, frontier: FrozenSet[Units], sample_sizes,
                 denied: Collection[Units] = frozenset(), users_required: Union[None, int, Mapping[int, int]] = None,
                 records_ranked: Optional[int] = None):
        super().__init__()
        if not 1 <= first_round <= last_round:
            raise ValueError(f"rounds {first_round}..{last_round} are not a range from 1")
        self._rounds = _RoundsInOrderDoFn(first_round, last_round, theta, frozenset(frontier), frozenset(denied),
                                          users_required, records_ranked)
        self._sizes = sample_sizes

    def expand(self, written: Iterable[Tuple[int, str]]):
        listed = written | "AllWritten" >> beam.combiners.ToList().with_output_types(List[Tuple[int, str]])
        if self._sizes is None:
            return listed | "RoundsInOrder" >> beam.ParDo(self._rounds)
        return listed | "RoundsInOrder" >> beam.ParDo(self._rounds, sample_sizes=beam.pvalue.AsDict(self._sizes))
