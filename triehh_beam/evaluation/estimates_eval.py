"""Frequency estimates measured (docs/evaluation.md, "Frequency estimates"): on an in-memory
population, R keyed runs of TrieHH at epsilon followed by the estimate step at epsilon_est
(``simulate_estimates``, the pipeline's oracle, and a columnar copy of it for speed), against
the truth (the weighted users of each discovered item: its holders when each user holds one)
with the coverage of the published intervals and of the noise's alone, and beside a PipelineDP-style central top-K
(``central_top_k``) at the same total epsilon. ``python -m triehh_beam.evaluation.estimates_eval``
prints the tables of docs/evaluation.md. Every run is a full release (an evaluation, not a
release: use public or synthetic data).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from triehh_beam.protocol.estimates.frequency_estimates import (EstimateKeys, EstimateTargets,
                                                                FrequencyEstimates, count_choices,
                                                                reference_estimates, release)
from triehh_beam.protocol.items.encoding import EncodingError, ItemEncoder, ItemTooLongError, Units
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol.randomness.sampling import UserId
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.central_top_k import central_top_k
from triehh_beam.reference.metrics import UserItems, ground_truth, recall_at_k, user_records
from triehh_beam.reference.simulation import sampler_for_seed, simulate_many

__all__ = ["EncodedPopulation", "compare", "encode_population", "estimate", "main", "simulate_estimates"]


def _encoded_rows(counts: Mapping, encoder: ItemEncoder, truncate: bool) -> Dict[Units, int]:
    rows: Dict[Units, int] = {}
    for item, count in counts.items():
        try:
            sequence = encoder.encode_truncated(item) if truncate else encoder.encode(item)
        except (ItemTooLongError, EncodingError):
            continue
        rows[sequence] = rows.get(sequence, 0) + int(count)
    return rows


def simulate_estimates(users: Mapping[UserId, UserItems], encoder: ItemEncoder, trie: Trie, seed, epsilon: float,
                       identity: bytes = b"", too_long: str = "drop") -> FrequencyEstimates:
    """The estimates the pipeline releases for ``trie`` on ``users`` with this seed and identity
    (``reference_estimates``, one ``user_choice`` per user; items encoded as the simulation and
    the pipeline encode them: too long ones dropped, or cut with ``too_long="truncate"``)."""
    sampler = sampler_for_seed(seed, identity)
    keys = EstimateKeys.derive(sampler.seed, sampler.identity)
    truncate = too_long == "truncate"
    weighted = {user: list(_encoded_rows(counts, encoder, truncate).items())
                for user, counts in user_records(users).items()}
    return reference_estimates(weighted, EstimateTargets.from_trie(trie), epsilon, keys)


@dataclasses.dataclass(frozen=True)
class EncodedPopulation:
    """A population encoded once for many runs: users (canonical ids, sorted) in CSR rows of
    (sequence, local count), and the users' ids packed for the keyed hash."""

    sequences: Tuple[Units, ...]
    offsets: np.ndarray
    codes: np.ndarray
    counts: np.ndarray
    id_data: np.ndarray
    id_offsets: np.ndarray


def encode_population(users: Mapping[UserId, UserItems], encoder: ItemEncoder, truncate: bool = False
                      ) -> EncodedPopulation:
    records = user_records(users)
    ids = sorted(records)
    index: Dict[Units, int] = {}
    offsets, codes, counts = [0], [], []
    for user in ids:
        for sequence, count in sorted(_encoded_rows(records[user], encoder, truncate).items()):
            codes.append(index.setdefault(sequence, len(index)))
            counts.append(count)
        offsets.append(len(codes))
    data, id_offsets = keyed_hash.pack_messages(ids)
    return EncodedPopulation(tuple(index), np.array(offsets, dtype=np.int64), np.array(codes, dtype=np.int64),
                             np.array(counts, dtype=np.int64), data, id_offsets)


def _leaf_rows(population: EncodedPopulation, targets: EstimateTargets) -> Tuple[np.ndarray, np.ndarray]:
    """Per row, its leaf (-1: none); and the rows' users."""
    leaf_of = np.array([targets.index_of(s) for s in population.sequences], dtype=np.int64)
    users = np.repeat(np.arange(len(population.offsets) - 1), np.diff(population.offsets))
    return leaf_of[population.codes], users


def estimate(population: EncodedPopulation, targets: EstimateTargets, keys: EstimateKeys,
             epsilon: float) -> FrequencyEstimates:
    """``simulate_estimates``, columnar (``count_choices``): the same numbers, for large runs."""
    leaf, users = _leaf_rows(population, targets)
    keep = leaf >= 0
    offsets = np.zeros(len(population.offsets), dtype=np.int64)
    np.cumsum(np.bincount(users[keep], minlength=len(offsets) - 1), out=offsets[1:])
    uniforms = EstimateKeys.uniforms(keys.user_hashes_packed(population.id_data, population.id_offsets))
    exact = count_choices(targets, offsets, leaf[keep], population.counts[keep], uniforms)
    return release(exact.tolist(), targets, epsilon, keys)


def _weighted_users(population: EncodedPopulation, targets: EstimateTargets) -> np.ndarray:
    """Per leaf, its weighted users, what its estimate estimates: the sum over users of the
    share of their records on the leaves that starts with it (the holders, when each user
    holds one discovered item)."""
    leaf, users = _leaf_rows(population, targets)
    keep = leaf >= 0
    counts = population.counts[keep].astype(np.float64)
    totals = np.bincount(users[keep], weights=counts, minlength=len(population.offsets) - 1)
    return np.bincount(leaf[keep], weights=counts / totals[users[keep]], minlength=len(targets))


def _mean_ci(values: Sequence[float]) -> Tuple[float, float]:
    """The mean and the half-width of its normal 95% interval."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        return float(values.mean()), 0.0
    return float(values.mean()), float(1.96 * values.std(ddof=1) / math.sqrt(len(values)))


def compare(users: Mapping[UserId, UserItems], encoder: ItemEncoder, epsilon: float, estimate_epsilon: float,
            delta: float, runs: int, ks: Sequence[int] = (10, 20, 50), seed: int = 0,
            rule: str = "authors") -> dict:
    """TrieHH at ``epsilon`` plus estimates at ``estimate_epsilon``, TrieHH alone at the total,
    and the central top-K at the total, ``runs`` times each (public run seeds).

    Returns a dict of figures (docs/evaluation.md explains each).

    Raises:
      ValueError: an infeasible TrieHH target.
    """
    from triehh_beam.evaluation.run_keys import run_seed

    total = epsilon + estimate_epsilon
    records = user_records(users)
    n = len(records)
    truth = ground_truth(records, encoder).user_counts
    population = encode_population(records, encoder)
    seeds = [run_seed(seed, r) for r in range(runs)]
    out: dict = {"n": n, "epsilon": epsilon, "estimate_epsilon": estimate_epsilon, "total_epsilon": total,
                 "delta": delta, "runs": runs}
    plans = {}
    for name, eps in (("triehh", epsilon), ("triehh_total", total)):
        plan = planner.plan(n, eps, delta, encoder.max_length, rule=rule)
        if not plan.feasible:
            raise ValueError(plan.reason)
        plans[name] = plan
    started = time.monotonic()
    noise = TwoSidedGeometric(estimate_epsilon)
    errors, covered, recall_all, recall_top, recall_total = [], [], {k: [] for k in ks}, {k: [] for k in ks}, {
        k: [] for k in ks}
    published_covered, published_half_widths = [], []
    top50 = {item for item, _ in sorted(truth.items(), key=lambda p: (-p[1], str(p[0])))[:max(ks)]}
    errors_top = []
    results = simulate_many(records, encoder, plans["triehh"].theta, plans["triehh"].batch_size, seeds)
    for run_seed_bytes, result in zip(seeds, results):
        trie = Trie(encoder, result.levels)
        targets = EstimateTargets.from_trie(trie)
        keys = EstimateKeys.derive(run_seed_bytes)
        released = estimate(population, targets, keys, estimate_epsilon)
        weighted = _weighted_users(population, targets)
        error = np.asarray(released.estimates) - weighted
        errors.extend(error.tolist())
        covered.append(float(np.mean(np.abs(error) <= released.half_width)) if len(error) else 1.0)
        intervals = np.asarray(released.intervals(), dtype=np.float64).reshape(-1, 2)
        holds = (intervals[:, 0] <= weighted) & (weighted <= intervals[:, 1])
        published_covered.append(float(np.mean(holds)) if len(holds) else 1.0)
        published_half_widths.extend(((intervals[:, 1] - intervals[:, 0]) / 2).tolist())
        items = [(encoder.decode(s), e) for s, e in zip(targets.sequences, released.estimates) if s[-1] in ("", b"")]
        errors_top.extend(e - truth[item] for item, e in items if item in top50)
        ranked = [item for item, _ in sorted(items, key=lambda p: -p[1])]
        for k in ks:
            recall_all[k].append(recall_at_k([i for i, _ in items], truth, k))
            recall_top[k].append(recall_at_k(ranked[:k], truth, k))
    for result in simulate_many(records, encoder, plans["triehh_total"].theta, plans["triehh_total"].batch_size,
                                seeds):
        for k in ks:
            recall_total[k].append(recall_at_k(result.heavy_hitters, truth, k))
    errors = np.asarray(errors, dtype=np.float64)
    out["triehh"] = {
        "theta": plans["triehh"].theta, "batch_size": plans["triehh"].batch_size,
        "half_width": noise.half_width(), "coverage_exact": noise.coverage(noise.half_width()),
        "estimates": int(len(errors)),
        "mean_error": _mean_ci(errors), "mean_abs_error": float(np.mean(np.abs(errors))),
        "rmse": float(np.sqrt(np.mean(errors ** 2))), "rmse_closed_form": math.sqrt(noise.variance),
        "coverage": _mean_ci(covered), "top_mean_abs_error": float(np.mean(np.abs(errors_top))),
        "published_coverage": _mean_ci(published_covered),
        "published_half_width": float(np.mean(published_half_widths)) if published_half_widths else 0.0,
        "recall_all": {k: _mean_ci(v) for k, v in recall_all.items()},
        "recall_top_by_estimate": {k: _mean_ci(v) for k, v in recall_top.items()},
        "recall_at_total_without_estimates": {k: _mean_ci(v) for k, v in recall_total.items()},
    }
    central_errors, central_covered, central_recall, kept = [], [], {k: [] for k in ks}, []
    normalized = {user: {encoder.normalize(i): c for i, c in held.items()} for user, held in records.items()}
    for r in range(runs):
        rng = np.random.default_rng([seed, r, 14])
        released = central_top_k(normalized, total, delta, rng)
        kept.append(len(released.kept))
        for item, count in released.kept:
            if item in top50:
                central_errors.append(count - truth[item])
        central_covered.extend(abs(count - truth[item]) <= released.half_width for item, count in released.kept)
        for k in ks:
            central_recall[k].append(recall_at_k(released.top(k), truth, k))
    central_errors = np.asarray(central_errors)
    out["central"] = {
        "epsilon_selection": released.epsilon_selection, "epsilon_count": released.epsilon_count,
        "threshold": released.threshold, "half_width": released.half_width, "items_kept": _mean_ci(kept),
        "top_mean_abs_error": float(np.mean(np.abs(central_errors))),
        "rmse": float(np.sqrt(np.mean(central_errors ** 2))),
        "coverage": float(np.mean(central_covered)),
        "recall_top_by_count": {k: _mean_ci(v) for k, v in central_recall.items()},
    }
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def _cell(pair: Tuple[float, float], digits: int = 3) -> str:
    mean, half = pair
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def format_tables(result: dict) -> str:
    """The figures as the markdown tables of docs/evaluation.md."""
    t, c = result["triehh"], result["central"]
    ks = list(t["recall_all"])
    lines = [
        f"n = {result['n']:,}, delta = {result['delta']:g}, {result['runs']} runs; TrieHH at epsilon = "
        f"{result['epsilon']:g} (theta = {t['theta']}, m = {t['batch_size']:,}) + estimates at epsilon_est = "
        f"{result['estimate_epsilon']:g}; central top-K at epsilon = {result['total_epsilon']:g} "
        f"({c['epsilon_selection']:g} selection, threshold {c['threshold']:.1f} users; {c['epsilon_count']:g} "
        f"counts); {result['seconds']} s",
        "",
        "| estimates of the discovered leaves | value |",
        "|---|---|",
        f"| estimates (leaves x runs) | {t['estimates']:,} |",
        f"| mean error (estimate - weighted users) | {_cell(t['mean_error'])} |",
        f"| mean absolute error | {t['mean_abs_error']:.3f} |",
        f"| RMSE (closed form sqrt(2a)/(1-a)) | {t['rmse']:.3f} ({t['rmse_closed_form']:.3f}) |",
        f"| published 95% interval: mean half-width, coverage | +-{t['published_half_width']:.1f}, "
        f"{_cell(t['published_coverage'])} |",
        f"| noise alone: half-width, coverage (exact) | +-{t['half_width']}, {_cell(t['coverage'])} "
        f"({t['coverage_exact']:.4f}) |",
        "",
        "| method (total epsilon " + f"{result['total_epsilon']:g})" + " | "
        + " | ".join(f"recall@{k}" for k in ks) + " | mean abs. error, true top-" + str(max(ks)) + " |",
        "|---|" + "---|" * (len(ks) + 1),
        "| TrieHH + estimates, all heavy hitters | " + " | ".join(_cell(t["recall_all"][k]) for k in ks)
        + f" | {t['top_mean_abs_error']:.2f} |",
        "| TrieHH + estimates, top-K by estimate | " + " | ".join(_cell(t["recall_top_by_estimate"][k]) for k in ks)
        + f" | {t['top_mean_abs_error']:.2f} |",
        "| TrieHH alone at the total epsilon | " + " | ".join(
            _cell(t["recall_at_total_without_estimates"][k]) for k in ks) + " | (no counts) |",
        "| central top-K (PipelineDP-style) | " + " | ".join(_cell(c["recall_top_by_count"][k]) for k in ks)
        + f" | {c['top_mean_abs_error']:.2f} |",
        "",
        f"central: {_cell(c['items_kept'], 1)} items kept per run; its Laplace 95% interval +-"
        f"{c['half_width']:.2f} covered {c['coverage']:.4f} of the kept items' counts",
    ]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from triehh_beam.evaluation.demo import demo_population_path
    from triehh_beam.evaluation.population import load_population

    parser = argparse.ArgumentParser(prog="python -m triehh_beam.evaluation.estimates_eval",
                                     description="Frequency estimates against the truth and a central top-K.")
    parser.add_argument("--input", default=None, help="records (default: the bundled demo population)")
    parser.add_argument("--epsilon", type=float, default=4.0, help="TrieHH's epsilon")
    parser.add_argument("--estimate-epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-10)
    parser.add_argument("--max-length", type=int, default=10)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    users = load_population(args.input or demo_population_path()).users
    result = compare(users, ItemEncoder(max_length=args.max_length), args.epsilon, args.estimate_epsilon,
                     args.delta, args.runs, seed=args.seed)
    print(format_tables(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
