"""Running one Beam job of a discovery (``JobRunner``): build its graph, run it on the job's
runner, report its progress while it runs (``progress``: a line to show in place about every
second, and a ``progress`` event every ``PROGRESS_EVENT_SECONDS``; rows done are counts, shown
only with ``verbose``, marked private), and read its counters back, which the driver records
(``job_counters``; one-job runs name them per round, ``round3.votes_cast``, which
``split_round_counters`` splits). ``take_census`` runs the census job and reads back what it
counted and read; ``submit_job_graphs`` submits every graph of a discovery to a runner that only
validates graphs.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Callable, Dict, List, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam import held, runners
from triehh_beam.beam.census import Census
from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.samples.candidates import CandidateBounds
from triehh_beam.job.batch import graphs, levels
from triehh_beam.job.batch.candidate_bounds import candidate_bounds
from triehh_beam.job.batch.graphs import build_sampled_round
from triehh_beam.job.release import planning
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.settings import input_files, sources
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state import progress as progress_lib
from triehh_beam.job.state.cas import make_private_dir
from triehh_beam.job.state.clock import now_iso
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.randomness.sampling import PassKeys, Sampler, users_required

__all__ = [
    "JobRunner",
    "PROGRESS_EVENT_SECONDS",
    "job_counters",
    "job_wide_counters",
    "read_single_output",
    "split_round_counters",
    "submit_job_graphs",
    "take_census",
]

# Seconds between two progress events of a running job (``--log-format json``).
PROGRESS_EVENT_SECONDS = 2.0


def job_counters(result) -> Dict[str, int]:
    """A finished job's counters in the ``triehh`` namespace, by name, and the largest value of
    each distribution there as ``largest_<name>`` (``largest_rows_held``: ``beam.held``), but each
    worker's peak memory as itself (``worker_peak_rss_mb.<host>:<pid>``, in MB: ``beam.held``)."""
    counters: Dict[str, int] = {}
    query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    for counter in query["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + int(value or 0)
    for distribution in query["distributions"]:  # the most rows one step held (``beam.held``)
        value = distribution.committed if distribution.committed is not None else distribution.attempted
        if value is not None and value.count:
            name = distribution.key.metric.name
            if not name.startswith(f"{held.PEAK_METRIC}."):  # a worker's peak keeps its name
                name = f"largest_{name}"
            counters[name] = max(counters.get(name, 0), int(value.max))
    return counters


def read_single_output(path: str) -> bytes:
    """The bytes of a job's one output file (``WriteToText(..., num_shards=1)``)."""
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()


def take_census(config: DiscoveryConfig, jobs: "JobRunner", sampler: Sampler,
                candidates: Optional[Tuple[PassKeys, CandidateBounds, str]] = None,
                clear_stale_spills: bool = False,
                ) -> Tuple[Census, Dict[str, int], state_pb2.InputSnapshot]:
    """Runs the census job: (what it counted: the distinct users and those without a usable
    item; the job's counters: records read and dropped per reason, items too long; what it
    read: the files, listed before and after the job, or the instant a BigQuery table is read
    as of (``sources.pin``), and the records counted). Its output, private, is written to the
    state directory and deleted once read, or once the job failed. With ``candidates`` (the
    pass keys, the candidate bounds and a files prefix), the same read also writes every round's
    candidates there (``graphs.build_first_pass``). The census spills its fingerprints (keyed
    pseudonyms of users) to ``levels.census_spill_dir``, deleted once the job ends, whether it
    succeeded or raised. ``clear_stale_spills``: first delete the spills a killed run left, for a
    caller that holds the state directory's lease (a discovery), so that no other run's live
    spill is deleted under it.

    Raises:
      RecordFormatError: naming every input file that cannot be read.
      InputChangedError: the input changed while the census read it.
    """
    sources.check_credentials(config, jobs.options)  # a table or query: before anything is read
    before = sources.pin(config)
    path = FileSystems.join(config.resolved_state_dir, "census", f"population-{uuid.uuid4().hex}.txt")
    estimate, exact = None, False
    if jobs.reporting and before.files:  # a table or query: no total, the time elapsed only
        estimate, exact = progress_lib.estimate_records(before.files, config.input_format)
    as_of = sources.pinned_at(before)
    if clear_stale_spills:
        levels.clear_census_spills(config.resolved_state_dir)
    spill = levels.census_spill_dir(config.resolved_state_dir)
    build = lambda p, reported: graphs.build_first_read(p, config, sampler, path, candidates, reported,
                                                       as_of_millis=as_of, census_spill=spill)
    try:
        make_private_dir(os.path.dirname(spill))  # census/: os.makedirs would give it the umask's mode
        make_private_dir(spill)
        counters = jobs.run(build, "census", estimate, estimated=not exact)
        unreadable = read_single_output(graphs.unreadable_path(path))
        counted, records = graphs.census_from_json(read_single_output(path))
    finally:
        levels.delete_tree(spill)
        written = [p for p in (path, graphs.unreadable_path(path)) if FileSystems.exists(p)]
        if written:
            FileSystems.delete(written)
    graphs.refuse_unreadable(unreadable)  # before any round: a job reads every file or none
    change = sources.changed_since(config, before)
    if change is not None:
        raise input_files.InputChangedError(
            f"the input changed while the census read it: {change}; no round was run")
    before.records = records
    return counted, counters, before


def job_wide_counters(counters: Dict[str, int]) -> Dict[str, int]:
    """A job's counters that are of no one round: the most rows its steps held
    (``largest_rows_held...``) and its workers' peak memory (``worker_peak_rss_mb.<worker>``)."""
    return {name: value for name, value in counters.items()
            if name.startswith((f"largest_{held.HELD_METRIC}", f"{held.PEAK_METRIC}."))}


def split_round_counters(counters: Dict[str, int]) -> Dict[int, Dict[str, int]]:
    """A one-job run's counters, ``round3.votes_cast`` and the like, split by round."""
    by_round: Dict[int, Dict[str, int]] = {}
    for name, value in counters.items():
        head, _, metric = name.partition(".")
        if metric and head.startswith("round") and head[5:].isdigit():
            by_round.setdefault(int(head[5:]), {})[metric] = value
    return by_round


class JobRunner:
    """Runs a discovery's Beam jobs on one set of options, reporting their progress.

    Args:
      options: the pipeline options of every job.
      verbose: progress shows the rows done (private counts), marked private.
      ticks: called about every second while a job runs with a progress line, None when it ends.
      events: called every ``PROGRESS_EVENT_SECONDS`` while a job runs with a ``progress`` event.
      log_dir: the state directory, where Prism's own log lines go (``runners.make_pipeline``).
    """

    interval = 1.0  # seconds between two progress reports of a running job

    def __init__(self, options: PipelineOptions, verbose: bool,
                 ticks: Optional[Callable[[Optional[str]], None]],
                 events: Optional[Callable[[dict], None]], log_dir: Optional[str] = None):
        self._options = options
        self._verbose = verbose
        self._ticks = ticks
        self._events = events
        self._last_event = 0.0
        self._log_dir = log_dir

    @property
    def options(self) -> PipelineOptions:
        """The pipeline options of every job."""
        return self._options

    @property
    def reporting(self) -> bool:
        """Whether anyone listens to progress (else none is measured)."""
        return self._ticks is not None or self._events is not None

    def _report(self, progress: progress_lib.Progress) -> None:
        line = progress_lib.describe(progress, private=self._verbose)
        if self._ticks is not None:
            self._ticks(None if progress.finished else line)
        if self._events is None or progress.finished:
            return
        if progress.elapsed - self._last_event < PROGRESS_EVENT_SECONDS:
            return
        self._last_event = progress.elapsed
        fields = {"phase": progress.phase, "fraction": progress.fraction,
                  "elapsed_seconds": round(progress.elapsed, 3),
                  "remaining_seconds": None if progress.remaining is None else round(progress.remaining, 3),
                  "total_estimated": progress.estimated}
        if self._verbose:
            fields["private"] = {progress.unit: progress.done, "total": progress.total}
        self._events({"event": "progress", "time": now_iso(), "message": line, **fields})

    def run(self, build: Callable[[beam.Pipeline, Optional[str]], None], phase: str,
            total: Optional[int] = None, estimated: bool = False, unit: str = "records") -> Dict[str, int]:
        """Runs one job, ``build(pipeline, progress file or None)``; returns its counters.

        ``phase``, ``total``, ``estimated`` and ``unit`` describe its progress
        (``progress.Progress``): the rows its steps report, out of ``total``."""
        # Steps report rows through a local file: workers on this machine (the in-process
        # runner's threads or processes, Prism's loopback workers) can append to it, a remote
        # runner's cannot.
        local = runners.workers_on_this_machine(self._options)
        channel = progress_lib.ProgressChannel() if self.reporting and local else None
        try:
            pipeline = runners.make_pipeline(self._options, self._log_dir)
            build(pipeline, channel.path if channel is not None else None)
            self._last_event = 0.0
            monitor = (progress_lib.ProgressMonitor(phase, total, estimated, unit, self._report, channel,
                                                    interval=self.interval)
                       if self.reporting else contextlib.nullcontext())
            with monitor:
                result = pipeline.run()
                result.wait_until_finish()
        finally:
            if channel is not None:
                channel.close()
        return job_counters(result)


def submit_job_graphs(
    config: DiscoveryConfig, options: PipelineOptions, population: int, seed: Optional[bytes] = None
) -> List:
    """Builds and submits a fresh job's graphs (its one read: the census and the candidates; the
    cut of the candidates to samples; the rounds), without reading anything back.

    For a runner's offline validation (``--runner=DataflowRunner --dry_run=True`` translates each
    graph into a job description and stops): the driver proper cannot run there, since it reads
    each job's output. The graphs are the job's: the plan for ``population`` under its protocol
    (``planning.plan_for``), its deny list, and the round-1 frontier (a graph's shape does not
    depend on the frontier): with ``--rounds-per-job all``, the first read and one job that cuts
    the samples and runs every round; otherwise the first read, the cut and one job per round; with
    ``--protocol sample-threshold``, the census and the one release pass. Returns the pipeline
    results.

    Raises:
      ValueError: the options would run the graphs (no ``--dry_run=True``, or a runner other than
        Dataflow's, which ignores it): samples would be drawn with no plan committed and no
        ledger charge.
    """
    all_options = options.get_all_options()
    runner = str(all_options.get("runner") or "")
    if not all_options.get("dry_run") or "Dataflow" not in runner:
        raise ValueError(
            "submit_job_graphs only validates graphs: give a runner that submits nothing "
            "(--runner=DataflowRunner --dry_run=True); run_discovery runs jobs"
        )
    if config.protocol.noises_rounds:  # its rounds are job.batch.noisy_rounds' graphs, not built here
        raise ValueError("submit_job_graphs does not build --protocol noisy-rounds's round graphs yet")
    recorded = planning.plan_for(config, population)
    sampler = Release.fresh(seed or os.urandom(32), config.sampling_identity()).sampler()
    as_of = sources.pinned_at(sources.pin(config))  # a table: read as of now, as a job's census would
    scratch = FileSystems.join(config.resolved_state_dir, "graphs")
    results = []
    census = runners.make_pipeline(options)
    grows_trie = planning.protocol_of(recorded).grows_trie
    keys = sampler.pass_keys(config.max_length)
    candidates = FileSystems.join(scratch, "candidates", "part")
    spill = FileSystems.join(scratch, "census-spill")  # as a run's census spills
    # The one read: the census, and a trie's candidates (as DiscoveryJob.new_state asks for them).
    graphs.build_first_read(census, config, sampler, FileSystems.join(scratch, "population.txt"),
                            (keys, candidate_bounds(config), candidates) if grows_trie else None,
                            as_of_millis=as_of, census_spill=spill)
    results.append(census.run())
    if not grows_trie:
        release = runners.make_pipeline(options)
        graphs.build_whole_item_release(release, config, sampler.pass_keys(1), recorded, population,
                                        FileSystems.join(scratch, "release.json"), as_of_millis=as_of)
        results.append(release.run())
        return results
    samples = FileSystems.join(scratch, "samples")
    # TrieHH's sample size; a Bernoulli sample (TrieHH++) has none to check.
    required = users_required(recorded.batch_size, population,
                              by_probability=planning.protocol_of(recorded).samples_by_probability)
    denied = frozenset() if config.deny is None else config.deny.sequences
    rounds_list = list(range(1, config.max_length + 1))
    one_job = config.rounds_per_job == "all"
    sampling = runners.make_pipeline(options)
    graphs.build_sampling_from_candidates(
        sampling, config, keys, recorded, candidates, population, samples, FileSystems.join(scratch, "sampling.json"),
        run_rounds_into=FileSystems.join(scratch, "levels") if one_job else None, denied=denied)
    results.append(sampling.run())
    if not one_job:
        for round_index in rounds_list:
            pipeline = runners.make_pipeline(options)
            output = FileSystems.join(scratch, f"round-{round_index:04d}.json")
            build_sampled_round(pipeline, config, samples, recorded, frozenset({()}), round_index, output,
                                users_required=required, records_ranked=None, denied=denied)
            results.append(pipeline.run())
    return results
