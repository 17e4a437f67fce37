"""The frequency estimates of a windowed discovery (``discover --window`` and ``triehh stream``,
docs/protocol.md §5): ``EstimateEachWindow`` is ``EstimateFrequencies`` once per event-time
window, in the same graph as the window's rounds, with the window's leaves and ``WindowPlan`` as
per-window side inputs and keys derived from the window's ``Sampler`` and its release's nonce, so
a retried or resumed window releases the same numbers and two windows draw independently. Each
window's exact counts go straight into its release; the graph never carries the seed."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from triehh_beam.beam import estimates
from triehh_beam.beam.windows import window_view
from triehh_beam.protocol import sampling
from triehh_beam.protocol.encoding import ItemEncoder
from triehh_beam.protocol.frequency_estimates import EstimateKeys, EstimateTargets, FrequencyEstimates, release

__all__ = ["DEFAULT_WINDOW_SHARDS", "EstimateEachWindow", "window_estimate_keys"]

#: Groups each window's users are split into (a window is one discovery's worth of records).
DEFAULT_WINDOW_SHARDS = 16
_NO_LEAVES = EstimateTargets(())


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


@beam.typehints.with_input_types(pa.RecordBatch, targets=EstimateTargets, plan=Any)
@beam.typehints.with_output_types(Tuple[int, pa.RecordBatch])
class _MatchWindowTargetsDoFn(estimates.MatchTargetsDoFn):
    """``MatchTargetsDoFn`` with the window's leaves and keys (nothing for a window without
    leaves). Side inputs are given positionally: Beam 2.77 passes a keyword side input twice
    beside a ``WindowParam``."""

    def __init__(self, window_keys: sampling.WindowKeys, encoder: ItemEncoder, truncate: bool, shards: int):
        super().__init__(None, encoder, truncate, shards)
        self._window_keys = _KeysCache(window_keys)

    def process(self, batch, targets, plan):
        if len(targets) == 0:
            return
        self._keys = self._window_keys(plan)
        yield from super().process(batch, targets)


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


def _one(_) -> int:
    return 1


@beam.typehints.with_input_types(int, targets=Any, counts=Any, plan=Any)
@beam.typehints.with_output_types(FrequencyEstimates)
class _ReleaseWindowDoFn(beam.DoFn):
    """Once per window with records: its leaves and its added counts -> its released estimates
    (nothing for a window without leaves): the noise added once, with the window's keys. Every
    leaf is released, held by anyone or not (no counts: all 0)."""

    def __init__(self, window_keys: sampling.WindowKeys, epsilon: float):
        self._keys = _KeysCache(window_keys)
        self._epsilon = epsilon

    def process(self, _, targets, counts, plan):
        if len(targets) == 0:
            return
        if len(counts) > 1:
            raise ValueError(f"a window has {len(counts)} sums of counts")
        exact = counts[0] if counts else np.zeros(len(targets), dtype=np.int64)
        if len(exact) != len(targets):
            raise ValueError(f"{len(exact)} counts for {len(targets)} leaves")
        yield release(exact.tolist(), targets, self._epsilon, self._keys(plan))


class EstimateEachWindow(beam.PTransform):
    """A windowed job's record batches -> one ``FrequencyEstimates`` per window with leaves.

    Args:
      window_keys: ``Sampler.window_keys()`` (derived; the graph never carries the seed).
      epsilon: epsilon_est, what each window's estimates spend.
      leaves: a PCollection of at most one ``EstimateTargets`` per window: the window's discovered
        leaves (a window without one estimates nothing).
      plans: the per-window ``WindowPlan`` PCollection: its ``nonce`` names the window's keys.
      encoder, truncate: as ``EstimateFrequencies``.
      shards: groups each window's users are split into, 1 to 2048.

    Input: ``pa.RecordBatch`` (user_id binary, item, count; zero counts dropped) in the windows
    the rounds ran in: the records the window's discovery read.
    Output: ``FrequencyEstimates``, one per window that has records and non-empty leaves.
    """

    def __init__(self, window_keys: sampling.WindowKeys, epsilon: float, leaves, plans,
                 encoder: ItemEncoder, truncate: bool = False, shards: int = DEFAULT_WINDOW_SHARDS):
        super().__init__()
        self._epsilon = estimates.check_estimate_args(epsilon, shards)
        self._window_keys = window_keys
        self._leaves = leaves
        self._plans = plans
        self._encoder = encoder
        self._truncate = truncate
        self._shards = shards

    def _view(self):
        return window_view(beam.pvalue.AsSingleton(self._leaves, default_value=_NO_LEAVES))

    def _plan(self):
        return window_view(beam.pvalue.AsSingleton(self._plans))

    def expand(self, batches):
        counts = (
            batches
            | "MatchLeaves" >> beam.ParDo(
                _MatchWindowTargetsDoFn(self._window_keys, self._encoder, self._truncate, self._shards),
                self._view(), self._plan())
            | "GroupPerShard" >> beam.GroupByKey()
            | "CountChoices" >> beam.ParDo(estimates.CountChoicesDoFn(), targets=self._view())
            | "AddShards" >> beam.CombineGlobally(_AddCountsFn()).without_defaults()
        )
        # The release runs once per window with records, the leaves a side input there too:
        # Beam 2.77's FnApiRunner may store a PCollection read both as a side input and as
        # another stage's main input only after that stage ran (the side input read empty).
        windows = (
            batches
            | "OnePerBatch" >> beam.Map(_one)
            | "WindowsWithRecords" >> beam.CombineGlobally(sum).without_defaults()
        )
        return windows | "ReleaseEstimates" >> beam.ParDo(
            _ReleaseWindowDoFn(self._window_keys, self._epsilon), self._view(),
            window_view(beam.pvalue.AsList(counts)), self._plan())
