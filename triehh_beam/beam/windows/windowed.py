"""A whole TrieHH or TrieHH++ discovery per event-time window, in one graph: the sampling pass and
the L rounds of ``beam.samples.sample_pass`` / ``beam.rounds.sampled_rounds``, composed from their public
building blocks, with what a batch job knows before it builds its graph (n, m, the keys) arriving
per window as that window's ``WindowPlan``. A window's values meet its records by key in a
grouping (``window_join.MeetGiven``), never as a per-window side input, and travel on in the
elements: a streaming runner need not hold a step back until a side input is filled. Each window
samples with its own keys (``sampling.WindowKeys``); its rounds vote in parallel, each on every
prefix of its length, and ``chain_rounds`` keeps of round ``r`` only the prefixes that extend
round ``r - 1``'s frontier, which is exactly what round ``r`` voting on that frontier keeps (a
user's choice of item does not depend on the frontier). A window whose plan is not released draws
nothing. A TrieHH window planned for a declared population N samples
``plan.real_sample_sizes[r - 1]`` of its real users in round r (``sampling.real_users_sampled``).
"""

from __future__ import annotations

from typing import Collection, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

import apache_beam as beam
import pyarrow as pa

from triehh_beam.beam.rounds import sampled_rounds
from triehh_beam.beam.samples import sample_pass
from triehh_beam.beam.samples.sample_pass import RoundSample
from triehh_beam.beam.samples.sample_tables import SampleTableBuilder
from triehh_beam.beam.windows.window_join import GIVEN, MAIN, RECORD_KEYS, MeetGiven, fan_out, record_key
from triehh_beam.protocol.items.encoding import ItemEncoder, Units
from triehh_beam.protocol.randomness import sampling
from triehh_beam.protocol.rounds.loop import RoundResult

__all__ = ["ChainWindowRounds", "RunWindowRounds", "SampleEachWindow", "WindowPlan", "chain_rounds",
           "results_by_round"]


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

    def shards(self) -> int:
        """Sample tables per round (``sample_pass.sample_shards`` of m, or of p_s and n)."""
        if self.sample_probability:
            return sample_pass.sample_shards(None, self.sample_probability, self.population)
        return sample_pass.sample_shards(self.sample_size, None, self.population)


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


def _released_plan(plan: WindowPlan) -> Iterable[Tuple[int, WindowPlan]]:
    if plan.released:
        yield from fan_out(plan, range(RECORD_KEYS))


class _RankWindowDoFn(beam.DoFn):
    """A window's record batches of one key and its plan -> per round, the rows under the
    window's prefilter bound (TrieHH: ``((round, key), (plan, rows))``), or exactly the rows
    ranked at most ``top`` split by shard (TrieHH++: ``((round, shard), (plan, rows))``),
    ranked with the window's keys; nothing for a window that is not released."""

    def __init__(self, window_keys: sampling.WindowKeys, max_rounds: int, top: Optional[int] = None):
        self._keys = _WindowKeysCache(window_keys, max_rounds)
        self._max_rounds = max_rounds
        self._top = top

    def process(self, met):
        key, plan, batches = met
        if plan is None or (self._top is not None and self._top < 0):  # p_s below 2^-64: nobody
            return
        bound = sampling.rank_prefilter_bound(plan.population, plan.sample_size) if self._top is None else self._top
        bounds = {round_index: int(bound) for round_index in range(1, self._max_rounds + 1)}
        for batch in batches:
            for candidates in sample_pass.rank_rounds(self._keys(plan), batch, bounds):
                if self._top is None:
                    yield (candidates[0], key), (plan, candidates[1])
                    continue
                for shard_key, kept in sample_pass.bernoulli_shards(candidates, self._top, plan.shards()):
                    yield shard_key, (plan, kept)


def _users_sampled(threshold) -> Iterable[Tuple[int, int]]:
    """A round's threshold (fanned out to its record keys) -> ``(round, users sampled)``, once."""
    (round_index, key), (_, users) = threshold
    if key == 0:
        yield round_index, users


def _rank_and_user(candidates) -> Tuple[int, Tuple[WindowPlan, pa.RecordBatch]]:
    (round_index, _), (plan, rows) = candidates
    return round_index, (plan, sample_pass.rank_and_user((round_index, rows))[1])


class _WindowThresholdDoFn(beam.DoFn):
    """A round's (rank, user) candidates in one window -> its bottom-K_r threshold
    (``sample_pass.bottom_m``: the largest sampled (rank, user), users sampled) keyed by
    ``(round, record key)`` for every record key; nothing when the round requires nobody or
    drew nobody."""

    def process(self, keyed):
        round_index, parts = keyed
        parts = list(parts)  # one window's: one plan
        required = parts[0][0].users_required(round_index)
        if not required:
            return
        threshold = sample_pass.bottom_m(required, (part for _, part in parts))
        if threshold[0] is not None:
            yield from fan_out(threshold, ((round_index, key) for key in range(RECORD_KEYS)))


class _KeepWindowSampledDoFn(beam.DoFn):
    """``sample_pass.sampled_shards`` with the window's threshold, required users and shards."""

    def process(self, met):
        (round_index, _), threshold, candidates = met
        for plan, rows in candidates:
            yield from ((shard_key, (plan, kept)) for shard_key, kept in sample_pass.sampled_shards(
                (round_index, rows), threshold or (None, 0), plan.users_required(round_index), plan.shards()))


class _BuildWindowTableDoFn(beam.DoFn):
    """The kept rows of one (round, shard) of a window -> its sample table, the choice uniforms
    under the window's keys (``sample_pass.sample_table``)."""

    def __init__(self, window_keys: sampling.WindowKeys, max_rounds: int, encoder: ItemEncoder, truncate: bool):
        self._window_keys = _WindowKeysCache(window_keys, max_rounds)
        self._encoder = encoder
        self._truncate = truncate

    def setup(self):
        self._builder = SampleTableBuilder(self._encoder, self._truncate)

    def process(self, keyed):
        shard_key, rows = keyed
        rows = list(rows)  # one window's: one plan
        yield sample_pass.sample_table(self._builder, self._window_keys(rows[0][0]), (shard_key, (b for _, b in rows)))


class SampleEachWindow(beam.PTransform):
    """Windowed record batches -> every round's sample tables per window, in one pass.

    Args:
      window_keys: ``Sampler.window_keys()`` (derived; the graph never carries the seed).
      max_rounds: L.
      plans: the per-window ``WindowPlan`` PCollection (one element per window).
      encoder, truncate: as ``SampleAllRounds``.
      sample_probability: TrieHH++'s p_s (the graph's, as every window's plan records it): each
        round's sample is the Bernoulli one; None: TrieHH's bottom-m of each window's plan.

    Output: ``{"tables": (round, pa.Table), "samples": (round, users sampled)}``, per window.
    """

    def __init__(self, window_keys: sampling.WindowKeys, max_rounds: int, plans, encoder: ItemEncoder,
                 truncate: bool = False, sample_probability: Optional[float] = None):
        super().__init__()
        self._probability = sample_probability
        self._keys = window_keys
        self._max_rounds = max_rounds
        self._plans = plans
        self._encoder = encoder
        self._truncate = truncate

    def _build_tables(self, sampled):
        return (
            sampled
            | "GroupPerShard" >> beam.GroupByKey()
            | "BuildSampleTables" >> beam.ParDo(
                _BuildWindowTableDoFn(self._keys, self._max_rounds, self._encoder, self._truncate))
        )

    def expand(self, batches):
        met = {
            GIVEN: self._plans | "PlanPerRecordKey" >> beam.FlatMap(_released_plan),
            MAIN: batches | "KeyRecords" >> beam.Map(record_key),
        } | "MeetPlan" >> MeetGiven()
        if self._probability is not None:
            top = sampling.bernoulli_threshold(self._probability) - 1  # ranks below the threshold
            tables = self._build_tables(met | "RankAllRounds" >> beam.ParDo(
                _RankWindowDoFn(self._keys, self._max_rounds, top)))
            sizes = (
                tables
                | "UsersPerTable" >> beam.Map(sample_pass.table_users)
                | "UsersPerRound" >> beam.CombinePerKey(sum)
            )
            return {"tables": tables, "samples": sizes}
        candidates = met | "RankAllRounds" >> beam.ParDo(_RankWindowDoFn(self._keys, self._max_rounds))
        thresholds = (
            candidates
            | "RankAndUser" >> beam.Map(_rank_and_user)
            | "PerRound" >> beam.GroupByKey()
            | "BottomM" >> beam.ParDo(_WindowThresholdDoFn())
        )
        sampled = {GIVEN: thresholds, MAIN: candidates} | "MeetThresholds" >> MeetGiven()
        tables = self._build_tables(sampled | "KeepSampled" >> beam.ParDo(_KeepWindowSampledDoFn()))
        sizes = (
            thresholds
            | "UsersSampled" >> beam.FlatMap(_users_sampled)
        )
        return {"tables": tables, "samples": sizes}


class _EveryPrefix:
    """A frontier that holds every prefix: a round votes on all prefixes of its length, and
    ``chain_rounds`` keeps those that extend the previous round's frontier."""

    def __contains__(self, prefix) -> bool:
        return True


def _vote_table(keyed: Tuple[int, pa.Table], denied: FrozenSet[Units] = frozenset()
                ) -> Tuple[int, sampled_rounds.PartialVotes]:
    """One sample table of a window -> its private per-prefix votes and users
    (``sampled_rounds.vote_table``, the deny list applied as in the batch rounds) on every prefix
    of the round's length (no vote counters: without a frontier they would count votes that
    ``chain_rounds`` drops)."""
    round_index, table = keyed
    votes = sampled_rounds.vote_table(table, _EveryPrefix(), round_index, denied)
    return round_index, (votes.counts, votes.users)


class RunWindowRounds(beam.PTransform):
    """Rounds 1..L per window, each on every prefix of its length: ``(round, sample table)`` per
    window -> ``(round, (prefixes with at least theta votes, users))`` per window and round that
    had a sample (``chain_rounds`` makes them the rounds' results). ``denied``: the deny list's
    encoded sequences, never voted for (a user's choice among its other items does not depend on
    the frontier either, so voting on every prefix and chaining stays exact)."""

    def __init__(self, theta: int, denied: Collection[Units] = frozenset()):
        super().__init__()
        self._theta = theta
        self._denied = frozenset(denied)

    def expand(self, keyed_tables):
        return (
            keyed_tables
            | "Vote" >> beam.Map(_vote_table, denied=self._denied)
            | "PruneBelowTheta" >> beam.CombinePerKey(sampled_rounds.MergeAndPruneCombineFn(self._theta))
        )


def chain_rounds(plan: WindowPlan, kept: Dict[int, Tuple[List, int]], sampled: Dict[int, int]
                 ) -> List[Tuple[int, RoundResult]]:
    """A window's ``(round, RoundResult)`` from its rounds' prefixes with at least theta votes
    and users sampled: round ``r`` keeps the prefixes whose length-``r - 1`` prefix is on round
    ``r - 1``'s frontier (round 1's is the empty prefix; a round without result opens none)."""
    results: List[Tuple[int, RoundResult]] = []
    frontier = frozenset({()})
    for round_index in sorted(kept):
        if results and results[-1][0] != round_index - 1 or not results and round_index != 1:
            frontier = frozenset()
        prefixes, users = kept[round_index]
        extending = [p for p in prefixes if p[:round_index - 1] in frontier]
        sizes = {round_index: RoundSample(round_index, sampled[round_index], plan.users_required(round_index),
                                          plan.records)} if round_index in sampled else None
        results.append(sampled_rounds.round_result((extending, users), round_index, None, None, sizes,
                                                   f"round{round_index}."))
        frontier = sampled_rounds.frontier_after(results[-1][1])
    return results


def _tagged(tag: str):
    return lambda element: (0, (tag, element))


def _chained(met) -> Iterable[Tuple[WindowPlan, List[Tuple[int, RoundResult]]]]:
    _, plan, elements = met
    kept: Dict[int, Tuple[List, int]] = {}
    sampled: Dict[int, int] = {}
    for tag, (round_index, value) in elements:
        into = kept if tag == "kept" else sampled
        if round_index in into:
            raise ValueError(f"round {round_index} has two results in one window")
        into[round_index] = value
    if plan is None:
        raise ValueError("a window's rounds ran without its plan")
    yield plan, chain_rounds(plan, kept, sampled) if plan.released else []


class ChainWindowRounds(beam.PTransform):
    """A window's plan, its rounds' kept prefixes (``RunWindowRounds``) and users sampled
    (``SampleEachWindow``'s ``"samples"``) -> ``(plan, [(round, RoundResult)])``, once per window
    with a plan: the three meet in one grouping per window."""

    def __init__(self, kept, sampled):
        super().__init__()
        self._kept = kept
        self._sampled = sampled

    def expand(self, plans):
        main = (
            (self._kept | "TagKept" >> beam.Map(_tagged("kept")),
             self._sampled | "TagSampled" >> beam.Map(_tagged("sampled")))
            | "RoundsOfWindow" >> beam.Flatten()
        )
        return ({GIVEN: plans | "PlanOfWindow" >> beam.Map(lambda plan: (0, plan)), MAIN: main}
                | "MeetPlan" >> MeetGiven() | "Chain" >> beam.FlatMap(_chained))


def results_by_round(results: Iterable[Tuple[int, RoundResult]]) -> Dict[int, RoundResult]:
    """A window's ``(round, RoundResult)`` elements as a dict (a round appears at most once)."""
    by_round: Dict[int, RoundResult] = {}
    for round_index, result in results:
        if round_index in by_round:
            raise ValueError(f"round {round_index} has two results in one window")
        by_round[round_index] = result
    return by_round
