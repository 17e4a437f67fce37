"""What an evaluation needs to run whole-item sample-and-threshold (``--protocol sample-threshold``)
beside TrieHH, TrieHH++ and PEM: its plans (``protocol.whole_items.plan_whole_items`` at each
ε with the evaluation's δ, accounted exactly as discover's default; an infeasible plan is
listed with its reason), its runs on
either engine (the keyed simulation ``evaluation.whole_items``, or ``discover --protocol
sample-threshold`` on the pipeline: the same draws for the same seed and job identity), its
privacy block, its per-item release probability ``P(Binomial(f, p_s) >= tau)`` (exact for one
item per user) and how its estimates ``count / p_s`` compare with the true holders.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from triehh_beam.evaluation.run_keys import evaluation_release
from triehh_beam.protocol import privacy
from triehh_beam.protocol.sample_threshold_planner import SampleThresholdPlan
from triehh_beam.protocol.whole_items import plan_whole_items, release_probability

__all__ = ["PROTOCOL", "WholeItemRun", "bound_for", "estimate_rows", "pipeline_runs", "plans", "privacy_block",
           "simulate_runs"]

PROTOCOL = "sample-threshold"


@dataclasses.dataclass(frozen=True)
class WholeItemRun:
    """One release: its items (sorted), their counts, its time and the users it sampled from."""

    heavy_hitters: Tuple[str, ...]
    counts: Mapping[str, int]
    seconds: float
    population: int


def plans(epsilons: Sequence[float], delta: float, max_length: int) -> Tuple[List[Tuple[float, SampleThresholdPlan]],
                                                                          List[dict]]:
    """(feasible (ε, plan) pairs, the infeasible ones as ``experiment``'s ``infeasible`` entries)."""
    feasible, infeasible = [], []
    for epsilon in epsilons:
        plan = plan_whole_items(epsilon, delta)
        if plan.feasible:
            feasible.append((epsilon, plan))
        else:
            infeasible.append({"protocol": PROTOCOL, "epsilon": epsilon, "unit_size": 1, "max_length": max_length,
                               "reason": plan.reason})
    return feasible, infeasible


def bound_for(plan: SampleThresholdPlan) -> Callable[[int, int], float]:
    """``(holders, length) -> P(Binomial(holders, p_s) >= tau)`` (the length does not matter)."""
    return lambda users, length: release_probability(users, plan.sampling_probability, plan.tau)


def privacy_block(plan: SampleThresholdPlan, runs: int) -> dict:
    """The ``privacy`` of a whole-item configuration in ``evaluation.json``."""
    total = privacy.compose([(plan.epsilon, plan.delta)] * runs)
    return {
        "model": "central",
        "guarantee": "(epsilon, delta)-DP with user-level adjacency (sample-and-threshold, one release)",
        # How delta was certified: "exact" (the default, as discover's) or "bound".
        "accounting": plan.accounting,
        "epsilon": plan.epsilon,
        "delta": plan.delta,
        "target_epsilon": plan.target_epsilon,
        "target_delta": plan.target_delta,
        "alpha": plan.alpha,
        "tau": plan.tau,
        "sampling_probability": plan.sampling_probability,
        "all_runs_composed": {"epsilon": total.epsilon, "delta": total.delta,
                              "note": "R runs on the same users are R releases (basic composition): evaluate on "
                                      "data whose privacy is not at stake"},
    }


def discovery_config(config, epsilon: float, seed: bytes, out: str):
    """The ``DiscoveryConfig`` of one pipeline-engine run (its identity keys the run's draws)."""
    from triehh_beam.job.driver import DiscoveryConfig

    return DiscoveryConfig(
        input_pattern=config.input_pattern, output_dir=out, epsilon=epsilon, delta=config.delta,
        max_length=config.max_length, input_format=config.input_format, seed=seed, case_fold=config.case_fold,
        user_column=config.user_column, item_column=config.item_column, count_column=config.count_column or "",
        protocol=PROTOCOL)


def run_output(work_dir: str, epsilon: float, index: int) -> str:
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.join(work_dir, f"st-eps{epsilon:g}-run{index}")


def simulate_runs(config, users, plan: SampleThresholdPlan, epsilon: float, seeds: Sequence[bytes],
                  on_run: Callable[[int], None]) -> List[WholeItemRun]:
    """The keyed simulation's releases, one per seed; keyed as the pipeline engine's run in the
    same ``config.work_dir`` when one is given (the job identity includes its output)."""
    from triehh_beam.reference.whole_items import simulate_many_whole_items

    encoder = config.encoder(1)
    runs = []
    for index, seed in enumerate(seeds):
        identity = b"" if config.work_dir is None else evaluation_release(seed, discovery_config(
            config, epsilon, seed, run_output(config.work_dir, epsilon, index)).sampling_identity()).keyed_identity
        started = time.monotonic()
        [result] = simulate_many_whole_items(users, encoder, plan.sampling_probability, plan.tau, [seed], identity)
        runs.append(WholeItemRun(tuple(sorted(result.items)), dict(result.items), time.monotonic() - started,
                                 result.n_users))
        on_run(index)
    return runs


def pipeline_runs(config, epsilon: float, seeds: Sequence[bytes], work_dir: str, options,
                  on_run: Callable[[int], None]) -> List[WholeItemRun]:
    """One ``discover --protocol sample-threshold`` per seed, each in its own output."""
    import json

    from apache_beam.io.filesystems import FileSystems

    from triehh_beam.job.driver import run_discovery

    runs = []
    for index, seed in enumerate(seeds):
        out = run_output(work_dir, epsilon, index)
        started = time.monotonic()
        discovery = discovery_config(config, epsilon, seed, out)
        result = run_discovery(discovery, options, release=evaluation_release(seed, discovery.sampling_identity()))
        seconds = time.monotonic() - started
        with FileSystems.open(result.output_path, compression_type="uncompressed") as f:
            released = json.loads(f.read())["released"]
        counts = {entry["item"]: entry["count"] for entry in released}
        runs.append(WholeItemRun(tuple(sorted(counts)), counts, seconds, result.plan.population))
        FileSystems.delete([out])
        on_run(index)
    return runs


def estimate_rows(runs: Sequence[WholeItemRun], ranking: Sequence[Tuple[str, int]], plan: SampleThresholdPlan,
                  top: int) -> List[dict]:
    """The true top ``top`` items: holders, release rate, and the mean of ``count / p_s`` over the
    runs that released the item with its relative error (biased upward near tau: conditioned
    on release)."""
    rows = []
    for rank, (item, users) in enumerate(ranking[:top], start=1):
        values = [run.counts[item] / plan.sampling_probability for run in runs if item in run.counts]
        mean: Optional[float] = sum(values) / len(values) if values else None
        rows.append({"item": item, "rank": rank, "users": users, "release_rate": len(values) / len(runs),
                     "estimate_mean": mean,
                     "relative_error": None if mean is None else (mean - users) / users,
                     "rmse": None if not values else math.sqrt(sum((v - users) ** 2 for v in values) / len(values))})
    return rows


def configuration(config, epsilon: float, plan: SampleThresholdPlan, runs: Sequence[WholeItemRun], seeds,
                  ranking, metric_block: Dict, item_rows: List[dict], reachable: List[dict]) -> dict:
    """A whole-item configuration of ``evaluation.json`` (``experiment`` computes the shared parts)."""
    return {
        "protocol": PROTOCOL,
        "epsilon": epsilon,
        "unit_size": 1,
        "max_length": config.max_length,
        "privacy": privacy_block(plan, config.runs),
        "metrics": metric_block,
        "reachable": reachable,
        "items": item_rows,
        "estimates": estimate_rows(runs, ranking, plan, max(max(config.top_k), 20)),
        "runs": [{"run": j, "seed": seeds[j].hex(), "released": dict(sorted(run.counts.items())),
                  "seconds": round(run.seconds, 3)} for j, run in enumerate(runs)],
    }
