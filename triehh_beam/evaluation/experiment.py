"""Evaluation: how well TrieHH discovers heavy hitters on a given input, and against what. For each
ε, unit size and each of R runs (run ``j`` with the public, derived secret seed ``run_seed(seed,
j)``, the same for every configuration, so configurations are compared on paired runs), TrieHH
runs either through the real pipeline (``engine="pipeline"``: ``driver.run_discovery``, census
included, in a scratch directory) or the keyed simulation (``engine="simulate"``, which grows
the pipeline's trie in the pipeline's rounds, much faster), beside the exact top-K, PEM (ε-LDP,
``evaluation.pem``) at the same ε and, when asked, PipelineDP's central partition selection at the
same (ε, δ) (``evaluation.pipelinedp_rival``); the result (``run_evaluation``, docs/evaluation.md documents
its schema, docs/protocol.md §4 its measures) holds recall@K, F1@K and NCR@K with t-intervals
(``evaluation.stats``), each item's discovery rate with a Wilson interval beside its Proposition
1 bound (a bound only for one item per user), the rounds run and the trie's growth, and the
privacy of one run and of all R composed. Unit size k runs with ``ceil((L - 1)/k) + 1`` units so
that every unit size sees the same items; the input is read into memory
(``evaluation.population``).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import hashlib
import math
import tempfile
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from triehh_beam.evaluation.run_keys import evaluation_release
from triehh_beam.evaluation import metrics, pem, pipelinedp_rival, sample_threshold_eval, whole_items_eval
from triehh_beam.evaluation.population import Population, load_population
from triehh_beam.evaluation.stats import mean_ci, wilson_interval
from triehh_beam.protocol import parameters, planner, privacy, utility
from triehh_beam.io.schema import FORMATS, RecordColumns
from triehh_beam.protocol.encoding import EncodingError, ItemEncoder, ItemKind, ItemTooLongError

__all__ = [
    "DEFAULT_RIVALS",
    "ENGINES",
    "PROTOCOLS",
    "RIVALS",
    "SCHEMA",
    "EvaluationConfig",
    "Progress",
    "run_evaluation",
    "run_seed",
    "write_evaluation_json",
]

SCHEMA = "triehh-beam/evaluation/1"
ENGINES = ("pipeline", "simulate")
RIVALS = ("exact", "pem", pipelinedp_rival.NAME)
# PipelineDP is an optional dependency: asked for by name, never by default.
DEFAULT_RIVALS = ("exact", "pem")
PROTOCOLS = ("triehh", "triehh++", "sample-threshold")


# --------------------------------------------------------------------------------------------
# Configuration.


def _as_tuple(name: str, values, kind, minimum) -> tuple:
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = (values,)
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name} must hold numbers, got {value!r}")
        if kind is int and int(value) != value:
            raise ValueError(f"{name} must hold integers, got {value!r}")
        value = kind(value)
        if not math.isfinite(value) or value < minimum or (minimum == 0 and value <= 0):
            raise ValueError(f"{name} must hold values {'> 0' if minimum == 0 else f'>= {minimum}'}, got {value!r}")
        out.append(value)
    if not out:
        raise ValueError(f"{name} must not be empty")
    return tuple(sorted(set(out)))


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """What to evaluate, validated before anything runs.

    Args:
      input_pattern: records (path, glob, several comma-separated; any ``FileSystems`` path).
      epsilons: the ε of each TrieHH (and PEM) configuration.
      delta: TrieHH's δ.
      max_length: L in units of one character (items of up to L - 1 characters); unit size k
        runs with ``ceil((L - 1)/k) + 1`` units.
      unit_sizes: characters per unit, one configuration each.
      runs: R, runs per configuration.
      top_k: the K of recall@K, F1@K and NCR@K (and PEM's k).
      engine: ``"pipeline"`` or ``"simulate"`` (module docstring).
      rivals: any of ``"exact"``, ``"pem"``, ``"pipelinedp"`` (PipelineDP's central partition
        selection, ``evaluation.pipelinedp_rival``; needs the ``rivals`` extra).
      input_format: ``"jsonl"``, ``"csv"``, ``"parquet"`` or None (from the file names).
      rule: the planner's rule.
      case_fold, truncate_long_items: as ``DiscoveryConfig``.
      user_column, item_column, count_column: the record columns (count may be None).
      seed: the public evaluation seed the run seeds derive from.
      confidence: of the intervals.
      pem_eta: PEM's η (default: ``pem.PEMConfig``'s).
      pem_candidate_factor: PEM keeps this many times K prefixes per intermediate group.
      protocols: ``"triehh"`` and/or ``"triehh++"`` (sample-and-threshold, on either engine:
        the pipeline's ``--protocol triehh++``); each configuration runs under each, at the same
        (ε, δ) and on the same run seeds; and/or ``"sample-threshold"`` (one release of whole
        items, ``evaluation.whole_items_eval``: unit size 1, either engine).
      work_dir: scratch area of the pipeline engine (outputs and state of each run); default a
        fresh local temporary directory, removed afterwards. Give a ``gs://`` path for a remote
        runner. The simulate engine given the same ``work_dir`` keys each run as the pipeline
        engine does (the run's job identity includes its output path), so the two engines grow
        the same tries run by run.

    Raises:
      ValueError: for any invalid value.
    """

    input_pattern: str
    epsilons: Tuple[float, ...]
    delta: float
    max_length: int
    unit_sizes: Tuple[int, ...] = (1,)
    runs: int = 10
    top_k: Tuple[int, ...] = (10,)
    engine: str = "pipeline"
    rivals: Tuple[str, ...] = DEFAULT_RIVALS
    input_format: Optional[str] = None
    rule: str = "authors"
    case_fold: bool = False
    truncate_long_items: bool = False
    user_column: str = "user_id"
    item_column: str = "item"
    count_column: Optional[str] = "count"
    seed: int = 0
    confidence: float = 0.95
    pem_eta: Optional[int] = None
    pem_candidate_factor: int = 2
    work_dir: Optional[str] = None
    protocols: Tuple[str, ...] = ("triehh",)

    def __post_init__(self):
        if not self.input_pattern:
            raise ValueError("an input pattern is required")
        object.__setattr__(self, "epsilons", _as_tuple("epsilons", self.epsilons, float, 0))
        object.__setattr__(self, "unit_sizes", _as_tuple("unit sizes", self.unit_sizes, int, 1))
        object.__setattr__(self, "top_k", _as_tuple("top-K", self.top_k, int, 1))
        if not (isinstance(self.delta, (int, float)) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 2:
            raise ValueError(f"max_length must be an integer >= 2, got {self.max_length!r}")
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1:
            raise ValueError(f"runs must be an integer >= 1, got {self.runs!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        rivals = tuple(self.rivals)
        unknown = [r for r in rivals if r not in RIVALS]
        if unknown:
            raise ValueError(f"unknown rival {unknown[0]!r}; the rivals are {', '.join(RIVALS)}")
        object.__setattr__(self, "rivals", tuple(r for r in RIVALS if r in rivals))
        protocols = (self.protocols,) if isinstance(self.protocols, str) else tuple(self.protocols)
        if not protocols or any(p not in PROTOCOLS for p in protocols):
            raise ValueError(f"protocols must be among {', '.join(PROTOCOLS)}, got {self.protocols!r}")
        object.__setattr__(self, "protocols", tuple(p for p in PROTOCOLS if p in protocols))
        if self.input_format not in (None, *FORMATS):
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {self.input_format!r}")
        if self.rule not in parameters.RULES:
            raise ValueError(f"rule must be one of {', '.join(parameters.RULES)}, got {self.rule!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")
        if self.pem_eta is not None and (not isinstance(self.pem_eta, int) or self.pem_eta < 1):
            raise ValueError(f"pem_eta must be an integer >= 1, got {self.pem_eta!r}")
        if not isinstance(self.pem_candidate_factor, int) or self.pem_candidate_factor < 1:
            raise ValueError(f"pem_candidate_factor must be an integer >= 1, got {self.pem_candidate_factor!r}")
        for unit_size in self.unit_sizes:
            self.encoder(unit_size)  # validates the encoding
        RecordColumns(self.user_column, self.item_column, self.count_column or None)

    def max_length_for(self, unit_size: int) -> int:
        """L in units of ``unit_size`` characters that fits the same items as L at unit size 1."""
        return math.ceil((self.max_length - 1) / unit_size) + 1

    def encoder(self, unit_size: int) -> ItemEncoder:
        return ItemEncoder(
            kind=ItemKind.TEXT,
            unit_size=unit_size,
            max_length=self.max_length_for(unit_size),
            case_fold=self.case_fold,
        )

    @property
    def columns(self) -> RecordColumns:
        return RecordColumns(self.user_column, self.item_column, self.count_column or None)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out.pop("work_dir")
        for key in ("epsilons", "unit_sizes", "top_k", "rivals", "protocols"):
            out[key] = list(out[key])
        out["max_length_by_unit_size"] = {str(k): self.max_length_for(k) for k in self.unit_sizes}
        return out


# --------------------------------------------------------------------------------------------
# Progress.


class Progress:
    """Receives progress events; the default ignores them (the entry point shows a bar)."""

    def start(self, total: int) -> None:
        """``total`` runs are about to be made (TrieHH and PEM runs together)."""

    def advance(self, label: str) -> None:
        """One run finished; ``label`` says which."""

    def note(self, line: str) -> None:
        """A line worth showing (a skipped configuration, a phase)."""


# --------------------------------------------------------------------------------------------
# Seeds.


def run_seed(seed: int, run: int) -> bytes:
    """The 32-byte secret seed of TrieHH run ``run`` of an evaluation with public seed ``seed``."""
    return hashlib.blake2b(f"triehh-beam/evaluate/{seed}/{run}".encode(), digest_size=32).digest()


def _pem_seed(seed: int, epsilon: float, k: int, run: int) -> int:
    digest = hashlib.blake2b(f"triehh-beam/evaluate/pem/{seed}/{epsilon!r}/{k}/{run}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


# --------------------------------------------------------------------------------------------
# TrieHH runs.


@dataclasses.dataclass(frozen=True)
class _Run:
    heavy_hitters: Tuple[str, ...]
    frequent_prefixes: Tuple[str, ...]
    rounds: int
    level_sizes: Tuple[int, ...]
    seconds: float
    population: int


def _run_output(work_dir: str, epsilon: float, unit_size: int, index: int, plus: bool = False) -> str:
    """A run's output (and state) directory; TrieHH++'s runs have their own (``pp-``)."""
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.join(work_dir, f"{'pp-' if plus else ''}eps{epsilon:g}-k{unit_size}-run{index}")


def _discovery_config(config: EvaluationConfig, unit_size: int, epsilon: float, seed: bytes, out: str,
                      plus: bool = False):
    """The ``DiscoveryConfig`` of one pipeline-engine run (its identity keys the run's samples);
    ``plus``: TrieHH++'s (``--protocol triehh++``, whose planner takes no ``rule``)."""
    from triehh_beam.job.config import TRIEHH_PP
    from triehh_beam.job.driver import DiscoveryConfig

    protocol = {"protocol": TRIEHH_PP} if plus else {"rule": config.rule}
    return DiscoveryConfig(
        input_pattern=config.input_pattern,
        output_dir=out,
        epsilon=epsilon,
        delta=config.delta,
        max_length=config.max_length_for(unit_size),
        unit_size=unit_size,
        input_format=config.input_format,
        seed=seed,
        case_fold=config.case_fold,
        truncate_long_items=config.truncate_long_items,
        user_column=config.user_column,
        item_column=config.item_column,
        count_column=config.count_column or "",
        **protocol,
    )


def _simulate_runs(users, encoder, plan, seeds: Sequence[bytes], truncate: bool,
                   on_run: Callable[[int], None], identities: Optional[Sequence[bytes]] = None) -> List[_Run]:
    """The keyed simulation's runs; with ``identities`` (one per seed), each run is keyed as the
    pipeline engine's run with the same seed and work directory is, and grows the same trie. A
    TrieHH++ plan (``sample_threshold_eval.is_sample_threshold``) runs sample-and-threshold."""
    from triehh_beam.reference import simulation
    from triehh_beam.evaluation.sample_threshold_eval import is_sample_threshold

    if is_sample_threshold(plan):
        def simulate_many(users, encoder, seeds, **kwargs):
            return simulation.simulate_many_sample_threshold(
                users, encoder, plan.tau, plan.sampling_probability, seeds, **kwargs)
    else:
        def simulate_many(users, encoder, seeds, **kwargs):
            return simulation.simulate_many(users, encoder, plan.theta, plan.batch_size, seeds, **kwargs)

    timings: List[float] = []
    too_long = "truncate" if truncate else "drop"

    def seeds_with_progress() -> Iterator[bytes]:
        # simulate_many consumes the seeds one run at a time: resuming after a yield means that
        # run is done.
        for index, seed in enumerate(seeds):
            started = time.monotonic()
            yield seed
            timings.append(time.monotonic() - started)
            on_run(index)

    if identities is None:  # one identity: the population is encoded once for every run
        results = simulate_many(users, encoder, seeds_with_progress(),
                                sampling="keyed", too_long=too_long)
    else:
        results = []
        for index, seed in enumerate(seeds):
            started = time.monotonic()
            results.extend(simulate_many(users, encoder, [seed],
                                         sampling="keyed", too_long=too_long, identity=identities[index]))
            timings.append(time.monotonic() - started)
            on_run(index)
    runs = []
    for result, seconds in zip(results, timings + [0.0] * (len(results) - len(timings))):
        runs.append(_Run(
            heavy_hitters=tuple(sorted(result.heavy_hitters)),
            frequent_prefixes=tuple(sorted(encoder.decode(p) for p in result.frequent_prefixes)),
            rounds=result.rounds_run,
            level_sizes=tuple(len(level) for level in result.levels),
            seconds=seconds,
            population=result.n_users,
        ))
    return runs


def _pipeline_runs(config: EvaluationConfig, unit_size: int, epsilon: float, seeds: Sequence[bytes],
                   work_dir: str, options, on_run: Callable[[int], None], plus: bool = False) -> List[_Run]:
    """One ``driver.run_discovery`` per seed (TrieHH++'s with ``plus``), each in its own output."""
    from apache_beam.io.filesystems import FileSystems

    from triehh_beam.job.driver import run_discovery
    from triehh_beam.protocol.trie import Trie

    runs = []
    for index, seed in enumerate(seeds):
        out = _run_output(work_dir, epsilon, unit_size, index, plus)
        discovery = _discovery_config(config, unit_size, epsilon, seed, out, plus)
        started = time.monotonic()
        result = run_discovery(discovery, options, release=evaluation_release(seed, discovery.sampling_identity()))
        seconds = time.monotonic() - started
        with FileSystems.open(FileSystems.join(out, "trie.pb"), compression_type="uncompressed") as f:
            trie = Trie.from_bytes(f.read(), source="trie.pb")
        runs.append(_Run(
            heavy_hitters=tuple(sorted(result.heavy_hitters)),
            frequent_prefixes=tuple(sorted(result.frequent_prefixes)),
            rounds=result.rounds_run,
            level_sizes=tuple(len(level) for level in trie.levels),
            seconds=seconds,
            population=result.plan.population,
        ))
        FileSystems.delete([out])
        on_run(index)
    return runs


# --------------------------------------------------------------------------------------------
# Metrics over runs.


def _metric_block(found_per_run: Sequence[Iterable], truth: Mapping, ks: Sequence[int], confidence: float) -> List[dict]:
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


def _encoded_length(item: str, encoder: ItemEncoder) -> Optional[int]:
    try:
        return len(encoder.encode(item))
    except ItemTooLongError:
        return None
    except EncodingError:
        return None


def _ranking(truth: Mapping[str, int]) -> List[Tuple[str, int]]:
    return sorted(truth.items(), key=lambda kv: (-kv[1], kv[0]))


def _item_rows(runs: Sequence[_Run], ranking, n: int, plan, encoder: ItemEncoder, ks, confidence,
               bound_of: Optional[Callable[[int, int], float]] = None) -> List[dict]:
    """Per item: its holders, its discovery rate over the runs (Wilson interval) and its
    Proposition 1 bound ``utility.discovery_probability(users, n, m, θ, len)``, ``len`` its
    encoded length with the terminator (bound 0 if too long); ``bound_of(users, len)`` replaces
    it (TrieHH++'s). The bound is exact for one item per user sharing no prefix, a lower bound
    with shared prefixes, and no bound with several items per user (a holder may vote for
    another of its items)."""
    found = collections.Counter()
    for run in runs:
        found.update(set(run.heavy_hitters))
    max_k = max(ks)
    rows = []
    threshold = plan.theta if bound_of is None else plan.tau
    for rank, (item, users) in enumerate(ranking, start=1):
        if users < threshold and item not in found and rank > max_k:
            continue  # fewer holders than theta: never discovered, bound 0; left out for size
        length = _encoded_length(item, encoder)
        bound = 0.0
        if length is not None and bound_of is not None:
            bound = bound_of(users, length)
        elif length is not None:
            bound = utility.discovery_probability(users, n, plan.batch_size, plan.theta, length)
        lo, hi = wilson_interval(found[item], len(runs), confidence)
        rows.append({
            "item": item,
            "rank": rank,
            "users": users,
            "share": users / n,
            "length": length,
            "rate": found[item] / len(runs),
            "rate_ci": [lo, hi],
            "bound": bound,
        })
    return rows


def _growth(runs: Sequence[_Run], max_rounds: int, confidence: float) -> List[dict]:
    rows = []
    for r in range(max_rounds):
        sizes = [run.level_sizes[r] if r < len(run.level_sizes) else 0 for run in runs]
        rows.append(dict(mean_ci(sizes, confidence, bounds=(0.0, math.inf)), round=r + 1, values=sizes))
    return rows


def _reachable(ranking, encoder: ItemEncoder, truth, ks) -> List[dict]:
    """recall@K of the exact top-K among the items that fit: the best any run can do."""
    fitting = [item for item, _ in ranking if _encoded_length(item, encoder) is not None]
    out = []
    for k in ks:
        best = fitting[: metrics.true_top_k(truth, k).k]
        out.append({"k": int(k), "recall": metrics.recall_at_k(best, truth, k)})
    return out


def _triehh_privacy(plan, runs: int) -> dict:
    total = privacy.compose([(plan.epsilon, plan.delta)] * runs)
    return {
        "model": "central",
        "guarantee": (
            "(epsilon, delta)-DP with user-level adjacency (TrieHH Theorem 1), for one run, "
            "covering all max_length rounds"
        ),
        "epsilon": plan.epsilon,
        "delta": plan.delta,
        "target_epsilon": plan.target_epsilon,
        "target_delta": plan.target_delta,
        "theta": plan.theta,
        "batch_size": plan.batch_size,
        "gamma": plan.gamma,
        "population": plan.n,
        "max_length": plan.max_length,
        "rule": plan.rule,
        "all_runs_composed": {
            "epsilon": total.epsilon,
            "delta": total.delta,
            "note": "R runs on the same users are R releases (basic composition): evaluate on "
                    "data whose privacy is not at stake",
        },
    }


# --------------------------------------------------------------------------------------------
# The evaluation.


PROTOCOL_WHOLE = whole_items_eval.PROTOCOL


def _plan(protocol: str, n: int, epsilon: float, delta: float, max_length: int, rule: str):
    if protocol == "triehh++":
        return sample_threshold_eval.plan(epsilon, delta, max_length)
    return planner.plan(n, epsilon, delta, max_length, rule, with_alternatives=False)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


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
    ranking = _ranking(truth)
    multi_item = any(len(items) > 1 for items in population.users.values())

    plans = []
    infeasible = []
    whole_plans, infeasible = ([], []) if PROTOCOL_WHOLE not in config.protocols else whole_items_eval.plans(
        config.epsilons, config.delta, config.max_length)
    for protocol in config.protocols:
        if protocol == PROTOCOL_WHOLE:  # no trie: one configuration per epsilon (below)
            continue
        for unit_size in config.unit_sizes:
            for epsilon in config.epsilons:
                plan = _plan(protocol, n, epsilon, config.delta, config.max_length_for(unit_size), config.rule)
                if plan.feasible:
                    plans.append((epsilon, unit_size, plan))
                else:
                    infeasible.append({"protocol": protocol, "epsilon": epsilon, "unit_size": unit_size,
                                       "max_length": config.max_length_for(unit_size), "reason": plan.reason})
                    progress.note(f"skipped: {protocol} epsilon={epsilon:g} unit size {unit_size}: {plan.reason}")
    ks = config.top_k
    total = ((len(plans) + len(whole_plans)) * config.runs
             + ("pem" in config.rivals) * len(config.epsilons) * len(ks) * config.runs
             + (pipelinedp_rival.NAME in config.rivals) * len(config.epsilons) * config.runs)
    progress.start(total)

    seeds = [run_seed(config.seed, j) for j in range(config.runs)]
    work_dir = None
    options = None
    if config.engine == "pipeline":
        from apache_beam.options.pipeline_options import PipelineOptions

        options = pipeline_options or PipelineOptions([])
        work_dir = config.work_dir or tempfile.mkdtemp(prefix="triehh-evaluate-")
    warnings: List[str] = []
    if multi_item:
        warnings.append("some users hold several items: Proposition 1 is not a lower bound for them "
                        "(a holder votes for one of its items, drawn by its share of its records, so it "
                        "counts for less than one holder; triehh plan --items-per-user K plans for that)")
    configurations = []
    configurations_pp = []
    configurations_whole = []
    try:
        for epsilon, plan in whole_plans:
            def on_whole_run(index: int, epsilon=epsilon) -> None:
                progress.advance(f"sample-threshold eps={epsilon:g} run {index + 1}/{config.runs}")

            if config.engine == "simulate":
                runs = whole_items_eval.simulate_runs(config, population.users, plan, epsilon, seeds, on_whole_run)
            else:
                runs = whole_items_eval.pipeline_runs(config, epsilon, seeds, work_dir, options, on_whole_run)
            found = [run.heavy_hitters for run in runs]
            configurations_whole.append(whole_items_eval.configuration(
                config, epsilon, plan, runs, seeds, ranking, _metric_block(found, truth, ks, config.confidence),
                _item_rows(runs, ranking, n, plan, config.encoder(1), ks, config.confidence,
                           whole_items_eval.bound_for(plan)),
                _reachable(ranking, config.encoder(1), truth, ks)))
        for epsilon, unit_size, plan in plans:
            encoder = config.encoder(unit_size)
            plus = sample_threshold_eval.is_sample_threshold(plan)
            label = f"TrieHH{'++' if plus else ''} eps={epsilon:g} unit={unit_size}"

            def on_run(index: int, label=label) -> None:
                progress.advance(f"{label} run {index + 1}/{config.runs}")

            if config.engine == "simulate":
                identities = None if config.work_dir is None else [
                    evaluation_release(seed, _discovery_config(
                        config, unit_size, epsilon, seed, _run_output(config.work_dir, epsilon, unit_size, index, plus),
                        plus).sampling_identity()).keyed_identity
                    for index, seed in enumerate(seeds)]
                runs = _simulate_runs(population.users, encoder, plan, seeds, config.truncate_long_items, on_run,
                                      identities)
            else:
                runs = _pipeline_runs(config, unit_size, epsilon, seeds, work_dir, options, on_run, plus)
            mismatched = {run.population for run in runs} - {n}
            if mismatched:
                warnings.append(
                    f"epsilon={epsilon:g} unit size {unit_size}: the engine counted "
                    f"{sorted(mismatched)} users, the evaluation {n} (records with count 0?)"
                )
            found = [run.heavy_hitters for run in runs]
            (configurations_pp if plus else configurations).append({
                **({"protocol": "triehh++"} if plus else {}),
                "epsilon": epsilon,
                "unit_size": unit_size,
                "max_length": encoder.max_length,
                "privacy": (sample_threshold_eval.privacy_block(plan, config.runs) if plus
                            else _triehh_privacy(plan, config.runs)),
                "metrics": _metric_block(found, truth, ks, config.confidence),
                "reachable": _reachable(ranking, encoder, truth, ks),
                "rounds": dict(mean_ci([r.rounds for r in runs], config.confidence, bounds=(0.0, math.inf)),
                               values=[r.rounds for r in runs]),
                "growth": _growth(runs, encoder.max_length, config.confidence),
                "items": _item_rows(runs, ranking, n, plan, encoder, ks, config.confidence,
                                    sample_threshold_eval.bound_for(plan) if plus else None),
                "runs": [
                    {
                        "run": j,
                        "seed": seeds[j].hex(),
                        "heavy_hitters": list(run.heavy_hitters),
                        "frequent_prefixes": list(run.frequent_prefixes),
                        "rounds": run.rounds,
                        "level_sizes": list(run.level_sizes),
                        "seconds": round(run.seconds, 3),
                    }
                    for j, run in enumerate(runs)
                ],
            })
    finally:
        if work_dir is not None and config.work_dir is None:
            from apache_beam.io.filesystems import FileSystems

            if FileSystems.exists(work_dir):
                FileSystems.delete([work_dir])

    rivals: Dict[str, Any] = {}
    if "exact" in config.rivals:
        exact_blocks = []
        for k in ks:
            top = [item for item, _ in ranking[: metrics.true_top_k(truth, k).k]]
            exact_blocks.append(dict(_metric_block([top], truth, [k], config.confidence)[0], heavy_hitters=top))
        rivals["exact"] = {
            "privacy": {"model": "none", "guarantee": "none: the exact, non-private top-K (the ceiling)"},
            "metrics": exact_blocks,
        }
    if "pem" in config.rivals:
        rivals["pem"] = _run_pem_rival(config, population, base_encoder, truth, progress)
    if pipelinedp_rival.NAME in config.rivals:
        rivals[pipelinedp_rival.NAME] = _run_pipelinedp_rival(config, population, base_encoder, truth, seeds,
                                                              progress)

    return {
        "schema": SCHEMA,
        "created_at": _now(),
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
        "triehh": configurations,
        "triehh_pp": configurations_pp,
        "sample_threshold": configurations_whole,
        "rivals": rivals,
    }


def _run_pem_rival(config: EvaluationConfig, population: Population, encoder: ItemEncoder,
                   truth: Mapping[str, int], progress: Progress) -> dict:
    # PEM sees the same normalised items as the truth (NFC, case folding).
    users: Dict[bytes, collections.Counter] = {}
    for user, items in population.users.items():
        normalised = collections.Counter()
        for item, count in items.items():
            try:
                normalised[encoder.normalize(item)] += count
            except EncodingError:
                continue
        users[user] = normalised
    n_bytes = config.max_length - 1
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
                progress.advance(f"PEM eps={epsilon:g} k={k} run {j + 1}/{config.runs}")
            block = _metric_block([r["heavy_hitters"] for r in runs], truth, [k], config.confidence)[0]
            per_k.append(dict(block, parameters=pem_config.to_dict(), runs=runs))
        by_epsilon.append({
            "epsilon": epsilon,
            "privacy": {"model": "local", "guarantee": "epsilon-LDP per user (one OLH report each)",
                        "epsilon": epsilon, "delta": 0.0},
            "metrics": per_k,
        })
    return {"n_bytes": n_bytes, "configurations": by_epsilon}


def _run_pipelinedp_rival(config: EvaluationConfig, population: Population, encoder: ItemEncoder,
                          truth: Mapping[str, int], seeds: Sequence[bytes], progress: Progress) -> dict:
    # The same normalised items as the truth, whatever their length: central partition
    # selection has no item limit. Run j draws each user's item with TrieHH's run seed j.
    users = pipelinedp_rival.normalised_users(population.users, encoder)
    by_epsilon = []
    for epsilon in config.epsilons:
        def on_run(index: int, epsilon=epsilon) -> None:
            progress.advance(f"PipelineDP eps={epsilon:g} run {index + 1}/{config.runs}")

        runs = pipelinedp_rival.run(users, epsilon, config.delta, seeds, on_run)
        released = [len(run.heavy_hitters) for run in runs]
        by_epsilon.append({
            "epsilon": epsilon,
            "delta": config.delta,
            "privacy": pipelinedp_rival.privacy_block(epsilon, config.delta, config.runs),
            "released": dict(mean_ci(released, config.confidence, bounds=(0.0, math.inf)), values=released),
            "metrics": _metric_block([run.heavy_hitters for run in runs], truth, config.top_k, config.confidence),
            "runs": [{"run": j, "seed": seeds[j].hex(), "contributors": run.contributors,
                      "heavy_hitters": list(run.heavy_hitters), "seconds": round(run.seconds, 3)}
                     for j, run in enumerate(runs)],
        })
    return {
        "library": pipelinedp_rival.library_version(),
        "backend": "LocalBackend",
        "strategy": pipelinedp_rival.STRATEGY,
        "contribution": "one item per user, drawn by local frequency with the run's keyed uniform "
                        "(the draw of TrieHH's vote); max_partitions_contributed = 1",
        "configurations": by_epsilon,
    }


def write_evaluation_json(result: dict, path: str) -> str:
    """Writes the result as indented UTF-8 JSON (via ``FileSystems``); returns the path."""
    import json

    from apache_beam.io.filesystems import FileSystems

    data = (json.dumps(result, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    with FileSystems.create(path, compression_type="uncompressed") as f:
        f.write(data)
    return path
