"""What ``evaluation.json`` says of one configuration's runs against the truth: recall@K, F1@K and
NCR@K with t-intervals (``metric_block``), each item's discovery rate with a Wilson interval beside
its bound (``item_rows``), the trie's growth per round, the best recall any run could reach with
the items that fit (``reachable``) and, for whole-item releases, how ``count / p_s`` compares
with the true holders (``estimate_rows``)."""

from __future__ import annotations

import collections
import math
from typing import Callable, Iterable, List, Mapping, Optional, Sequence, Tuple

from triehh_beam.protocol.items.encoding import EncodingError, ItemEncoder
from triehh_beam.reference import metrics
from triehh_beam.reference.stats import mean_ci, wilson_interval

__all__ = ["encoded_length", "estimate_rows", "growth", "item_rows", "metric_block", "ranking", "reachable"]


def metric_block(found_per_run: Sequence[Iterable], truth: Mapping, ks: Sequence[int], confidence: float
                 ) -> List[dict]:
    """Per K: recall, F1 and NCR of each run's items, their mean and t-interval."""
    blocks = []
    for k in ks:
        recall = [metrics.recall_at_k(found, truth, k) for found in found_per_run]
        f1 = [metrics.f1_at_k(found, truth, k) for found in found_per_run]
        ncr = [metrics.ncr_at_k(found, truth, k) for found in found_per_run]
        blocks.append({
            "k": int(k),
            "effective_k": metrics.true_top_k(truth, k).k,
            "recall": dict(mean_ci(recall, confidence), values=recall),
            "f1": dict(mean_ci(f1, confidence), values=f1),
            "ncr": dict(mean_ci(ncr, confidence), values=ncr),
        })
    return blocks


def encoded_length(item: str, encoder: ItemEncoder) -> Optional[int]:
    """The item's length in units with the terminator, or None when it cannot be encoded (too
    long, or not text the encoder takes)."""
    try:
        return len(encoder.encode(item))
    except EncodingError:  # ItemTooLongError included
        return None


def ranking(truth: Mapping[str, int]) -> List[Tuple[str, int]]:
    """(item, holders), most held first, ties by item."""
    return sorted(truth.items(), key=lambda kv: (-kv[1], kv[0]))


def item_rows(runs: Sequence, ranking_: Sequence[Tuple[str, int]], n: int, threshold: int, encoder: ItemEncoder,
              ks: Sequence[int], confidence: float, bound_of: Callable[[int, int], float]) -> List[dict]:
    """Per item: its holders, its discovery rate over the runs (Wilson interval) and
    ``bound_of(holders, length)``, ``length`` its encoded length with the terminator (bound 0 if
    it does not fit). Items with fewer holders than ``threshold``, never found and ranked below
    the largest K are left out (their bound is 0). The bound is exact for one item per user
    sharing no prefix, a lower bound with shared prefixes, and no bound with several items per
    user (a holder may vote for another of its items)."""
    found = collections.Counter()
    for run in runs:
        found.update(set(run.heavy_hitters))
    max_k = max(ks)
    rows = []
    for rank, (item, users) in enumerate(ranking_, start=1):
        if users < threshold and item not in found and rank > max_k:
            continue
        length = encoded_length(item, encoder)
        lo, hi = wilson_interval(found[item], len(runs), confidence)
        rows.append({
            "item": item,
            "rank": rank,
            "users": users,
            "share": users / n,
            "length": length,
            "rate": found[item] / len(runs),
            "rate_ci": [lo, hi],
            "bound": 0.0 if length is None else bound_of(users, length),
        })
    return rows


def growth(runs: Sequence, max_rounds: int, confidence: float) -> List[dict]:
    """Per round: the prefixes kept (a stopped run counts 0), mean and t-interval."""
    rows = []
    for r in range(max_rounds):
        sizes = [run.level_sizes[r] if r < len(run.level_sizes) else 0 for run in runs]
        rows.append(dict(mean_ci(sizes, confidence, bounds=(0.0, math.inf)), round=r + 1, values=sizes))
    return rows


def reachable(ranking_: Sequence[Tuple[str, int]], encoder: ItemEncoder, truth: Mapping[str, int],
              ks: Sequence[int]) -> List[dict]:
    """recall@K of the exact top-K among the items that fit: the best any run can do."""
    fitting = [item for item, _ in ranking_ if encoded_length(item, encoder) is not None]
    return [{"k": int(k), "recall": metrics.recall_at_k(fitting[: metrics.true_top_k(truth, k).k], truth, k)}
            for k in ks]


def estimate_rows(runs: Sequence, ranking_: Sequence[Tuple[str, int]], sampling_probability: float,
                  top: int) -> List[dict]:
    """The true top ``top`` items of a whole-item release: holders, release rate, and the mean of
    ``count / p_s`` over the runs that released the item with its relative error (biased upward
    near tau: conditioned on release)."""
    rows = []
    for rank, (item, users) in enumerate(ranking_[:top], start=1):
        values = [run.counts[item] / sampling_probability for run in runs if item in run.counts]
        mean: Optional[float] = sum(values) / len(values) if values else None
        rows.append({"item": item, "rank": rank, "users": users, "release_rate": len(values) / len(runs),
                     "estimate_mean": mean,
                     "relative_error": None if mean is None else (mean - users) / users,
                     "rmse": None if not values else math.sqrt(sum((v - users) ** 2 for v in values) / len(values))})
    return rows
