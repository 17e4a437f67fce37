"""A whole TrieHH discovery per event-time window, in one graph: the sampling pass and the L
rounds of ``beam.sample_pass`` / ``beam.sampled_rounds``, with what a batch job knows before it
builds its graph (n, m, the keys) arriving per window instead: each window's ``WindowPlan``
(census, plan and ledger decision, made by the job layer) is a per-window side input, each
window samples with its own keys (``sampling.WindowKeys``: seed, identity, window start and the
release nonce its plan carries),
and round ``r``'s frontier is the per-window ``AsList`` of round ``r - 1``'s kept prefixes. A
window whose plan is not released draws nothing, so nothing downstream of the census sees its
records. Theta depends only on (epsilon, delta, L, rule), so it is fixed when the graph is
built. A TrieHH window is planned for a declared population N, not its n: round r samples the
bottom ``plan.real_sample_sizes[r - 1]`` of the window's real users (``K_r``, what a bottom-m of N
ranks with the N - n phantoms abstaining leaves of them; ``sampling.real_users_sampled``). TrieHH++ (``sample_probability``): a window's round-r sample is every user of the window
whose rank under the window's keys is below ``sampling.bernoulli_threshold(p_s)`` (no prefilter,
no bottom-m); tau and p_s do not depend on n, so both are fixed with the graph too.
"""

from __future__ import annotations

import math
from typing import Any, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from triehh_beam.beam import sample_pass, sampled_rounds
from triehh_beam.beam.sample_pass import RoundSample
from triehh_beam.beam.windows import EventWindows, window_view
from triehh_beam.io.normalise import binary_buffers
from triehh_beam.protocol import sampling
from triehh_beam.protocol.encoding import ItemEncoder, Units
from triehh_beam.protocol.rounds import RoundResult

__all__ = ["RunWindowRounds", "SampleEachWindow", "WindowPlan"]

_Prefix = sampled_rounds._Prefix


class WindowPlan(NamedTuple):
    """What the job decided for one window, before anything of it is sampled.

    Attributes:
      start: the window's start, microseconds since the epoch (UTC).
      released: the plan is feasible and its spend is recorded in the ledger: the window is
        sampled and its result published. False: nothing is sampled (``reason`` says why).
      population: n, the window's distinct users (private).
      records: the records the census counted (private).
      theta, sample_size: the plan's threshold and m (0 when there is no plan; m is 0 for
        TrieHH++, whose sample is Bernoulli).
      reason: why the window is withheld (None when released), without any count: it is shown
        on the console and in progress events.
      detail: the reason with its figures (the planner's message holds n): private, for the
        window's operator report (and the console only under ``--verbose``).
      nonce: the window's release nonce (committed to its state before this plan is output):
        with ``sampling.WindowKeys`` it gives every key of the window's sampling and estimates.
      real_sample_sizes: TrieHH: per round 1..L, the real users sampled (``K_r``, private);
        empty for TrieHH++ and unreleased windows.
    """

    start: int
    released: bool
    population: int
    records: int
    theta: int = 0
    sample_size: int = 0
    reason: Optional[str] = None
    detail: Optional[str] = None
    sample_probability: float = 0.0  # TrieHH++'s p_s (0 for TrieHH)
    nonce: bytes = b""
    real_sample_sizes: Tuple[int, ...] = ()

    def users_required(self, round_index: int) -> Optional[int]:
        """K_r, the real users round ``round_index`` samples (TrieHH); None for TrieHH++ (a
        Bernoulli sample's size is random)."""
        if self.sample_probability:
            return None
        return self.real_sample_sizes[round_index - 1]


class _WindowKeysCache:
    """Per-window pass keys, derived once per worker and window."""

    def __init__(self, window_keys: sampling.WindowKeys, max_rounds: int):
        self._window_keys = window_keys
        self._max_rounds = max_rounds
        self._cache: Dict[Tuple[int, bytes], sampling.PassKeys] = {}

    def __call__(self, plan: WindowPlan) -> sampling.PassKeys:
        keys = self._cache.get((plan.start, plan.nonce))
        if keys is None:
            if len(self._cache) > 64:
                self._cache.clear()
            keys = self._cache[(plan.start, plan.nonce)] = self._window_keys.sampler(
                plan.start, plan.nonce).pass_keys(self._max_rounds)
        return keys


class _RankWindowDoFn(beam.DoFn):
    """A window's batch -> per round, its rows under the window's prefilter bound (TrieHH), or
    exactly its rows ranked at most ``top`` (TrieHH++: below the Bernoulli threshold), ranked
    with the window's keys; nothing for a window that is not released."""

    def __init__(self, windows: EventWindows, window_keys: sampling.WindowKeys, max_rounds: int,
                 top: Optional[int] = None):
        self._windows = windows
        self._keys = _WindowKeysCache(window_keys, max_rounds)
        self._max_rounds = max_rounds
        self._top = top

    def process(self, batch, plan):
        if batch.num_rows == 0 or not plan.released:
            return
        if self._top is None:
            bound = np.uint64(sampling.rank_prefilter_bound(plan.population, plan.sample_size))
        elif self._top < 0:  # a Bernoulli sample of probability below 2^-64: nobody
            return
        else:
            bound = np.uint64(self._top)
        ranks = self._keys(plan).ranks_all(*binary_buffers(batch.column("user_id")))
        for round_index in range(1, self._max_rounds + 1):
            row = ranks[round_index - 1]
            kept = np.flatnonzero(row <= bound)
            if len(kept):
                taken = batch.take(pa.array(kept)) if len(kept) < batch.num_rows else batch
                yield round_index, taken.append_column("rank", pa.array(row[kept], pa.uint64()))


class _WindowThresholdDoFn(beam.DoFn):
    """A round's (rank, user) candidates in one window -> its bottom-K_r threshold and size."""

    def process(self, keyed, plan):
        round_index, parts = keyed
        tables = [pa.Table.from_batches([p]) for p in parts if p.num_rows]
        required = plan.users_required(round_index)
        if not tables or not required:
            return
        pairs = pa.concat_tables(tables)
        pairs = pa.Table.from_arrays(
            [pairs.column("rank"), pairs.column("user_id").cast(pa.binary())], schema=sample_pass._PAIRS_SCHEMA)
        kept = sample_pass._bottom(pairs, required)
        last = kept.num_rows - 1
        largest = (int(kept.column("rank")[last].as_py()), kept.column("user_id")[last].as_py())
        yield round_index, (largest, kept.num_rows)


@beam.typehints.with_input_types(Tuple[int, pa.RecordBatch], thresholds=Any, plan=Any)
@beam.typehints.with_output_types(Tuple[Tuple[int, int], pa.RecordBatch])
class _KeepWindowSampledDoFn(sample_pass._KeepSampledDoFn):
    """``_KeepSampledDoFn`` with the window's required users and shards."""

    def __init__(self):
        super().__init__(None, 1)

    def process(self, candidates, thresholds, plan):
        self._required = plan.users_required(candidates[0])
        self._shards = sample_pass._shard_count(plan.sample_size, None)
        yield from super().process(candidates, thresholds)


@beam.typehints.with_input_types(Tuple[int, pa.RecordBatch], plan=Any)
@beam.typehints.with_output_types(Tuple[Tuple[int, int], pa.RecordBatch])
class _ShardWindowBernoulliDoFn(sample_pass._ShardBernoulliDoFn):
    """``_ShardBernoulliDoFn`` with the window's shards (one per ~16,384 of its expected sample)."""

    def __init__(self, top_rank: int):
        super().__init__(top_rank, 1)

    def process(self, candidates, plan):
        expected = math.ceil(plan.sample_probability * plan.population)
        self._shards = sample_pass._shard_count(max(1, expected), None)
        yield from super().process(candidates)


@beam.typehints.with_input_types(Tuple[Tuple[int, int], Iterable[pa.RecordBatch]], plan=Any)
@beam.typehints.with_output_types(Tuple[int, pa.Table])
class _BuildWindowTableDoFn(sample_pass._BuildSampleTableDoFn):
    """``_BuildSampleTableDoFn`` with the window's keys (the item-choice uniforms)."""

    def __init__(self, windows: EventWindows, window_keys: sampling.WindowKeys, max_rounds: int,
                 encoder: ItemEncoder, truncate: bool):
        super().__init__(None, encoder, truncate)
        self._windows = windows
        self._window_keys = _WindowKeysCache(window_keys, max_rounds)

    def process(self, keyed, plan):
        self._keys = self._window_keys(plan)
        yield from super().process(keyed)


def _round_sample(keyed, plan: WindowPlan) -> Tuple[int, RoundSample]:
    round_index, (_, users) = keyed
    return round_index, RoundSample(round_index, users, plan.users_required(round_index), plan.records)


def _bernoulli_round_sample(keyed: Tuple[int, int], plan: WindowPlan) -> Tuple[int, RoundSample]:
    round_index, users = keyed
    return round_index, RoundSample(round_index, users, None, plan.records)  # its size is random


class SampleEachWindow(beam.PTransform):
    """Windowed record batches -> every round's sample tables per window, in one pass.

    Args:
      windows: the job's ``EventWindows``.
      window_keys: ``Sampler.window_keys()`` (derived; the graph never carries the seed).
      max_rounds: L.
      plans: the per-window ``WindowPlan`` PCollection (one element per window).
      encoder, truncate: as ``SampleAllRounds``.
      sample_probability: TrieHH++'s p_s (the graph's, as every window's plan records it): each
        round's sample is the Bernoulli one; None: TrieHH's bottom-m of each window's plan.

    Output: ``{"tables": (round, pa.Table), "samples": (round, RoundSample)}``, per window.
    """

    def __init__(self, windows: EventWindows, window_keys: sampling.WindowKeys, max_rounds: int, plans,
                 encoder: ItemEncoder, truncate: bool = False, sample_probability: Optional[float] = None):
        super().__init__()
        self._probability = sample_probability
        self._windows = windows
        self._keys = window_keys
        self._max_rounds = max_rounds
        self._plans = plans
        self._encoder = encoder
        self._truncate = truncate

    def _plan(self):
        return window_view(beam.pvalue.AsSingleton(self._plans))

    def _build_tables(self, sampled):
        return (
            sampled
            | "GroupPerShard" >> beam.GroupByKey()
            | "BuildSampleTables" >> beam.ParDo(
                _BuildWindowTableDoFn(self._windows, self._keys, self._max_rounds, self._encoder, self._truncate),
                self._plan())
        )

    def _expand_bernoulli(self, batches):
        top = sampling.bernoulli_threshold(self._probability) - 1  # ranks below the threshold
        candidates = batches | "RankAllRounds" >> beam.ParDo(
            _RankWindowDoFn(self._windows, self._keys, self._max_rounds, top), self._plan())
        tables = self._build_tables(
            candidates | "ShardSampled" >> beam.ParDo(_ShardWindowBernoulliDoFn(max(top, 0)), plan=self._plan()))
        sizes = (
            tables
            | "UsersPerTable" >> beam.Map(sample_pass._table_users)
            | "UsersPerRound" >> beam.CombinePerKey(sum)
            | "RoundSamples" >> beam.Map(_bernoulli_round_sample, plan=self._plan())
        )
        return {"tables": tables, "samples": sizes}

    def expand(self, batches):
        if self._probability is not None:
            return self._expand_bernoulli(batches)
        candidates = batches | "RankAllRounds" >> beam.ParDo(
            _RankWindowDoFn(self._windows, self._keys, self._max_rounds), self._plan())
        thresholds = (
            candidates
            | "RankAndUser" >> beam.Map(sample_pass._slim)
            | "PerRound" >> beam.GroupByKey()
            | "BottomM" >> beam.ParDo(_WindowThresholdDoFn(), plan=self._plan())
        )
        tables = self._build_tables(
            candidates
            | "KeepSampled" >> beam.ParDo(
                _KeepWindowSampledDoFn(), thresholds=window_view(beam.pvalue.AsDict(thresholds)), plan=self._plan()))
        sizes = thresholds | "RoundSamples" >> beam.Map(_round_sample, plan=self._plan())
        return {"tables": tables, "samples": sizes}


@beam.typehints.with_input_types(pa.Table, frontiers=Any)
@beam.typehints.with_output_types(sampled_rounds._Partial)
class _VoteWindowTableDoFn(sampled_rounds._VoteTableDoFn):
    """``_VoteTableDoFn`` with the window's frontier: round ``r - 1``'s result, if any (a window
    whose previous round left no result has an empty frontier)."""

    def process(self, table, frontiers):
        frontier = frontiers[0] if frontiers else frozenset()
        yield from super().process(table, frontier)


def _result_of(kept_and_users, round_index: int, sizes: List[Tuple[int, RoundSample]]) -> Tuple[int, RoundResult]:
    return sampled_rounds._result(kept_and_users, round_index, None, None, dict(sizes), f"round{round_index}.")


def _of_round(keyed, round_index: int) -> bool:
    return keyed[0] == round_index


def _frontier_of(keyed: Tuple[int, RoundResult]) -> FrozenSet[Units]:
    return sampled_rounds.frontier_after(keyed[1])


class RunWindowRounds(beam.PTransform):
    """Rounds 1..L per window, unrolled: ``(round, sample table)`` per window -> one
    ``(round, RoundResult)`` per window and round that had a sample (a missing round kept
    nothing). ``sample_sizes`` is ``SampleEachWindow``'s ``"samples"``."""

    def __init__(self, max_rounds: int, theta: int, sample_sizes):
        super().__init__()
        self._max_rounds = max_rounds
        self._theta = theta
        self._sizes = sample_sizes

    def expand(self, keyed_tables):
        frontier = keyed_tables.pipeline | "FirstFrontier" >> beam.Create([frozenset({()})]).with_output_types(
            FrozenSet[_Prefix])
        results = []
        for r in range(1, self._max_rounds + 1):
            label = f"Round{r}"
            tables = (
                keyed_tables
                | f"{label}Tables" >> beam.Filter(_of_round, round_index=r)
                | f"{label}Values" >> beam.Values()
            )
            kept = (
                tables
                | f"{label}Vote" >> beam.ParDo(
                    _VoteWindowTableDoFn(r, f"round{r}."), frontiers=window_view(beam.pvalue.AsList(frontier)))
                | f"{label}PruneBelow({self._theta})" >> beam.CombineGlobally(
                    sampled_rounds._MergeAndPruneCombineFn(self._theta)).without_defaults()
            )
            result = kept | f"{label}Result" >> beam.Map(
                _result_of, round_index=r, sizes=window_view(beam.pvalue.AsList(self._sizes)))
            results.append(result)
            frontier = result | f"{label}NextFrontier" >> beam.Map(_frontier_of)
        return tuple(results) | "Results" >> beam.Flatten()


def results_by_round(results: Iterable[Tuple[int, RoundResult]]) -> Dict[int, RoundResult]:
    """A window's ``(round, RoundResult)`` elements as a dict (a round appears at most once)."""
    by_round: Dict[int, RoundResult] = {}
    for round_index, result in results:
        if round_index in by_round:
            raise ValueError(f"round {round_index} has two results in one window")
        by_round[round_index] = result
    return by_round
