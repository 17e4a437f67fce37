"""The frequency estimates of a windowed discovery (``discover --window`` and ``triehh stream``,
docs/protocol.md §5): ``EstimateEachWindow`` is ``EstimateFrequencies`` once per event-time
window, in the same graph as the window's rounds, with the window's leaves and ``WindowPlan``
meeting its records and counts by key (never as side inputs) and keys derived from the window's
``Sampler`` and its release's nonce, so a retried or resumed window releases the same numbers and two windows draw independently. Each
window's exact counts go straight into its release; the graph never carries the seed."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from triehh_beam.beam.releases import estimates
from triehh_beam.beam.windows.window_join import GIVEN, MAIN, RECORD_KEYS, MeetGiven, fan_out, record_key
from triehh_beam.protocol.estimates.frequency_estimates import EstimateKeys, release
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness import sampling

__all__ = ["DEFAULT_WINDOW_SHARDS", "EstimateEachWindow", "window_estimate_keys"]

#: Groups each window's users are split into (a window is one discovery's worth of records).
DEFAULT_WINDOW_SHARDS = 16


def window_estimate_keys(window_keys: sampling.WindowKeys, start_micros: int, nonce: bytes) -> EstimateKeys:
    """The estimate keys of the release (``nonce``) of the window that starts at
    ``start_micros``: derived from the seed and identity of the window's ``Sampler``, as a batch
    job's are from its own."""
    sampler = window_keys.sampler(start_micros, nonce)
    return EstimateKeys.derive(sampler.seed, sampler.identity)


class _KeysCache:
    """Per-window estimate keys, derived once per worker and window release."""

    def __init__(self, window_keys: sampling.WindowKeys):
        self._window_keys = window_keys
        self._cache: Dict[Tuple[int, bytes], EstimateKeys] = {}

    def __call__(self, plan) -> EstimateKeys:
        keys = self._cache.get((plan.start, plan.nonce))
        if keys is None:
            if len(self._cache) > 64:
                self._cache.clear()
            keys = self._cache[(plan.start, plan.nonce)] = window_estimate_keys(self._window_keys, plan.start,
                                                                                 plan.nonce)
        return keys


@beam.typehints.with_input_types(Any)
@beam.typehints.with_output_types(Tuple[int, pa.RecordBatch])
class _MatchWindowTargetsDoFn(estimates.MatchTargetsDoFn):
    """``MatchTargetsDoFn`` on the record batches of one key of a window, with the window's
    leaves and keys -> ``(shard, rows)``."""

    def __init__(self, window_keys: sampling.WindowKeys, encoder: ItemEncoder, truncate: bool, shards: int):
        super().__init__(None, encoder, truncate, shards)
        self._window_keys = _KeysCache(window_keys)

    def process(self, met):
        _, given, batches = met
        if given is None:
            return
        plan, targets = given
        self._keys = self._window_keys(plan)
        for batch in batches:
            yield from super().process(batch, targets)


@beam.typehints.with_input_types(Any)
@beam.typehints.with_output_types(np.ndarray)
class _CountWindowChoicesDoFn(estimates.CountChoicesDoFn):
    """``CountChoicesDoFn`` on one shard's rows of a window, with the window's leaves."""

    def process(self, met):
        shard, targets, batches = met
        batches = list(batches)
        if targets is not None and batches:
            yield from super().process((shard, batches), targets)


@beam.typehints.with_input_types(np.ndarray)
@beam.typehints.with_output_types(np.ndarray)
class _AddCountsFn(beam.CombineFn):
    """A window's shards' exact counts, added up (private: they go only to the release)."""

    def create_accumulator(self) -> Optional[np.ndarray]:
        return None

    def add_input(self, accumulator, counts):
        return estimates.add_counts((accumulator, counts))

    def merge_accumulators(self, accumulators):
        return estimates.add_counts(accumulators)

    def extract_output(self, accumulator):
        return accumulator


class _ReleaseWindowDoFn(beam.DoFn):
    """A window with leaves: its leaves and its added counts -> its released estimates: the
    noise added once, with the window's keys. Every leaf is released, held by anyone or not
    (no counts: all 0)."""

    def __init__(self, window_keys: sampling.WindowKeys, epsilon: float):
        self._keys = _KeysCache(window_keys)
        self._epsilon = epsilon

    def process(self, met):
        _, given, counts = met
        counts = list(counts)
        if given is None:
            raise ValueError("a window's estimate counts have no leaves")
        plan, targets = given
        if len(counts) > 1:
            raise ValueError(f"a window has {len(counts)} sums of counts")
        exact = counts[0] if counts else np.zeros(len(targets), dtype=np.int64)
        if len(exact) != len(targets):
            raise ValueError(f"{len(exact)} counts for {len(targets)} leaves")
        yield release(exact.tolist(), targets, self._epsilon, self._keys(plan))


def _with_leaves(given, keys: int):
    """A window's ``(plan, leaves)`` for each of ``keys`` keys; nothing without leaves."""
    if len(given[1]):
        yield from fan_out(given, range(keys))


def _leaves_per_shard(given, shards: int):
    if len(given[1]):
        yield from fan_out(given[1], range(shards))


def _counts_of_window(counts):
    return 0, counts


class EstimateEachWindow(beam.PTransform):
    """A windowed job's record batches -> one ``FrequencyEstimates`` per window with leaves.

    Args:
      window_keys: ``Sampler.window_keys()`` (derived; the graph never carries the seed).
      epsilon: epsilon_est, what each window's estimates spend.
      given: a PCollection of one ``(WindowPlan, EstimateTargets)`` per window: its plan (whose
        ``nonce`` names the window's keys) and its discovered leaves (a window without leaves
        estimates nothing). They meet the window's records and counts by key
        (``window_join.MeetGiven``), never as a side input.
      encoder, truncate: as ``EstimateFrequencies``.
      shards: groups each window's users are split into, 1 to 2048.

    Input: ``pa.RecordBatch`` (user_id binary, item, count; zero counts dropped) in the windows
    the rounds ran in: the records the window's discovery read.
    Output: ``FrequencyEstimates``, one per window with non-empty leaves.
    """

    def __init__(self, window_keys: sampling.WindowKeys, epsilon: float, given,
                 encoder: ItemEncoder, truncate: bool = False, shards: int = DEFAULT_WINDOW_SHARDS):
        super().__init__()
        self._epsilon = estimates.check_estimate_args(epsilon, shards)
        self._window_keys = window_keys
        self._given = given
        self._encoder = encoder
        self._truncate = truncate
        self._shards = shards

    def expand(self, batches):
        given = self._given
        matched = {
            GIVEN: given | "LeavesPerRecordKey" >> beam.FlatMap(_with_leaves, keys=RECORD_KEYS),
            MAIN: batches | "KeyRecords" >> beam.Map(record_key),
        } | "MeetLeaves" >> MeetGiven() | "MatchLeaves" >> beam.ParDo(
            _MatchWindowTargetsDoFn(self._window_keys, self._encoder, self._truncate, self._shards))
        counts = (
            {GIVEN: given | "LeavesPerShard" >> beam.FlatMap(_leaves_per_shard, shards=self._shards), MAIN: matched}
            | "GroupPerShard" >> MeetGiven()
            | "CountChoices" >> beam.ParDo(_CountWindowChoicesDoFn())
            | "AddShards" >> beam.CombineGlobally(_AddCountsFn()).without_defaults()
        )
        return ({GIVEN: given | "LeavesOfWindow" >> beam.FlatMap(_with_leaves, keys=1),
                 MAIN: counts | "CountsOfWindow" >> beam.Map(_counts_of_window)}
                | "MeetCounts" >> MeetGiven()
                | "ReleaseEstimates" >> beam.ParDo(_ReleaseWindowDoFn(self._window_keys, self._epsilon)))
