"""Evaluation: how well TrieHH discovers heavy hitters on a given input, and against what. Each
configuration (protocol, ε, unit size) runs R times on either engine (``engines``), run ``j`` with
the same public derived seed in every configuration so they compare on paired runs, beside the
rivals (``rivals``); ``run_evaluation`` returns the JSON-ready result whose schema
docs/evaluation.md documents (its measures: ``measures``, docs/protocol.md §4). The input is read
into memory (``evaluation.population``)."""

from __future__ import annotations

import tempfile
import time
from typing import Any, Dict, List, Optional

from triehh_beam.evaluation import engines, measures, plans
from triehh_beam.evaluation.config import RIVALS, EvaluationConfig
from triehh_beam.evaluation.population import load_population
from triehh_beam.evaluation.rivals import exact_rival, pem_rival, pipelinedp_rival_block
from triehh_beam.evaluation.run_keys import run_seed
from triehh_beam.job.state.clock import now_iso
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.reference import metrics, pipelinedp_rival
from triehh_beam.reference.stats import mean_ci

__all__ = ["RIVALS", "SCHEMA", "EvaluationConfig", "Progress", "run_evaluation", "run_seed",
           "write_evaluation_json"]

# Version 2: parameters.max_length counts units as discover's --max-length (max_characters beside it).
SCHEMA = "triehh-beam/evaluation/2"
_RESULT_KEY = {Protocol.TRIEHH: "triehh", Protocol.TRIEHH_PP: "triehh_pp", Protocol.WHOLE_ITEMS: "sample_threshold"}
_LABEL = {Protocol.TRIEHH: "TrieHH", Protocol.TRIEHH_PP: "TrieHH++", Protocol.WHOLE_ITEMS: "sample-threshold"}
_MULTI_ITEM_WARNING = (
    "some users hold several items: Proposition 1 is not a lower bound for them (a holder votes for one of "
    "its items, drawn by its share of its records, so it counts for less than one holder; triehh plan "
    "--items-per-user K plans for that)")


class Progress:
    """Receives progress events; the default ignores them (the entry point shows a bar)."""

    def start(self, total: int) -> None:
        """``total`` runs are about to be made (TrieHH and rival runs together)."""

    def advance(self, label: str) -> None:
        """One run finished; ``label`` says which."""

    def note(self, line: str) -> None:
        """A line worth showing (a skipped configuration, a phase)."""


def _plans(config: EvaluationConfig, n: int, progress: Progress):
    """([(protocol, ε, unit size, plan)] of the feasible configurations, the infeasible ones as
    ``evaluation.json`` lists them)."""
    feasible, infeasible = [], []
    if Protocol.WHOLE_ITEMS in config.protocols:  # no trie: one configuration per ε, at unit size 1
        whole, infeasible = plans.whole_item_plans(config.epsilons, config.delta, config.max_length_for(1))
        feasible += [(Protocol.WHOLE_ITEMS, epsilon, 1, plan) for epsilon, plan in whole]
    for protocol in (p for p in config.protocols if p.grows_trie):
        for unit_size in config.unit_sizes:
            for epsilon in config.epsilons:
                max_length = config.max_length_for(unit_size)
                plan = plans.plan_for(protocol, n, epsilon, config.delta, max_length, config.rule)
                if plan.feasible:
                    feasible.append((protocol, epsilon, unit_size, plan))
                else:
                    infeasible.append({"protocol": protocol.value, "epsilon": epsilon, "unit_size": unit_size,
                                       "max_length": max_length, "reason": plan.reason})
                    progress.note(f"skipped: {protocol} epsilon={epsilon:g} unit size {unit_size}: {plan.reason}")
    return feasible, infeasible


def _configuration(config: EvaluationConfig, protocol: Protocol, epsilon: float, unit_size: int, plan,
                   runs: list, seeds, ranking, truth, n: int) -> dict:
    """One configuration's block of ``evaluation.json``."""
    encoder = config.encoder(unit_size)
    ks, confidence = config.top_k, config.confidence
    block = {
        **({} if protocol is Protocol.TRIEHH else {"protocol": protocol.value}),
        "epsilon": epsilon,
        "unit_size": unit_size,
        "max_length": encoder.max_length,
        "privacy": plans.privacy_block(protocol, plan, config.runs),
        "metrics": measures.metric_block([run.heavy_hitters for run in runs], truth, ks, confidence),
        "reachable": measures.reachable(ranking, encoder, truth, ks),
    }
    items = measures.item_rows(runs, ranking, n, getattr(plan, protocol.threshold_name), encoder, ks, confidence,
                               plans.bound_for(protocol, plan, n))
    if not protocol.grows_trie:
        return dict(block, items=items, estimates=measures.estimate_rows(
            runs, ranking, plan.sampling_probability, max(max(ks), 20)), runs=[
            {"run": j, "seed": seeds[j].hex(), "released": dict(sorted(run.counts.items())),
             "seconds": round(run.seconds, 3)} for j, run in enumerate(runs)])
    rounds = [run.rounds for run in runs]
    return dict(block, rounds=dict(mean_ci(rounds, confidence, bounds=(0.0, float("inf"))), values=rounds),
                growth=measures.growth(runs, encoder.max_length, confidence), items=items, runs=[
                    {"run": j, "seed": seeds[j].hex(), "heavy_hitters": list(run.heavy_hitters),
                     "frequent_prefixes": list(run.frequent_prefixes), "rounds": run.rounds,
                     "level_sizes": list(run.level_sizes), "seconds": round(run.seconds, 3)}
                    for j, run in enumerate(runs)])


def run_evaluation(config: EvaluationConfig, pipeline_options=None, progress: Optional[Progress] = None) -> dict:
    """Runs every configuration and rival; returns the JSON-ready result (docs/evaluation.md).

    Args:
      config: what to evaluate.
      pipeline_options: Beam ``PipelineOptions`` for the pipeline engine (default: in-process).
      progress: receives one ``advance`` per finished run.

    Raises:
      FileNotFoundError, RecordFormatError, ValueError: unusable input.
      pipelinedp_rival.RivalUnavailableError: the pipelinedp rival without PipelineDP installed
        (before anything runs).
      InfeasiblePlanError is never raised: infeasible configurations are listed under
        ``infeasible`` and skipped.
    """
    progress = progress or Progress()
    started = time.monotonic()
    if pipelinedp_rival.NAME in config.rivals:
        pipelinedp_rival.require_pipeline_dp()  # before an hour of runs, not after
    population = load_population(config.input_pattern, config.input_format, config.columns)
    if not population.users:
        raise ValueError(f"{config.input_pattern}: no usable records")
    base_encoder = config.encoder(config.unit_sizes[0])
    truth_all = metrics.ground_truth(population.users, base_encoder)
    n = truth_all.n_users
    truth: Dict[str, int] = dict(truth_all.user_counts)
    ranking = measures.ranking(truth)

    feasible, infeasible = _plans(config, n, progress)
    ks = config.top_k
    progress.start(len(feasible) * config.runs
                   + ("pem" in config.rivals) * len(config.epsilons) * len(ks) * config.runs
                   + (pipelinedp_rival.NAME in config.rivals) * len(config.epsilons) * config.runs)
    seeds = [run_seed(config.seed, j) for j in range(config.runs)]
    work_dir = options = None
    if config.engine == "pipeline":
        from apache_beam.options.pipeline_options import PipelineOptions

        options = pipeline_options or PipelineOptions([])
        work_dir = config.work_dir or tempfile.mkdtemp(prefix="triehh-evaluate-")
    warnings: List[str] = []
    if any(len(items) > 1 for items in population.users.values()):
        warnings.append(_MULTI_ITEM_WARNING)
    configurations: Dict[str, List[dict]] = {key: [] for key in _RESULT_KEY.values()}
    try:
        for protocol, epsilon, unit_size, plan in feasible:
            label = f"{_LABEL[protocol]} eps={epsilon:g}" + (f" unit={unit_size}" if protocol.grows_trie else "")

            def on_run(index: int, label=label) -> None:
                progress.advance(f"{label} run {index + 1}/{config.runs}")

            if config.engine == "pipeline":
                runs = engines.pipeline_runs(config, protocol, unit_size, epsilon, seeds, work_dir, options, on_run)
            else:
                identities = engines.run_identities(config, protocol, unit_size, epsilon, seeds)
                if protocol.grows_trie:
                    runs = engines.simulate_trie_runs(population.users, config.encoder(unit_size), protocol, plan,
                                                      seeds, config.truncate_long_items, on_run, identities)
                else:
                    runs = engines.simulate_whole_item_runs(population.users, config.encoder(1), plan, seeds,
                                                            on_run, identities)
            mismatched = {run.population for run in runs} - {n}
            if mismatched and protocol.grows_trie:
                warnings.append(f"epsilon={epsilon:g} unit size {unit_size}: the engine counted "
                                f"{sorted(mismatched)} users, the evaluation {n} (records with count 0?)")
            configurations[_RESULT_KEY[protocol]].append(
                _configuration(config, protocol, epsilon, unit_size, plan, runs, seeds, ranking, truth, n))
    finally:
        if work_dir is not None and config.work_dir is None:
            from apache_beam.io.filesystems import FileSystems

            if FileSystems.exists(work_dir):
                FileSystems.delete([work_dir])

    rivals: Dict[str, Any] = {}
    if "exact" in config.rivals:
        rivals["exact"] = exact_rival(ranking, truth, ks, config.confidence)
    if "pem" in config.rivals:
        rivals["pem"] = pem_rival(config, population.users, base_encoder, truth, progress.advance)
    if pipelinedp_rival.NAME in config.rivals:
        rivals[pipelinedp_rival.NAME] = pipelinedp_rival_block(config, population.users, base_encoder, truth,
                                                               seeds, progress.advance)
    return {
        "schema": SCHEMA,
        "created_at": now_iso(),
        "seconds": round(time.monotonic() - started, 1),
        "parameters": dict(config.to_dict(), ci_method=(
            "t-interval of the mean over runs (clipped to [0, 1]); Wilson score interval for "
            "per-item discovery rates")),
        "data_source": {
            "input": config.input_pattern,
            "files": list(population.files),
            "records": population.records,
            "records_dropped": dict(population.dropped),
            "users": n,
            "distinct_items": len(truth),
            "users_with_several_items": sum(1 for items in population.users.values() if len(items) > 1),
        },
        "truth": [{"rank": r, "item": item, "users": users}
                  for r, (item, users) in enumerate(ranking[: max(100, max(ks))], start=1)],
        "infeasible": infeasible,
        "warnings": warnings,
        **configurations,
        "rivals": rivals,
    }


def write_evaluation_json(result: dict, path: str) -> str:
    """Writes the result as indented UTF-8 JSON (via ``FileSystems``); returns the path."""
    import json

    from apache_beam.io.filesystems import FileSystems

    data = (json.dumps(result, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    with FileSystems.create(path, compression_type="uncompressed") as f:
        f.write(data)
    return path
