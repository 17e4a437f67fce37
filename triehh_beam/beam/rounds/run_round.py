"""``RunRound``: one TrieHH or TrieHH++ round over record batches, built from the very transforms a
discovery job runs (``SampleAllRounds``, then ``RunAllRounds`` for the one round), so that a
pipeline of your own gets the job's samples, votes and results for the same keys.
"""

from __future__ import annotations

from typing import Collection, FrozenSet, Optional, Union

import apache_beam as beam
import pyarrow as pa

from triehh_beam.beam.rounds.sampled_rounds import RunAllRounds
from triehh_beam.beam.samples.sample_pass import SampleAllRounds
from triehh_beam.beam.transforms import DropZeroCountsDoFn
from triehh_beam.protocol.items.encoding import ItemEncoder, Units
from triehh_beam.protocol.randomness import sampling
from triehh_beam.protocol.rounds.loop import RoundResult

__all__ = ["RunRound"]


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(RoundResult)
class RunRound(beam.PTransform):
    """Record batches -> one element, round ``round_index``'s ``RoundResult``.

    The round drops records of count 0, draws its sample (TrieHH: the bottom ``sample_size``
    users by keyed rank; TrieHH++: every user ranked below ``sample_probability``'s threshold),
    encodes the sampled users' items, lets each vote once against ``frontier`` and keeps the
    prefixes with at least ``theta`` votes; no count leaves the round.

    Args:
      keys: the release's ``Sampler``, or its ``PassKeys`` (covering ``round_index``); the graph
        carries derived keys only, never the seed.
      round_index: r, from 1.
      theta: the threshold (TrieHH++: tau).
      encoder: the item encoder (unit size, L).
      frontier: the trie's length r-1 prefixes not yet complete (``{()}`` in round 1;
        ``sampled_rounds.frontier_after`` of the previous result).
      sample_size: m, users per round (TrieHH); give it or ``sample_probability``.
      sample_probability: p_s (TrieHH++).
      population: the distinct users n, if known (TrieHH: enables the rank prefilter and the
        short-sample check; a short sample keeps nothing, ``RoundResult.sample_short``).
      truncate: cut over-long items to L units instead of dropping them.
      denied: encoded sequences no user votes for (a deny list).

    Input: ``pa.RecordBatch`` with columns user_id (binary), item, count (``ReadRecordBatches``).
    Output: one ``RoundResult``: the kept prefixes sorted, the users sampled and required, the
    records ranked.

    Raises:
      ValueError: both or neither of ``sample_size`` and ``sample_probability``, or keys that do
        not cover ``round_index``.
    """

    def __init__(
        self,
        keys: Union[sampling.Sampler, sampling.PassKeys],
        round_index: int,
        theta: int,
        encoder: ItemEncoder,
        frontier: FrozenSet[Units] = frozenset({()}),
        sample_size: Optional[int] = None,
        sample_probability: Optional[float] = None,
        population: Optional[int] = None,
        truncate: bool = False,
        denied: Collection[Units] = frozenset(),
    ):
        super().__init__()
        if isinstance(keys, sampling.Sampler):
            keys = keys.pass_keys(round_index)
        self._sample = SampleAllRounds(
            keys, [round_index], sample_size, population, encoder, truncate, sample_probability=sample_probability)
        self._round = round_index
        self._theta = theta
        self._frontier = frozenset(frontier)
        self._denied = frozenset(denied)

    def expand(self, batches):
        drawn = (
            batches
            | "DropZeroCounts" >> beam.ParDo(DropZeroCountsDoFn())
            | "SampleAllRounds" >> self._sample
        )
        return (
            drawn["tables"]
            | "RunAllRounds" >> RunAllRounds(
                self._round, self._round, self._theta, self._frontier, sample_sizes=drawn["samples"],
                denied=self._denied)
            | "Result" >> beam.Values().with_output_types(RoundResult)
        )
