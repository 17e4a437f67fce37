"""The cut of a discovery's written candidates (a fresh run's first read, a resume's pass) to
every round's sample (``CutRounds``): one element per round, planned from the candidate files'
metadata. A round whose candidates fit the worker budget (``beam.held``) is cut by one DoFn: it
reads the round's rows (``round_candidates``: row groups of other rounds skipped by their
statistics), finds its bottom-m threshold (``sample_pass.add_candidates``), reads them again
keeping the rows at or below it, and builds and writes each shard's sample table
(``beam.samples.samples``). A larger round is cut by rank buckets and groups of shards over many workers
(``beam.samples.round_split``), no step holding more than the budget. Only file paths leave either way,
never candidates or sampled rows in a shuffle (which Beam's in-process runner keeps in memory).
TrieHH++'s candidates are its samples already (the read kept exactly the ranks below its
Bernoulli threshold). A round short of ``users_required`` users keeps nothing and says so in its
``RoundSample``, as ``sample_pass.SampleFromCandidates`` does, whose samples this equals.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from triehh_beam.beam.held import DEFAULT_BUDGET, HeldRows, check_budget
from triehh_beam.beam.samples.candidates import ROUND_COLUMN, candidates_pattern
from triehh_beam.beam.samples.round_split import SPLIT_TAG, PlanRoundDoFn, ShardTables, SplitRounds
from triehh_beam.beam.samples.sample_pass import (RoundSample, add_candidates, sampled_shards,
                                                  split_shards, threshold_of)
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness import sampling
from triehh_beam.protocol.randomness.bottom_m import SmallestRanks

__all__ = ["CutRounds", "SAMPLES_TAG", "round_candidates"]

SAMPLES_TAG = "samples"
_COLUMNS = ["user_id", "item", "count", "rank"]


def _may_hold(row_group: pq.RowGroupMetaData, column: int, round_index: int) -> bool:
    statistics = row_group.column(column).statistics
    if statistics is None or not statistics.has_min_max:
        return True
    return statistics.min <= round_index <= statistics.max


def round_candidates(pattern: str, round_index: int) -> Iterator[pa.RecordBatch]:
    """Round ``round_index``'s candidate rows (columns user_id, item, count, rank) in the
    Parquet files matching ``pattern`` (any ``FileSystems`` path), a row group at a time; the
    row groups whose ``round`` statistics exclude the round are not read."""
    for metadata in FileSystems.match([pattern])[0].metadata_list:
        with FileSystems.open(metadata.path, compression_type="uncompressed") as f:
            parquet = pq.ParquetFile(f)
            column = parquet.schema_arrow.get_field_index(ROUND_COLUMN)
            for group in range(parquet.num_row_groups):
                if not _may_hold(parquet.metadata.row_group(group), column, round_index):
                    continue
                table = parquet.read_row_group(group, columns=_COLUMNS + [ROUND_COLUMN])
                table = table.filter(pc.equal(table.column(ROUND_COLUMN), round_index)).select(_COLUMNS)
                if table.num_rows:
                    yield from table.combine_chunks().to_batches()


@beam.typehints.with_input_types(int, records_ranked=int)
@beam.typehints.with_output_types(Tuple[int, str])
class _CutRoundDoFn(beam.DoFn):
    """A round -> its sample tables written under ``samples_dir`` (``(round, path)`` per table)
    and, tagged ``SAMPLES_TAG``, its ``(round, RoundSample)``."""

    def __init__(self, pattern: str, pass_keys: sampling.PassKeys, sample_size: Optional[int],
                 bernoulli_top: Optional[int], users_required: Optional[int], shards: int,
                 encoder: ItemEncoder, truncate: bool, samples_dir: str):
        self._pattern = pattern
        self._m, self._top, self._required, self._shards = sample_size, bernoulli_top, users_required, shards
        self._writing = (pass_keys, encoder, truncate, samples_dir)  # derived keys only, never the seed

    def setup(self):
        self._tables = ShardTables(*self._writing)
        self._held = HeldRows("cut_whole")

    def _kept(self, round_index: int) -> Tuple[Dict[int, List[pa.RecordBatch]], Optional[int]]:
        """Per shard, the round's sampled rows; and the users its bottom-m drew (None: TrieHH++,
        counted from the tables)."""
        kept: Dict[int, List[pa.RecordBatch]] = {}
        rows = 0  # the round's rows read: at most the budget (``PlanRoundDoFn``), all it holds
        if self._top is not None:
            for batch in round_candidates(self._pattern, round_index):
                rows += batch.num_rows
                self._held.held(rows)
                ranks = batch.column("rank").to_numpy()
                every_row = np.arange(batch.num_rows)
                for (_, shard), part in split_shards(round_index, batch, every_row, ranks, self._top, self._shards):
                    kept.setdefault(shard, []).append(part)
            return kept, None
        smallest = SmallestRanks(self._m)
        for batch in round_candidates(self._pattern, round_index):
            rows += batch.num_rows
            self._held.held(rows)
            add_candidates(smallest, batch)
        threshold = threshold_of(smallest)
        del smallest
        for batch in round_candidates(self._pattern, round_index):
            for (_, shard), part in sampled_shards((round_index, batch), threshold, self._required, self._shards):
                kept.setdefault(shard, []).append(part)
        return kept, threshold[1]

    def process(self, round_index, records_ranked):
        kept, users = self._kept(round_index)
        tabled = 0
        for path, rows in self._tables.write(round_index, kept):
            tabled += rows
            yield round_index, path
        drawn = RoundSample(round_index, tabled if users is None else users,
                            None if users is None else self._required, records_ranked)
        yield beam.pvalue.TaggedOutput(SAMPLES_TAG, (round_index, drawn))


class CutRounds(beam.PTransform):
    """The rounds' samples from written candidates (a fresh discovery's first read, or a resume's
    pass in the same job), a round at a time (see the module).

    Args:
      candidates_prefix: where ``candidates.WriteCandidates`` wrote them.
      pass_keys, rounds, sample_size, sample_probability, encoder, truncate, shards,
        users_required: as ``sample_pass.SampleFromCandidates``'s.
      samples_dir: where the sample tables are written (``samples.part_path``).
      records_ranked: an int, or a singleton side input (the records a pass in the same job read).
      after: a PCollection that is complete once the candidates are written (``WriteCandidates``'s
        output, in the same job): the cut starts then. None: the pipeline's root (an earlier job
        wrote them).
      budget: the rows one step may hold (``beam.held``): a round with more candidates is cut by
        rank buckets and groups of shards (``beam.samples.round_split``), its spill under ``spill_dir``
        (default: ``<candidates_prefix>-cut``, deleted with the candidates).

    Raises ValueError for no rounds or rounds outside 1..L, both or neither of a sample size and a
    probability, m < 1, shards outside 1..256, or a budget below 2 rows.

    Input: the pipeline's root. Output: a dict of two PCollections, ``"tables"``: ``(round,
    path)`` of every sample table written, and ``"samples"``: one ``(round, RoundSample)`` per
    round. Counters: ``sample_files_written`` and, per round, ``round{r}.items_too_long`` and
    ``round{r}.items_unencodable``; the distribution ``rows_held`` (``beam.held``).
    """

    def __init__(self, candidates_prefix: str, pass_keys: sampling.PassKeys, rounds: Sequence[int],
                 sample_size: Optional[int], encoder: ItemEncoder, truncate: bool, shards: int,
                 samples_dir: str, sample_probability: Optional[float] = None,
                 users_required: Optional[int] = None, records_ranked: Any = 0,
                 after: Optional[beam.PCollection] = None, budget: int = DEFAULT_BUDGET,
                 spill_dir: Optional[str] = None):
        super().__init__()
        if (sample_size is None) == (sample_probability is None):
            raise ValueError("give a sample size (TrieHH) or a sample probability (TrieHH++), not both")
        if sample_size is not None and sample_size < 1:
            raise ValueError(f"sample size must be >= 1, got {sample_size}")
        if not 1 <= shards <= 256:
            raise ValueError(f"shards must be 1 to 256, got {shards}")
        if not rounds or min(rounds) < 1 or max(rounds) > pass_keys.max_rounds:
            raise ValueError(f"rounds {list(rounds)} are not within 1..{pass_keys.max_rounds}")
        top = None if sample_probability is None else sampling.bernoulli_threshold(sample_probability) - 1
        self._rounds = sorted(set(int(r) for r in rounds))
        self._ranked = records_ranked
        self._after = after
        top = None if top is None else max(top, 0)
        self._pattern = candidates_pattern(candidates_prefix)
        self._budget = check_budget(budget)
        self._cut = _CutRoundDoFn(self._pattern, pass_keys, sample_size, top, users_required, shards,
                                  encoder, truncate, samples_dir)
        self._split = SplitRounds(pass_keys, sample_size, top, users_required, shards, encoder, truncate,
                                  samples_dir, spill_dir or f"{candidates_prefix}-cut", self._budget,
                                  records_ranked, SAMPLES_TAG)

    def expand(self, pbegin):
        if self._after is None:
            rounds = pbegin | "Rounds" >> beam.Create(self._rounds).with_output_types(int)
        else:  # once every candidate file is written
            rounds = (
                self._after
                | "AllWritten" >> beam.combiners.ToList()
                | "Rounds" >> beam.FlatMap(lambda _, rounds: rounds, rounds=self._rounds).with_output_types(int)
            )
        planned = (
            rounds
            | "Spread" >> beam.Reshuffle()
            | "PlanEachRound" >> beam.ParDo(PlanRoundDoFn(self._pattern, self._budget)).with_outputs(
                SPLIT_TAG, main="whole")
        )
        cut = planned.whole | "CutEachRound" >> beam.ParDo(self._cut, self._ranked).with_outputs(
            SAMPLES_TAG, main="tables")
        split = planned[SPLIT_TAG] | "SplitRounds" >> self._split
        return {
            "tables": (cut.tables, split["tables"]) | "AllTables" >> beam.Flatten(),
            "samples": (cut[SAMPLES_TAG], split[SAMPLES_TAG]) | "AllSamples" >> beam.Flatten(),
        }
