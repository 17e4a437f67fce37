"""The runs of one evaluation configuration, on either engine: the real pipeline
(``driver.run_discovery`` in a scratch output per run, the run's fixed evaluation release keying
its draws) or the keyed simulation, which redraws the pipeline's samples for the same seed and, given
the same work directory, the same job identity. TrieHH and TrieHH++ runs grow a trie
(``TrieRun``); a whole-item release publishes items with counts (``WholeItemRun``)."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

from triehh_beam.evaluation.config import EvaluationConfig
from triehh_beam.evaluation.run_keys import evaluation_release
from triehh_beam.protocol.protocols import Protocol

__all__ = ["TrieRun", "WholeItemRun", "pipeline_runs", "run_identities", "simulate_trie_runs",
           "simulate_whole_item_runs"]

# The scratch output of a run, by protocol: its path is part of the job identity that keys the
# run's draws, so the simulate engine given the same work directory names it the same way.
_OUTPUT_PREFIX = {Protocol.TRIEHH: "", Protocol.TRIEHH_PP: "pp-", Protocol.WHOLE_ITEMS: "st-"}


@dataclasses.dataclass(frozen=True)
class TrieRun:
    """One TrieHH or TrieHH++ run: what it found, how its trie grew, its time and population."""

    heavy_hitters: Tuple[str, ...]
    frequent_prefixes: Tuple[str, ...]
    rounds: int
    level_sizes: Tuple[int, ...]
    seconds: float
    population: int


@dataclasses.dataclass(frozen=True)
class WholeItemRun:
    """One whole-item release: its items (sorted), their counts, its time and population."""

    heavy_hitters: Tuple[str, ...]
    counts: Mapping[str, int]
    seconds: float
    population: int


def _run_output(work_dir: str, protocol: Protocol, epsilon: float, unit_size: int, index: int) -> str:
    from apache_beam.io.filesystems import FileSystems

    units = "" if protocol is Protocol.WHOLE_ITEMS else f"-k{unit_size}"
    return FileSystems.join(work_dir, f"{_OUTPUT_PREFIX[protocol]}eps{epsilon:g}{units}-run{index}")


def _discovery_config(config: EvaluationConfig, protocol: Protocol, unit_size: int, epsilon: float,
                      seed: bytes, out: str):
    """The ``DiscoveryConfig`` of one pipeline-engine run (its identity keys the run's draws)."""
    from triehh_beam.job.batch.driver import DiscoveryConfig

    extra = {"protocol": protocol.value, **({"rule": config.rule} if protocol is Protocol.TRIEHH else {})}
    if protocol.grows_trie:
        extra.update(unit_size=unit_size, truncate_long_items=config.truncate_long_items)
    return DiscoveryConfig(
        input_pattern=config.input_pattern, output_dir=out, epsilon=epsilon, delta=config.delta,
        max_length=config.max_length_for(unit_size), input_format=config.input_format, seed=seed,
        case_fold=config.case_fold, user_column=config.user_column, item_column=config.item_column,
        count_column=config.count_column or "", **extra)


def run_identities(config: EvaluationConfig, protocol: Protocol, unit_size: int, epsilon: float,
                   seeds: Sequence[bytes]) -> Optional[List[bytes]]:
    """The keyed identity of each run as the pipeline engine in ``config.work_dir`` keys it, or
    None without a work directory (the simulation then keys every run alike)."""
    if config.work_dir is None:
        return None
    return [evaluation_release(seed, _discovery_config(
        config, protocol, unit_size, epsilon, seed,
        _run_output(config.work_dir, protocol, epsilon, unit_size, index)).sampling_identity()).keyed_identity
        for index, seed in enumerate(seeds)]


def pipeline_runs(config: EvaluationConfig, protocol: Protocol, unit_size: int, epsilon: float,
                  seeds: Sequence[bytes], work_dir: str, options, on_run: Callable[[int], None]) -> list:
    """One ``driver.run_discovery`` per seed, each in its own scratch output (deleted after it is
    read): ``TrieRun``s, or ``WholeItemRun``s for the whole-item release."""
    from apache_beam.io.filesystems import FileSystems

    from triehh_beam.job.batch.driver import run_discovery
    from triehh_beam.protocol.rounds.trie import Trie

    runs = []
    for index, seed in enumerate(seeds):
        out = _run_output(work_dir, protocol, epsilon, unit_size, index)
        discovery = _discovery_config(config, protocol, unit_size, epsilon, seed, out)
        started = time.monotonic()
        result = run_discovery(discovery, options, release=evaluation_release(seed, discovery.sampling_identity()))
        seconds = time.monotonic() - started
        if protocol.grows_trie:
            with FileSystems.open(FileSystems.join(out, "trie.pb"), compression_type="uncompressed") as f:
                trie = Trie.from_bytes(f.read(), source="trie.pb")
            runs.append(TrieRun(tuple(sorted(result.heavy_hitters)), tuple(sorted(result.frequent_prefixes)),
                                result.rounds_run, tuple(len(level) for level in trie.levels), seconds,
                                result.plan.population))
        else:
            with FileSystems.open(result.output_path, compression_type="uncompressed") as f:
                counts = {entry["item"]: entry["count"] for entry in json.loads(f.read())["released"]}
            runs.append(WholeItemRun(tuple(sorted(counts)), counts, seconds, result.plan.population))
        FileSystems.delete([out])
        on_run(index)
    return runs


def simulate_trie_runs(users, encoder, protocol: Protocol, plan, seeds: Sequence[bytes], truncate: bool,
                       on_run: Callable[[int], None], identities: Optional[Sequence[bytes]] = None
                       ) -> List[TrieRun]:
    """The keyed simulation's TrieHH (or TrieHH++) runs; with ``identities`` (one per seed), each
    run is keyed as the pipeline engine's run with the same seed and work directory is."""
    from triehh_beam.reference import simulation

    if protocol is Protocol.TRIEHH_PP:
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
        results = simulate_many(users, encoder, seeds_with_progress(), sampling="keyed", too_long=too_long)
    else:
        results = []
        for index, seed in enumerate(seeds):
            started = time.monotonic()
            results.extend(simulate_many(users, encoder, [seed],
                                         sampling="keyed", too_long=too_long, identity=identities[index]))
            timings.append(time.monotonic() - started)
            on_run(index)
    return [TrieRun(tuple(sorted(result.heavy_hitters)),
                    tuple(sorted(encoder.decode(p) for p in result.frequent_prefixes)),
                    result.rounds_run, tuple(len(level) for level in result.levels), seconds, result.n_users)
            for result, seconds in zip(results, timings + [0.0] * (len(results) - len(timings)))]


def simulate_whole_item_runs(users, encoder, plan, seeds: Sequence[bytes], on_run: Callable[[int], None],
                             identities: Optional[Sequence[bytes]] = None) -> List[WholeItemRun]:
    """The keyed simulation's whole-item releases, one per seed, keyed as ``simulate_trie_runs``'s."""
    from triehh_beam.reference.whole_items import simulate_many_whole_items

    runs = []
    for index, seed in enumerate(seeds):
        identity = b"" if identities is None else identities[index]
        started = time.monotonic()
        [result] = simulate_many_whole_items(users, encoder, plan.sampling_probability, plan.tau, [seed], identity)
        runs.append(WholeItemRun(tuple(sorted(result.items)), dict(result.items), time.monotonic() - started,
                                 result.n_users))
        on_run(index)
    return runs
