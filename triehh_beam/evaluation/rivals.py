"""The rivals TrieHH is evaluated against, on the same input and truth: the exact, non-private
top-K (the ceiling), PEM (ε-LDP, ``reference.pem``) at each ε and K, and PipelineDP's central
partition selection at each (ε, δ) (``reference.pipelinedp_rival``) with the product's own
``--protocol partition-selection`` beside it on the same rows and budget, each as its block of
``evaluation.json``'s ``rivals``."""

from __future__ import annotations

import collections
import hashlib
import math
import time
from typing import Dict, List, Mapping, Sequence, Tuple

from triehh_beam.evaluation.config import EvaluationConfig
from triehh_beam.evaluation.measures import metric_block
from triehh_beam.protocol.items.encoding import EncodingError, ItemEncoder
from triehh_beam.reference import metrics, pem, pipelinedp_rival
from triehh_beam.reference.stats import mean_ci

__all__ = ["exact_rival", "pem_rival", "pipelinedp_rival_block"]


def _pem_seed(seed: int, epsilon: float, k: int, run: int) -> int:
    digest = hashlib.blake2b(f"triehh-beam/evaluate/pem/{seed}/{epsilon!r}/{k}/{run}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def exact_rival(ranking: Sequence[Tuple[str, int]], truth: Mapping[str, int], ks: Sequence[int],
                confidence: float) -> dict:
    """The exact top-K at each K: no privacy, the ceiling."""
    blocks = []
    for k in ks:
        top = [item for item, _ in ranking[: metrics.true_top_k(truth, k).k]]
        blocks.append(dict(metric_block([top], truth, [k], confidence)[0], heavy_hitters=top))
    return {"privacy": {"model": "none", "guarantee": "none: the exact, non-private top-K (the ceiling)"},
            "metrics": blocks}


def pem_rival(config: EvaluationConfig, users_items: Mapping[bytes, Mapping[str, int]], encoder: ItemEncoder,
              truth: Mapping[str, int], advance) -> dict:
    """PEM's runs at each ε and K over items of up to ``config.max_characters`` bytes;
    ``advance(label)`` after each run."""
    # PEM sees the same normalised items as the truth (NFC, case folding).
    users: Dict[bytes, collections.Counter] = {}
    for user, items in users_items.items():
        normalised = collections.Counter()
        for item, count in items.items():
            try:
                normalised[encoder.normalize(item)] += count
            except EncodingError:
                continue
        users[user] = normalised
    n_bytes = config.max_characters
    by_epsilon = []
    for epsilon in config.epsilons:
        per_k = []
        for k in config.top_k:
            pem_config = pem.PEMConfig(epsilon=epsilon, k=int(k), n_bytes=n_bytes, eta=config.pem_eta,
                                       candidates=config.pem_candidate_factor * int(k))
            runs = []
            for j in range(config.runs):
                started = time.monotonic()
                result = pem.run_pem(users, pem_config, _pem_seed(config.seed, epsilon, k, j))
                runs.append({"run": j, "heavy_hitters": list(result.heavy_hitters),
                             "seconds": round(time.monotonic() - started, 3)})
                advance(f"PEM eps={epsilon:g} k={k} run {j + 1}/{config.runs}")
            block = metric_block([r["heavy_hitters"] for r in runs], truth, [k], config.confidence)[0]
            per_k.append(dict(block, parameters=pem_config.to_dict(), runs=runs))
        by_epsilon.append({
            "epsilon": epsilon,
            "privacy": {"model": "local", "guarantee": "epsilon-LDP per user (one OLH report each)",
                        "epsilon": epsilon, "delta": 0.0},
            "metrics": per_k,
        })
    return {"n_bytes": n_bytes, "configurations": by_epsilon}


def _ours_on_the_same_rows(users, epsilon: float, delta: float, seeds: Sequence[bytes]) -> List[Tuple[str, ...]]:
    """``--protocol partition-selection``'s release (k = 1, the whole ε on the selection: the
    budget PipelineDP's selection spends) on each run's rows, PipelineDP's own (one item per
    user, ``one_item_per_user``), its coins keyed from the run's seed: the product's keyed
    counter (``PartitionCounter``), as its pipeline runs it. Sorted items per run."""
    from triehh_beam.protocol.central.partition_release import PartitionCounter, SelectionKeys
    from triehh_beam.protocol.central.partition_selection import PartitionSelectionPlan

    plan = PartitionSelectionPlan(epsilon, delta, 1, 1.0)
    released = []
    for seed in seeds:
        counts: Dict[Tuple[str, ...], int] = collections.Counter(
            (item,) for _, item in pipelinedp_rival.one_item_per_user(users, seed))
        keys = SelectionKeys.derive(hashlib.blake2b(seed, digest_size=32).digest(), b"evaluate/partition-selection")
        released.append(tuple(sorted(item for (item,), _ in PartitionCounter(plan, keys).extract_released(counts))))
    return released


def pipelinedp_rival_block(config: EvaluationConfig, users_items, encoder: ItemEncoder, truth: Mapping[str, int],
                           seeds: Sequence[bytes], advance) -> dict:
    """PipelineDP's partition selection at each ε and the evaluation's δ, run ``j`` drawing each
    user's item with TrieHH's run seed ``j``, and beside it (``partition_selection``) the
    product's ``--protocol partition-selection`` on the same rows at the same budget;
    ``advance(label)`` after each PipelineDP run."""
    # The same normalised items as the truth, whatever their length: central partition
    # selection has no item limit.
    users = pipelinedp_rival.normalised_users(users_items, encoder)
    by_epsilon: List[dict] = []
    for epsilon in config.epsilons:
        def on_run(index: int, epsilon=epsilon) -> None:
            advance(f"PipelineDP eps={epsilon:g} run {index + 1}/{config.runs}")

        runs = pipelinedp_rival.run(users, epsilon, config.delta, seeds, on_run)
        released = [len(run.heavy_hitters) for run in runs]
        started = time.monotonic()
        ours = _ours_on_the_same_rows(users, epsilon, config.delta, seeds)
        ours_seconds = time.monotonic() - started
        by_epsilon.append({
            "epsilon": epsilon,
            "delta": config.delta,
            "privacy": pipelinedp_rival.privacy_block(epsilon, config.delta, config.runs),
            "released": dict(mean_ci(released, config.confidence, bounds=(0.0, math.inf)), values=released),
            "metrics": metric_block([run.heavy_hitters for run in runs], truth, config.top_k, config.confidence),
            "runs": [{"run": j, "seed": seeds[j].hex(), "contributors": run.contributors,
                      "heavy_hitters": list(run.heavy_hitters), "seconds": round(run.seconds, 3)}
                     for j, run in enumerate(runs)],
            "partition_selection": {
                "note": "triehh-beam's --protocol partition-selection (k = 1, --selection-share 1: the same budget) "
                        "on the same rows, its keyed coins from the run's seed; the same optimal keep probability, "
                        "so the same number of items in expectation",
                "released": dict(mean_ci([len(r) for r in ours], config.confidence, bounds=(0.0, math.inf)),
                                 values=[len(r) for r in ours]),
                "metrics": metric_block(ours, truth, config.top_k, config.confidence),
                "seconds": round(ours_seconds, 3),
                "heavy_hitters": [list(r) for r in ours],
            },
        })
    return {
        "library": pipelinedp_rival.library_version(),
        "backend": "LocalBackend",
        "strategy": pipelinedp_rival.STRATEGY,
        "contribution": "one item per user, drawn by local frequency with the run's keyed uniform "
                        "(the draw of TrieHH's vote); max_partitions_contributed = 1",
        "configurations": by_epsilon,
    }
