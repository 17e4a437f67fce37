"""One noisy prefix round on Beam (docs/protocol.md §8): ``ReleaseNoisyRound`` turns the round's
sample tables of every user (the sampling pass at p_s = 1) into the round's release: each table's
users vote exactly as in the sampled protocols (``columnar.count_votes`` with their keyed choice
uniforms), a vote whose last unit is outside the declared alphabet is dropped, and the counts are
merged, noised and thresholded inside one combine (``NoisyRoundCounter``), so no vote count and
no dropped candidate leaves it. It adds no counter but ``items_released`` (a total of what is
published); the number of users read is n, private, and leaves only in the combine's output."""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Sequence, Tuple

import apache_beam as beam
import pyarrow as pa

from triehh_beam.beam.releases.whole_items import ReleaseCombineFn, count_released
from triehh_beam.beam.samples import samples
from triehh_beam.protocol.central.noisy_release import NoisyRoundCounter, NoisyRoundKeys
from triehh_beam.protocol.central.noisy_rounds import NoisyRoundsPlan
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.rounds import columnar

__all__ = ["ReleaseNoisyRound"]

# A table's (candidate -> votes, users): private, consumed only by the combine; the combine's
# (released (candidate, noisy count) pairs, users): kept candidates only.
_Votes = Tuple[Dict[Units, int], int]
_Kept = Tuple[List[Tuple[Units, int]], int]


@beam.typehints.with_input_types(Tuple[int, pa.Table])
@beam.typehints.with_output_types(_Votes)
class _VoteDoFn(beam.DoFn):
    """One sample table of the round -> its votes per candidate (private) and users, columnar."""

    def __init__(self, frontier: FrozenSet[Units], round_index: int, units: FrozenSet[str]):
        self._frontier, self._round, self._units = frontier, round_index, units

    def process(self, keyed):
        _, table = keyed
        users, uniforms = samples.sequence_table(table)
        votes = columnar.count_votes(users, uniforms, self._frontier, self._round).counts
        yield {c: n for c, n in votes.items() if c[-1] in self._units}, users.users


class ReleaseNoisyRound(beam.PTransform):
    """``(round, sample table)`` elements of round ``round_index`` (every user) -> ONE
    ``(released, users)``.

    Args:
      plan, keys: the release's plan and noise keys (``NoisyRoundKeys.derive``).
      frontier: the round's public frontier; units: ``candidate_units`` of the alphabet.

    Output: ``released`` is a list of ``(candidate, noisy count)`` of the kept candidates,
    sorted, every count at least the round's threshold; ``users`` is the number of users read
    (private: the operator's).
    """

    def __init__(self, plan: NoisyRoundsPlan, keys: NoisyRoundKeys, frontier: Sequence[Units],
                 units: Sequence[str], round_index: int):
        super().__init__()
        self._counter = NoisyRoundCounter(plan, keys, frontier, units, round_index)  # validates first

    def expand(self, tables):
        counter = self._counter
        return (
            tables
            | "Vote" >> beam.ParDo(_VoteDoFn(frozenset(counter.frontier), counter.round_index, frozenset(counter.units)))
            | "ReleaseNoisy" >> beam.CombineGlobally(ReleaseCombineFn(counter)).with_output_types(_Kept)
            | "CountReleased" >> beam.Map(count_released).with_output_types(_Kept)
        )
