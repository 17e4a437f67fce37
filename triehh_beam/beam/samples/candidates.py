"""The candidates of a discovery's one read (``DrawCandidates``): while the census counts n, every
record batch is ranked for all rounds and each round keeps a superset of its sample under a rule
that does not depend on n (``CandidateBounds``): every row whose rank is at most a rate bound, and
each bundle's rows among its ``bundle_keep`` smallest distinct ranks until the bundle has seen that
many at or below the bound. The global bottom-m is inside whenever ``m <= bundle_keep`` (a bundle
holds every user that fewer than m users precede) or the m-th smallest rank is at most the rate
bound; the cut to exactly m (``round_cut.CutRounds``) checks it and says when it is short.
Candidates are written as Parquet (``WriteCandidates``, Beam's file sink: a retried bundle leaves
no duplicate; a row group holds one round's) and read back a round at a time
(``round_cut.round_candidates``) once the plan is charged."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.parquetio import WriteToParquetBatched
from apache_beam.metrics import Metrics
from apache_beam.utils.windowed_value import WindowedValue

from triehh_beam.beam.held import DEFAULT_BUDGET, HeldRows, check_budget
from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.samples.sample_pass import Candidates, candidates_by_round
from triehh_beam.io.arrays import binary_buffers
from triehh_beam.io.normalise import single_batch
from triehh_beam.io.schema import record_schema
from triehh_beam.protocol.distinct import distinct, union
from triehh_beam.protocol.items.encoding import ItemKind
from triehh_beam.protocol.randomness import sampling

__all__ = ["ROUND_COLUMN", "BundleSmallest", "CandidateBounds", "DrawCandidates", "WriteCandidates",
           "candidate_schema", "candidates_pattern"]

ROUND_COLUMN = "round"  # the candidates' round, a column of their files
_OUTPUT_ROWS = 1 << 16  # rows of one round a bundle emits at once (a row group of the files)
_NOBODY = -1


class CandidateBounds(NamedTuple):
    """What a round keeps before n is known (see the module).

    Attributes:
      rate_bound: every row ranked at most this is a candidate (-1: none by rate).
      bundle_keep: each bundle also keeps its rows among this many smallest distinct ranks, until
        it has seen this many ranks at or below ``rate_bound`` (0: none).
    """

    rate_bound: int
    bundle_keep: int


class BundleSmallest:
    """One round's rows above the rate bound that are among a bundle's ``keep`` smallest distinct
    ranks (ties at the cut kept: a superset is safe), until ``keep`` distinct ranks at or below
    the bound were seen (``closed``: none above it can be among the ``keep`` smallest)."""

    def __init__(self, keep: int, rate_bound: int):
        self._keep = keep
        self._bound = np.uint64(max(rate_bound, 0))
        self._no_rate = rate_bound < 0
        self._low = np.zeros(0, dtype=np.uint64)  # distinct ranks <= the bound seen so far
        self._cutoff = np.uint64(2**64 - 1)  # rows above it are not among the smallest
        self._parts: List[pa.RecordBatch] = []
        self.closed = keep <= 0

    def add(self, batch: pa.RecordBatch, ranks: np.ndarray) -> None:
        """Adds a batch with this round's ranks (all its rows, not only those above the bound)."""
        if self.closed:
            return
        below = np.zeros(len(ranks), dtype=bool) if self._no_rate else ranks <= self._bound
        if below.any():
            self._low = union(self._low, ranks[below])
            if len(self._low) >= self._keep:
                self.closed, self._parts = True, []
                return
        rows = np.flatnonzero(~below & (ranks <= self._cutoff))
        if len(rows):
            kept = batch.take(pa.array(rows)).append_column("rank", pa.array(ranks[rows], pa.uint64()))
            self._parts.append(kept)
        self._compact()

    def _compact(self) -> None:
        if not self._parts:
            return
        table = pa.Table.from_batches(self._parts)
        ranks = np.asarray(table.column("rank").combine_chunks())
        smallest = distinct(ranks)
        room = self._keep - len(self._low)
        if len(smallest) > room:
            self._cutoff = smallest[room - 1]
            table = table.filter(pa.array(ranks <= self._cutoff))
        self._parts = table.combine_chunks().to_batches()

    @property
    def held(self) -> int:
        """The rows it holds."""
        return sum(part.num_rows for part in self._parts)

    def rows(self) -> Optional[pa.RecordBatch]:
        """The rows kept (None: none, or closed)."""
        if self.closed or not self._parts:
            return None
        return single_batch(pa.Table.from_batches(self._parts).combine_chunks())


@beam.typehints.with_input_types(pa.RecordBatch)
@beam.typehints.with_output_types(Candidates)
class _CandidatesDoFn(beam.DoFn):
    """A batch -> per round its rows at most the rate bound; each bundle's smallest above it at
    the bundle's end."""

    def __init__(self, pass_keys: sampling.PassKeys, rounds: Sequence[int], bounds: CandidateBounds, budget: int):
        self._keys = pass_keys  # derived keys only, never the seed
        self._rounds = list(rounds)
        # A quarter of the budget for the rows pending output, a quarter for each bundle's
        # smallest (a smaller keep only means a short round is drawn again from the records).
        share = max(1, budget // (4 * len(self._rounds)))
        self._output_rows = min(_OUTPUT_ROWS, share)
        self._bounds = bounds._replace(bundle_keep=min(bounds.bundle_keep, share))
        self._rate_bounds = {r: bounds.rate_bound for r in self._rounds}

    def setup(self):
        self._ranked = Metrics.counter(METRICS_NAMESPACE, "records_ranked")
        self._held = HeldRows("candidates")

    def start_bundle(self):
        self._windows: Dict[Any, _WindowRows] = {}  # a bundle's rows kept per window

    def process(self, batch, window=beam.DoFn.WindowParam):
        if batch.num_rows == 0:
            return
        self._ranked.inc(batch.num_rows)
        kept = self._windows.get(window)
        if kept is None:
            kept = self._windows[window] = _WindowRows(self._rounds, self._bounds)
        ranks = self._keys.ranks_all(*binary_buffers(batch.column("user_id")))
        for round_index, smallest in kept.smallest.items():
            smallest.add(batch, ranks[round_index - 1])
        # A round's rows under the rate bound go out in batches of about _OUTPUT_ROWS: each is
        # one row group of the candidate files, which the cut reads a round at a time.
        for round_index, rows in candidates_by_round(batch, ranks, self._rate_bounds):
            kept.pending[round_index].append(rows)
            kept.pending_rows[round_index] += rows.num_rows
            if kept.pending_rows[round_index] >= self._output_rows:
                yield kept.joined(round_index)
        if sum(kept.pending_rows.values()) > self._output_rows * len(self._rounds):
            for round_index in self._rounds:  # every round's pending rows: a quarter of the budget
                if kept.pending[round_index]:
                    yield kept.joined(round_index)
        # What it keeps between batches, and the batch.
        self._held.held(batch.num_rows + sum(w.held for w in self._windows.values()))

    def finish_bundle(self):
        # Each window's leftovers in that window (a bundle may hold several windows' batches).
        for window, kept in self._windows.items():
            for round_index, smallest in kept.smallest.items():
                if kept.pending[round_index]:
                    yield WindowedValue(kept.joined(round_index), window.max_timestamp(), [window])
                rows = smallest.rows()
                if rows is not None:
                    yield WindowedValue((round_index, rows), window.max_timestamp(), [window])
        self._windows = {}


class _WindowRows:
    """What a bundle keeps for one window: per round its smallest and its rows pending output."""

    def __init__(self, rounds: Sequence[int], bounds: CandidateBounds):
        self.smallest = {r: BundleSmallest(bounds.bundle_keep, bounds.rate_bound) for r in rounds}
        self.pending: Dict[int, List[pa.RecordBatch]] = {r: [] for r in rounds}
        self.pending_rows = dict.fromkeys(rounds, 0)

    @property
    def held(self) -> int:
        return sum(self.pending_rows.values()) + sum(smallest.held for smallest in self.smallest.values())

    def joined(self, round_index: int) -> Candidates:
        parts, self.pending[round_index], self.pending_rows[round_index] = self.pending[round_index], [], 0
        return round_index, single_batch(pa.Table.from_batches(parts).combine_chunks())


class DrawCandidates(beam.PTransform):
    """Record batches -> ``(round, rows with a rank column)`` candidates of every round in
    ``rounds`` (see the module), in the same read as the census. Counter ``records_ranked``;
    ``budget`` (``beam.held``) caps the rows pending output and each bundle's smallest kept,
    reported as ``rows_held``."""

    def __init__(self, pass_keys: sampling.PassKeys, rounds: Sequence[int], bounds: CandidateBounds,
                 budget: int = DEFAULT_BUDGET):
        super().__init__()
        self._budget = check_budget(budget)
        self._keys = pass_keys
        self._rounds = sorted(set(int(r) for r in rounds))
        if not self._rounds or self._rounds[0] < 1 or self._rounds[-1] > pass_keys.max_rounds:
            raise ValueError(f"rounds {list(rounds)} are not within 1..{pass_keys.max_rounds}")
        self._bounds = bounds

    def expand(self, batches):
        return batches | "RankAllRounds" >> beam.ParDo(
            _CandidatesDoFn(self._keys, self._rounds, self._bounds, self._budget))


def candidate_schema(item_kind: ItemKind) -> pa.Schema:
    """The candidates' Parquet schema: the records' columns, then ``rank`` and ``round``."""
    return record_schema(item_kind).append(pa.field("rank", pa.uint64(), nullable=False)).append(
        pa.field(ROUND_COLUMN, pa.int32(), nullable=False))


def _as_table(candidates: Candidates, schema: pa.Schema) -> pa.Table:
    round_index, batch = candidates
    batch = batch.append_column(ROUND_COLUMN, pa.array(np.full(batch.num_rows, round_index, np.int32)))
    return pa.Table.from_batches([batch.select(schema.names)]).cast(schema)


class WriteCandidates(beam.PTransform):
    """Candidates -> Parquet files ``<prefix>-*.parquet`` (Beam's file sink: written to temporary
    files and moved into place once the job succeeds)."""

    def __init__(self, prefix: str, item_kind: ItemKind):
        super().__init__()
        self._prefix = prefix
        self._schema = candidate_schema(item_kind)

    def expand(self, candidates):
        return (
            candidates
            | "ToTables" >> beam.Map(_as_table, schema=self._schema).with_output_types(pa.Table)
            | "Write" >> WriteToParquetBatched(self._prefix, self._schema, file_name_suffix=".parquet")
        )


def candidates_pattern(prefix: str) -> str:
    """The files ``WriteCandidates(prefix, ...)`` writes."""
    return f"{prefix}-*.parquet"
