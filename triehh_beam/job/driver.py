"""The multi-round driver, which holds no Beam logic of its own: a census job counts the distinct
users n; the plan (``planning``: theta and m for the target, an infeasible one refused) and the
secret seed are committed, and the spend charged to the population's ledger, before any round
runs, so nothing is released before the budget is recorded (the plan's epsilon covers all L
rounds, since where the data stops the loop cannot be known in advance); then one Beam job per
round, on the round loop of ``protocol.rounds`` (the simulation's), each round's result read
back through ``FileSystems`` and committed as a new state object before it is announced; last
the private operator report (every count) into the state directory and the publishable outputs
(``outputs``: ``heavy_hitters.json`` and ``trie.pb``, no count, never the seed); progress
shows exact counts only with ``verbose``, marked private. Every job
uses the same ``PipelineOptions``, and re-running on the same state directory resumes after the
last committed round with the same seed, drawing exactly the samples an unbroken run would.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time
import uuid
from typing import Callable, Dict, List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

import apache_beam as beam

from triehh_beam.job import cas
from triehh_beam.job import input_files
from triehh_beam.job import lease as lease_lib
from triehh_beam.job import ledger as ledger_lib
from triehh_beam.job import outputs
from triehh_beam.job.config import DiscoveryConfig
from triehh_beam.job.input_files import InputChangedError
from triehh_beam.job.planning import InfeasiblePlanError, PopulationError, plan_for_census
from triehh_beam.protocol import planner
from triehh_beam.beam import runners, transforms
from triehh_beam.beam.read import (
    RECORDS_TAG,
    REJECTED_TAG,
    UNREADABLE_TAG,
    WriteDeadLetters,
)
from triehh_beam.io.drops import bad_fraction, describe_drops
from triehh_beam.io.schema import RecordFormatError
from triehh_beam.protocol import rounds
from triehh_beam.protocol.rounds import RoundResult
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.sampling import Sampler
from triehh_beam.job.state_store import MANIFEST_NAME, StateStore
from triehh_beam.protocol.trie import Trie

__all__ = [
    "BadInputError",
    "build_census",
    "build_round",
    "submit_job_graphs",
    "ConfigMismatchError",
    "DiscoveryConfig",
    "DiscoveryResult",
    "InfeasiblePlanError",
    "InputChangedError",
    "PopulationError",
    "StateLocationError",
    "check_state_location",
    "run_discovery",
]



class BadInputError(ValueError):
    """More of the input is bad than the job allows (``max_bad_fraction``)."""


class ConfigMismatchError(ValueError):
    """A resumed job was started with different inputs or parameters than its state holds."""


class StateLocationError(ValueError):
    """A job's private state sits inside the published output (the old default, OUTPUT/state)."""


def check_state_location(config: DiscoveryConfig) -> None:
    """Refuses an output directory that holds a job's state (and so its secret seed).

    Releases before 0.2 kept the state in ``OUTPUT/state`` by default. Such a job resumes once
    its state directory is moved out of the output (its default ledger moves with it).

    Raises:
      StateLocationError: one line naming the directory and where to move it.
    """
    legacy = config.legacy_state_dir
    if FileSystems.exists(FileSystems.join(legacy, MANIFEST_NAME)):
        raise StateLocationError(
            f"{legacy} holds a job's private state (its secret seed) inside the output; move it "
            f"out to {config.resolved_state_dir} (mv, or gcloud storage mv on gs://) and re-run "
            "the same command to resume it"
        )


@dataclasses.dataclass(frozen=True)
class DiscoveryResult:
    heavy_hitters: List[str]
    frequent_prefixes: List[str]
    rounds_run: int
    stop_reason: str
    plan: state_pb2.PrivacyPlan
    output_path: str
    resumed_from_round: Optional[int]
    report_path: str = ""  # the private operator report, in the state directory


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_single_output(prefix: str) -> bytes:
    with FileSystems.open(prefix, compression_type="uncompressed") as f:
        return f.read()


def _job_counters(result) -> Dict[str, int]:
    counters = {}
    query = result.metrics().query(MetricsFilter().with_namespace(transforms.METRICS_NAMESPACE))
    for counter in query["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + int(value or 0)
    return counters


def build_census(pipeline: beam.Pipeline, config: DiscoveryConfig, sampler: Sampler, output_path: str) -> None:
    """Adds the census job to ``pipeline``: the number of distinct users and the number of
    records they were counted over, written as one JSON line ``{"users", "records"}``.

    The files that cannot be read are written as JSON lines ``[file, message]`` to
    ``unreadable_path(output_path)``, for the driver to refuse them before any round. With
    ``config.dead_letter``, the census (the one job that reads every record before any round)
    also writes the rejected rows there.
    """
    outputs = pipeline | "ReadRecords" >> config.read_transform(
        dead_letter=bool(config.dead_letter)
    ).with_unreadable_output()
    if config.dead_letter:
        outputs[REJECTED_TAG] | "WriteDeadLetters" >> WriteDeadLetters(config.dead_letter)
    (
        outputs[UNREADABLE_TAG]
        | "UnreadableToJson" >> beam.Map(lambda unreadable: json.dumps(list(unreadable)))
        | "WriteUnreadable"
        >> beam.io.WriteToText(unreadable_path(output_path), num_shards=1, shard_name_template="")
    )
    records = outputs[RECORDS_TAG] | "DropZeroCounts" >> beam.ParDo(transforms.DropZeroCountsDoFn())
    counted = (
        records
        | "RowsPerBatch" >> beam.Map(lambda batch: batch.num_rows).with_output_types(int)
        | "CountRecords" >> beam.CombineGlobally(sum).with_output_types(int)
    )
    (
        records
        | "CountDistinctUsers" >> transforms.CountDistinctUsers(sampler)
        | "Format" >> beam.Map(_census_json, records=beam.pvalue.AsSingleton(counted))
        | "Write" >> beam.io.WriteToText(output_path, num_shards=1, shard_name_template="")
    )


def _census_json(users: int, records: int) -> str:
    return json.dumps({"users": users, "records": records})


def unreadable_path(census_output_path: str) -> str:
    """Where ``build_census`` (or ``build_round``) writes the files it could not read."""
    return census_output_path + ".unreadable.jsonl"


def _refuse_unreadable(lines: bytes) -> None:
    """Raises RecordFormatError naming every file the census could not read (none: returns)."""
    messages = sorted(json.loads(line)[1] for line in lines.decode("utf-8").splitlines() if line)
    if len(messages) == 1:
        raise RecordFormatError(messages[0])
    if messages:
        raise RecordFormatError(f"{len(messages)} files cannot be read: " + "; ".join(messages))


def build_round(
    pipeline: beam.Pipeline,
    config: DiscoveryConfig,
    sampler: Sampler,
    plan: state_pb2.PrivacyPlan,
    frontier,
    round_index: int,
    output_path: str,
    population: Optional[int],
) -> None:
    """Adds round ``round_index`` to ``pipeline``: the kept prefixes, written as one JSON line.

    ``population`` enables the one-pass rank prefilter (None: every record is a candidate).
    Files that cannot be read are written as ``build_census`` writes them, to
    ``unreadable_path(output_path)``, so that the driver refuses them in one line on any runner
    (a worker raising would print its traceback on a multi-process runner).
    """
    encoder = config.encoder
    read = pipeline | "ReadRecords" >> config.read_transform().with_unreadable_output()
    (
        read[UNREADABLE_TAG]
        | "UnreadableToJson" >> beam.Map(lambda unreadable: json.dumps(list(unreadable)))
        | "WriteUnreadable"
        >> beam.io.WriteToText(unreadable_path(output_path), num_shards=1, shard_name_template="")
    )
    (
        read[RECORDS_TAG]
        | "DropZeroCounts" >> beam.ParDo(transforms.DropZeroCountsDoFn())
        | f"RunRound({round_index})"
        >> transforms.RunRound(
            sampler,
            round_index,
            sample_size=plan.batch_size,
            theta=plan.theta,
            encoder=encoder,
            frontier=frontier,
            population=population,
            truncate=config.truncate_long_items,
        )
        | "ToJson" >> beam.Map(outputs.round_result_to_json, encoder=encoder)
        | "Write" >> beam.io.WriteToText(output_path, num_shards=1, shard_name_template="")
    )


def submit_job_graphs(
    config: DiscoveryConfig, options: PipelineOptions, population: int, seed: Optional[bytes] = None
) -> List:
    """Builds and submits the census and every round's job, without reading anything back.

    For a runner's offline validation (``--runner=DataflowRunner --dry_run=True`` translates each
    graph into a job description and stops): the driver proper cannot run there, since it reads
    each job's output. Round graphs use the plan for ``population`` and the round-1 frontier
    (the graph's shape does not depend on the frontier). Returns the pipeline results.
    """
    if not options.get_all_options().get("dry_run"):
        # A real run here would draw samples with no plan committed and no ledger charge.
        raise ValueError(
            "submit_job_graphs only validates graphs: give a runner option that submits nothing "
            "(--dry_run=True); run_discovery runs jobs"
        )
    plan = planner.plan(population, config.epsilon, config.delta, config.max_length, rule=config.rule)
    if not plan.feasible:
        raise InfeasiblePlanError(plan)
    recorded = state_pb2.PrivacyPlan(theta=plan.theta, batch_size=plan.batch_size, population=population)
    sampler = Sampler(seed or os.urandom(32), config.sampling_identity())
    scratch = FileSystems.join(config.resolved_state_dir, "graphs")
    results = []
    census = runners.make_pipeline(options)
    build_census(census, config, sampler, FileSystems.join(scratch, "population.txt"))
    results.append(census.run())
    for round_index in range(1, config.max_length + 1):
        pipeline = runners.make_pipeline(options)
        output = FileSystems.join(scratch, f"round-{round_index:04d}.json")
        build_round(pipeline, config, sampler, recorded, frozenset({()}), round_index, output, population)
        results.append(pipeline.run())
    return results


class _Driver:
    def __init__(
        self,
        config: DiscoveryConfig,
        options: PipelineOptions,
        progress: Callable[[str], None],
        events: Optional[Callable[[dict], None]],
    ):
        self.config = config
        self.options = options
        self.progress = progress
        self.events = events
        self.encoder = config.encoder
        check_state_location(config)
        self.store = StateStore(config.resolved_state_dir)
        self.ledger = ledger_lib.Ledger(config.resolved_ledger_dir, config.budget)

    def _say(self, event: str, message: str, private: Optional[Tuple[str, dict]] = None, **fields) -> None:
        """One progress line for people, and the same as a structured event for machines.

        ``private`` is (text, figures) of exact counts: shown only with ``config.verbose``,
        the text appended in brackets after "private:", the figures under the event's
        ``private`` key.
        """
        if private is not None and self.config.verbose:
            text, figures = private
            message = f"{message} [private: {text}]"
            fields = {**fields, "private": figures}
        self.progress(message)
        if self.events is not None:
            self.events({"event": event, "time": _now(), "message": message, **fields})

    # ---- jobs -------------------------------------------------------------------------------

    def _run_job(self, build: Callable[[beam.Pipeline], None]) -> Dict[str, int]:
        pipeline = runners.make_pipeline(self.options)
        build(pipeline)
        result = pipeline.run()
        result.wait_until_finish()
        return _job_counters(result)

    def census(self, sampler: Sampler) -> Tuple[int, Dict[str, int], state_pb2.InputSnapshot]:
        """(distinct users, the job's counters: records read and dropped per reason, what it
        read: the files, as listed before and after the job, and the records counted).

        Raises RecordFormatError naming every input file that cannot be read, and
        InputChangedError when the input changed while the census read it.
        """
        before = input_files.snapshot(self.config.input_pattern)
        path = FileSystems.join(self.config.resolved_state_dir, "census", f"population-{uuid.uuid4().hex}.txt")
        counters = self._run_job(lambda p: build_census(p, self.config, sampler, path))
        unreadable = _read_single_output(unreadable_path(path))
        census = json.loads(_read_single_output(path))
        FileSystems.delete([path, unreadable_path(path)])
        _refuse_unreadable(unreadable)  # before any round: a job reads every file or none
        change = input_files.first_change(before, input_files.snapshot(self.config.input_pattern))
        if change is not None:
            raise InputChangedError(f"the input changed while the census read it: {change}; no round was run")
        read = state_pb2.InputSnapshot(files=before, records=census["records"])
        return census["users"], counters, read

    def check_input(self, state: state_pb2.JobState, when: str) -> None:
        """Refuses (InputChangedError) input that is not the files the census read, unchanged."""
        if not state.HasField("input_snapshot"):
            raise InputChangedError(
                f"{self.store.root} holds a job that did not record what its census read; it cannot "
                "be resumed safely, start a new job in another output/state directory"
            )
        try:
            current = input_files.snapshot(self.config.input_pattern)
        except FileNotFoundError as e:
            raise InputChangedError(f"the input changed since the census {when}: {e}") from None
        change = input_files.first_change(state.input_snapshot.files, current)
        if change is not None:
            raise InputChangedError(
                f"the input changed since the census {when}: {change}; refusing (the privacy plan "
                "holds only for the population the census counted)"
            )

    def _check_round_read(self, state: state_pb2.JobState, round_index: int, result: RoundResult) -> None:
        """Refuses a round that did not rank exactly the records the census counted."""
        expected = state.input_snapshot.records
        if result.records_ranked != expected:
            raise InputChangedError(
                f"round {round_index} ranked {result.records_ranked:,} records where the census "
                f"counted {expected:,}: the input changed under the job; nothing of the round was kept"
            )
        self.check_input(state, f"(after round {round_index} read it)")

    def run_round(self, state: state_pb2.JobState, trie: Trie, round_index: int):
        """Runs round ``round_index`` on ``trie``'s frontier: (kept prefixes, the job's counters).

        A sample that came up short (the rank prefilter kept too few users, odds about 1e-12)
        is a value in the round's result, decided here: the round is re-run without the
        prefilter, which draws the same, complete sample. Nothing of the short run is kept.
        """

        def attempt(population: Optional[int]) -> Tuple[RoundResult, Dict[str, int]]:
            path = FileSystems.join(
                self.config.resolved_state_dir, "rounds", f"round-{round_index:04d}-kept-{uuid.uuid4().hex}.json"
            )
            counters = self._run_job(lambda p: build_round(
                p, self.config, Sampler(state.secret_seed, state.sampling_identity.encode()), state.plan, trie.frontier(), round_index, path,
                population=population,
            ))
            unreadable = _read_single_output(unreadable_path(path))
            result = outputs.round_result_from_json(_read_single_output(path), self.encoder)
            FileSystems.delete([path, unreadable_path(path)])
            try:
                _refuse_unreadable(unreadable)
            except RecordFormatError as e:
                raise InputChangedError(
                    f"round {round_index}: input the census read is now unreadable: {e}; nothing of "
                    "the round was kept"
                ) from None
            self._check_round_read(state, round_index, result)  # before anything of it is used
            return result, counters

        # The prefilter's cutoff is for the users the census counted (n may be a public N).
        result, counters = attempt(state.census_counters.get("distinct_users") or state.plan.population)
        if result.sample_short:
            self._say(
                "prefilter_retry",
                f"round {round_index}: rank prefilter too tight, re-running without it",
                round=round_index,
            )
            result, counters = attempt(None)
        return list(result.kept), counters

    # ---- the loop ---------------------------------------------------------------------------

    def _new_state(self) -> state_pb2.JobState:
        config = self.config
        seed = config.seed or os.urandom(32)
        # Keyed by the job's identity too: another job given the same seed file samples
        # independently; recorded, so a resume keys its rounds exactly as this run did.
        identity = config.sampling_identity()
        sampler = Sampler(seed, identity)
        self._say("census_start", f"census: counting distinct users in {config.input_pattern}",
                  input=config.input_pattern)
        started = time.monotonic()
        population, counters, read = self.census(sampler)
        self._say(
            "census_done",
            f"census: done, {time.monotonic() - started:.1f} s",
            private=(f"{population:,} users; {describe_drops(counters)}",
                     {"population": population, "input": counters}),
        )
        counters = {**counters, "distinct_users": population}
        bad = bad_fraction(counters)
        if config.max_bad_fraction is not None and bad > config.max_bad_fraction:
            raise BadInputError(
                f"{bad:.2%} of the records are bad, more than --max-bad-fraction "
                f"{config.max_bad_fraction:.2%} ({describe_drops(counters)}); no round was run"
            )
        plan = plan_for_census(config, population)
        state = state_pb2.JobState(
            job_id=uuid.uuid4().hex,
            secret_seed=seed,
            sampling_identity=identity.decode("ascii"),
            input=config.input_spec(),
            plan=plan,
            truncate_long_items=config.truncate_long_items,
            trie=Trie.empty(self.encoder).to_proto(),
            created_at=_now(),
            census_counters=counters,
            ledger=config.resolved_ledger_dir,
            input_snapshot=read,
        )
        # Budget before release: the spend is durable before any round runs.
        self.store.commit(state)
        return state

    def _check_resumable(self, state: state_pb2.JobState) -> None:
        mismatches = self.config.resume_mismatches(state, Trie.from_proto(state.trie).encoder)
        if mismatches:
            raise ConfigMismatchError(
                f"{self.store.root} holds a job with a different "
                + ", ".join(mismatches)
                + "; use another output/state directory for a new job"
            )

    # ---- lease and ledger ---------------------------------------------------------------------

    def _charge(self, state: state_pb2.JobState) -> None:
        """Records the job's spend in the population's ledger (once per job), before round 1."""
        plan = state.plan
        details = {
            "job_id": state.job_id,
            "time": _now(),
            "input": state.input.file_pattern,
            "state_dir": self.config.resolved_state_dir,
            "population": plan.population,
            "theta": plan.theta,
            "batch_size": plan.batch_size,
            "max_length": plan.max_length,
            "rule": plan.rule,
            "target_epsilon": plan.target_epsilon,
            "target_delta": plan.target_delta,
        }
        if plan.no_guarantee:
            self.ledger.charge_unbounded(state.job_id, details)
        else:
            self.ledger.charge(state.job_id, ledger_lib.Spend(plan.epsilon, plan.delta), details)

    def prepare_state_dir(self) -> None:
        """Makes a local state directory owner-only (0700) before anything is written there,
        with the subdirectories where Beam writes each job's output."""
        root = self.config.resolved_state_dir
        for private in (root, FileSystems.join(root, "census"), FileSystems.join(root, "rounds")):
            cas.make_private_dir(private)

    def run(self) -> DiscoveryResult:
        self.prepare_state_dir()
        with lease_lib.StateLease(self.config.resolved_state_dir, self.config.lease_seconds) as held:
            self._lease = held
            return self._run()

    def _run(self) -> DiscoveryResult:
        state = self.store.load()
        resumed_from = None
        if state is None:
            # Refused before any record is read if the target does not fit the budget.
            self.ledger.check(ledger_lib.Spend(self.config.epsilon, self.config.delta))
            state = self._new_state()
        else:
            self._check_resumable(state)
            resumed_from = state.rounds_completed
            self._say(
                "resume",
                f"resuming job {state.job_id[:8]} after round {state.rounds_completed}"
                + (" (finished)" if state.finished else ""),
                job_id=state.job_id,
                rounds_completed=state.rounds_completed,
                finished=state.finished,
            )
        plan = state.plan
        self._say(
            "plan", f"plan: {outputs.describe_published_plan(plan)}",
            private=None if outputs.population_is_public(plan)
            else (outputs.describe_plan(plan), outputs.plan_document(plan)),
            **outputs.published_plan_document(plan),
        )
        # Budget before release: charged (once per job) before any round can release anything.
        self._charge(state)
        trie = Trie.from_proto(state.trie)
        step = rounds.next_round(trie, plan.max_length)
        if not state.finished and isinstance(step, rounds.Stop):
            state = self._finish(state, step.describe())  # a state committed before its stop
        if not state.finished:
            # Once per run, before its first round: a resumed job refuses changed input before
            # reading it. Each round checks again after it read the input (``_check_round_read``),
            # which is also the next round's "before".
            self.check_input(state, f"(before round {step.index})")
        while not state.finished:
            round_index, frontier = step.index, step.frontier
            started = time.monotonic()
            kept, counters = self.run_round(state, trie, round_index)
            elapsed = time.monotonic() - started
            trie, step = rounds.apply_round(trie, step, kept, plan.max_length)
            state = state_pb2.JobState.FromString(state.SerializeToString())
            state.rounds.add(
                round_index=round_index,
                frontier_size=len(frontier),
                prefixes_kept=len(kept),
                counters=counters,
                elapsed_seconds=elapsed,
            )
            if kept:
                state.trie.CopyFrom(trie.to_proto())
                state.rounds_completed = round_index
            if isinstance(step, rounds.Stop):
                state.finished = True
                state.stop_reason = step.describe()
            self.store.commit(state)
            # Announced only once committed: a run killed after this line resumes after it.
            self._say(
                "round",
                f"round {round_index}/{plan.max_length}: frontier {len(frontier):,}, "
                f"kept {len(kept):,} prefixes, {elapsed:.1f} s",
                private=(f"users sampled {counters.get('users_sampled', 0):,}, "
                         f"votes {counters.get('votes_cast', 0):,}", {"metrics": counters}),
                round=round_index,
                max_rounds=plan.max_length,
                frontier_size=len(frontier),
                prefixes_kept=len(kept),
                elapsed_seconds=round(elapsed, 3),
            )
            self._lease.renew()
        report_path = outputs.write_operator_report(
            self.config.resolved_state_dir, state, self.config.output_dir)
        output_path = self._write_outputs(state, trie)
        return DiscoveryResult(
            heavy_hitters=list(trie.heavy_hitters()),
            frequent_prefixes=list(trie.frequent_prefixes()),
            rounds_run=len(state.rounds),
            stop_reason=state.stop_reason,
            plan=state.plan,
            output_path=output_path,
            resumed_from_round=resumed_from,
            report_path=report_path,
        )

    def _write_outputs(self, state: state_pb2.JobState, trie: Trie) -> str:
        return outputs.write_outputs(self.config.output_dir, state, trie)

    def _finish(self, state, reason: str):
        state = state_pb2.JobState.FromString(state.SerializeToString())
        state.finished = True
        state.stop_reason = reason
        self.store.commit(state)
        return state


def run_discovery(
    config: DiscoveryConfig,
    options: Optional[PipelineOptions] = None,
    progress: Callable[[str], None] = lambda line: None,
    events: Optional[Callable[[dict], None]] = None,
) -> DiscoveryResult:
    """Runs (or resumes) a whole discovery; see the module docstring.

    Args:
      config: the job.
      options: Beam pipeline options for every job (default: the in-process runner).
      progress: called with one human-readable line per step.
      events: called with the same steps as dicts (``event``, ``time``, ``message`` and the
        step's figures: plan, per-round Beam metrics), e.g. to log JSON lines.

    Raises:
      InfeasiblePlanError: the privacy target cannot be met for the counted population.
      ConfigMismatchError: the state directory holds a different job.
      StateError: the state directory is corrupt.
    """
    return _Driver(config, options or PipelineOptions([]), progress, events).run()
