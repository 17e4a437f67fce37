"""A whole TrieHH or TrieHH++ discovery per event-time window, in one graph: the sampling pass and
the L rounds of ``beam.sample_pass`` / ``beam.sampled_rounds``, composed from their public
building blocks, with what a batch job knows before it builds its graph (n, m, the keys) arriving
per window as that window's ``WindowPlan`` side input; each window samples with its own keys
(``sampling.WindowKeys``), round ``r``'s frontier is the window's round ``r - 1`` result, and a
window whose plan is not released draws nothing. A TrieHH window planned for a declared
population N samples ``plan.real_sample_sizes[r - 1]`` of its real users in round r
(``sampling.real_users_sampled``).
"""

from __future__ import annotations

import math
from typing import Any, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from triehh_beam.beam import sample_pass, sampled_rounds
from triehh_beam.beam.sample_pass import RoundSample
from triehh_beam.beam.sample_tables import SampleTableBuilder
from triehh_beam.beam.windows import EventWindows, window_view
from triehh_beam.io.normalise import binary_buffers
from triehh_beam.protocol import sampling
from triehh_beam.protocol.bottom_m import SmallestRanks
from triehh_beam.protocol.encoding import ItemEncoder
from triehh_beam.protocol.rounds import RoundResult

__all__ = ["RunWindowRounds", "SampleEachWindow", "WindowPlan"]



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
        bounds = {round_index: int(bound) for round_index in range(1, self._max_rounds + 1)}
        yield from sample_pass.candidates_by_round(batch, ranks, bounds)


class _WindowThresholdDoFn(beam.DoFn):
    """A round's (rank, user) candidates in one window -> its bottom-K_r threshold and size."""

    def process(self, keyed, plan):
        round_index, parts = keyed
        required = plan.users_required(round_index)
        if not required:
            return
        smallest = SmallestRanks(required)
        for part in parts:
            if part.num_rows:
                sample_pass.add_candidates(smallest, part)
        threshold = sample_pass.threshold_of(smallest)
        if threshold[0] is not None:
            yield round_index, threshold


@beam.typehints.with_input_types(Tuple[int, pa.RecordBatch], thresholds=Any, plan=Any)
@beam.typehints.with_output_types(Tuple[Tuple[int, int], pa.RecordBatch])
class _KeepWindowSampledDoFn(beam.DoFn):
    """``sample_pass.sampled_shards`` with the window's required users and shards."""

    def process(self, candidates, thresholds, plan):
        threshold = thresholds.get(candidates[0], (None, 0))
        yield from sample_pass.sampled_shards(candidates, threshold, plan.users_required(candidates[0]),
                                              sample_pass.shard_count(plan.sample_size))


@beam.typehints.with_input_types(Tuple[int, pa.RecordBatch], plan=Any)
@beam.typehints.with_output_types(Tuple[Tuple[int, int], pa.RecordBatch])
class _ShardWindowBernoulliDoFn(beam.DoFn):
    """TrieHH++: every candidate row is sampled, split by shard of [0, top_rank] (one shard per
    ~16,384 of the window's expected sample)."""

    def __init__(self, top_rank: int):
        self._top = top_rank

    def process(self, candidates, plan):
        round_index, batch = candidates
        shards = sample_pass.shard_count(max(1, math.ceil(plan.sample_probability * plan.population)))
        ranks = np.asarray(batch.column("rank"))
        yield from sample_pass.split_shards(round_index, batch, np.arange(batch.num_rows), ranks, self._top, shards)


@beam.typehints.with_input_types(Tuple[Tuple[int, int], Iterable[pa.RecordBatch]], plan=Any)
@beam.typehints.with_output_types(Tuple[int, pa.Table])
class _BuildWindowTableDoFn(beam.DoFn):
    """The kept rows of one (round, shard) of a window -> its sample table, the choice uniforms
    under the window's keys (``SampleTableBuilder``)."""

    def __init__(self, window_keys: sampling.WindowKeys, max_rounds: int, encoder: ItemEncoder, truncate: bool):
        self._window_keys = _WindowKeysCache(window_keys, max_rounds)
        self._encoder = encoder
        self._truncate = truncate

    def setup(self):
        self._builder = SampleTableBuilder(self._encoder, self._truncate)

    def process(self, keyed, plan):
        (round_index, shard), batches = keyed
        yield round_index, self._builder.build(self._window_keys(plan).round_keys(round_index), shard, batches)


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
                _BuildWindowTableDoFn(self._keys, self._max_rounds, self._encoder, self._truncate),
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
            | "UsersPerTable" >> beam.Map(sample_pass.table_users)
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
            | "RankAndUser" >> beam.Map(sample_pass.rank_and_user)
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
@beam.typehints.with_output_types(sampled_rounds.PartialVotes)
class _VoteWindowTableDoFn(beam.DoFn):
    """One sample table of a window -> its private per-prefix votes and users
    (``sampled_rounds.vote_table``); the frontier is round ``r - 1``'s result, if any (a window
    whose previous round left no result has an empty frontier)."""

    def __init__(self, round_index: int, prefix: str):
        self._round = round_index
        self._prefix = prefix

    def setup(self):
        self._counters = sampled_rounds.RoundCounters(self._prefix)

    def process(self, table, frontiers):
        votes = sampled_rounds.vote_table(table, frontiers[0] if frontiers else frozenset(), self._round)
        self._counters.count(votes, with_deny_list=False)
        yield votes.counts, votes.users


def _result_of(kept_and_users, round_index: int, sizes: List[Tuple[int, RoundSample]]) -> Tuple[int, RoundResult]:
    return sampled_rounds.round_result(kept_and_users, round_index, None, None, dict(sizes), f"round{round_index}.")


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
            FrozenSet[sampled_rounds.Prefix])
        results = []
        for r in range(1, self._max_rounds + 1):
            label = f"Round{r}"
            tables = (
                keyed_tables
                | f"{label}Tables" >> beam.Filter(sampled_rounds.of_round, round_index=r)
                | f"{label}Values" >> beam.Values()
            )
            kept = (
                tables
                | f"{label}Vote" >> beam.ParDo(
                    _VoteWindowTableDoFn(r, f"round{r}."), frontiers=window_view(beam.pvalue.AsList(frontier)))
                | f"{label}PruneBelowTheta" >> beam.CombineGlobally(
                    sampled_rounds.MergeAndPruneCombineFn(self._theta)).without_defaults()
            )
            result = kept | f"{label}Result" >> beam.Map(
                _result_of, round_index=r, sizes=window_view(beam.pvalue.AsList(self._sizes)))
            results.append(result)
            frontier = result | f"{label}NextFrontier" >> beam.Map(sampled_rounds.frontier_of)
        return tuple(results) | "Results" >> beam.Flatten()


def results_by_round(results: Iterable[Tuple[int, RoundResult]]) -> Dict[int, RoundResult]:
    """A window's ``(round, RoundResult)`` elements as a dict (a round appears at most once)."""
    by_round: Dict[int, RoundResult] = {}
    for round_index, result in results:
        if round_index in by_round:
            raise ValueError(f"round {round_index} has two results in one window")
        by_round[round_index] = result
    return by_round
