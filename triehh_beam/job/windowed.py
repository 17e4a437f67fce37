"""One private discovery per event-time window, as one Beam graph (streaming or bounded).

``build_windowed_discovery`` takes record batches already in the job's windows (after
``beam.windows.GateLateRecords``) and, per window: counts its distinct users and records (the
census), plans for that n and records the spend in the population's ledger (``_DecideDoFn``,
once per window: the ledger record's id names the stream and the window, so a retried bundle or
a restarted job is charged once), draws every round's sample in one pass and runs the L rounds
(``beam.windowed``), and writes the result (``_ReleaseDoFn``). A released window is written to
``OUTPUT/window=<start, RFC 3339 UTC>/`` as ``discover`` writes a job's output
(``heavy_hitters.json``, ``trie.pb``), then ``_RELEASED``, last: a reader takes a window
directory as released only once that marker exists. Its private operator report (every count)
goes to ``STATE/windows/window=<start>/operator_report.json``. A window whose target is
infeasible for its n, whose spend does not fit the lifetime budget, or that an earlier run
already released, releases nothing: the report says why. Nothing of a window below theta is
written anywhere (``PrefixCounter`` inside the rounds' combine). With ``--protocol triehh++``
each window's plan (and ledger record) is TrieHH++'s: its sample is the keyed Bernoulli sample
of p_s under the window's keys, and prefixes with at least tau votes are kept; an infeasible
target is refused before anything is read (its plan does not depend on n). With
``--estimate-frequencies`` each released window's plan (and its ledger charge, made before
anything of the window is sampled) includes epsilon_est, and after its rounds one more
per-window stage (``beam.windowed_estimates``) counts the window's records against its leaves
with the window's keys: its ``heavy_hitters.json`` carries the estimates as ``discover``'s does.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
from typing import List, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from triehh_beam.beam import transforms
from triehh_beam.beam.windowed import RunWindowRounds, SampleEachWindow, WindowPlan, results_by_round
from triehh_beam.beam.windowed_estimates import EstimateEachWindow
from triehh_beam.beam.windows import EventWindows, rfc3339, window_view
from triehh_beam.job import ledger as ledger_lib
from triehh_beam.job import outputs
from triehh_beam.job.config import DiscoveryConfig
from triehh_beam.job.config import TRIEHH_PP
from triehh_beam.job.planning import (InfeasiblePlanError, PopulationError, check_before_census, plan_for,
                                      plan_for_census)
from triehh_beam.proto import state_pb2
from triehh_beam.protocol import keyed_hash, parameters, rounds
from triehh_beam.protocol.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol.frequency_estimates import LEVEL, EstimateTargets, FrequencyEstimates
from triehh_beam.protocol.rounds import RoundResult
from triehh_beam.protocol.sampling import Sampler
from triehh_beam.protocol.trie import Trie

__all__ = [
    "RELEASED_MARKER",
    "WindowedJob",
    "build_windowed_discovery",
    "read_window_reports",
    "window_dir_name",
]

RELEASED_MARKER = "_RELEASED"
_LOG = logging.getLogger(__name__)


def window_dir_name(start_micros: int) -> str:
    return f"window={rfc3339(start_micros)}"


@dataclasses.dataclass(frozen=True)
class WindowedJob:
    """What every window of one windowed job shares.

    Attributes:
      config: the job's settings (``window`` set); the graph keeps a copy without the seed.
      stream_id: names the job in the ledger (``<stream_id>/window=<start>``) and its published
        windows: a key derived from the seed and the job's whole identity (input and output
        included) under its own purpose, so a restarted job finds its earlier charges, while
        another output, another input (a replay of a stream's hours) or another seed is another
        job, charged for its own releases. It reveals nothing of the sampling keys.
      windows: the job's ``EventWindows``.
    """

    config: DiscoveryConfig
    stream_id: str
    windows: EventWindows

    @classmethod
    def for_config(cls, config: DiscoveryConfig, seed: bytes) -> "WindowedJob":
        if config.window is None:
            raise ValueError("a windowed job needs --window")
        check_before_census(config)  # TrieHH++: an infeasible target is refused before any window
        Sampler(seed, config.window_identity())  # validates the seed
        name = keyed_hash.derive_key(seed, b"windowed-job-id", config.sampling_identity())
        stream_id = "stream-" + name[0].to_bytes(8, "little").hex() + name[1].to_bytes(8, "little").hex()
        windows = EventWindows(config.window * 1_000_000, config.allowed_lateness * 1_000_000)
        return cls(dataclasses.replace(config, seed=None), stream_id, windows)

    @property
    def state_root(self) -> str:
        return FileSystems.join(self.config.resolved_state_dir, "windows")

    def output_dir(self, start: int) -> str:
        return FileSystems.join(self.config.output_dir, window_dir_name(start))

    def report_path(self, start: int) -> str:
        return FileSystems.join(self.state_root, window_dir_name(start), outputs.OPERATOR_REPORT_NAME)

    def released(self, start: int) -> bool:
        return FileSystems.exists(FileSystems.join(self.output_dir(start), RELEASED_MARKER))

    @property
    def theta(self) -> int:
        """Every window's theta (TrieHH++: tau), fixed by the settings alone."""
        config = self.config
        if config.protocol == TRIEHH_PP:
            return plan_for(config, 0).theta
        if config.theta is not None:
            return config.theta
        return parameters.rule_theta(config.rule, config.epsilon, config.delta, config.max_length)

    @property
    def sample_probability(self) -> Optional[float]:
        """TrieHH++'s p_s, every window's (it does not depend on n); None for TrieHH."""
        if self.config.protocol != TRIEHH_PP:
            return None
        return plan_for(self.config, 0).sample_probability


def _records_in(batch) -> int:
    return batch.num_rows


class _DecideDoFn(beam.DoFn):
    """A window's census -> its ``WindowPlan``: the plan for its n and, before anything of the
    window is sampled, its spend recorded in the ledger."""

    def __init__(self, job: WindowedJob):
        self._job = job

    def process(self, users: int, records: int, beam_window=beam.DoFn.WindowParam):
        job, config = self._job, self._job.config
        start = job.windows.start_of_window(beam_window)
        def withheld(reason: str, detail: Optional[str] = None) -> WindowPlan:
            return WindowPlan(start, False, users, records, reason=reason, detail=detail)

        if job.released(start):
            yield withheld("an earlier run already released this window; it is never released twice")
            return
        try:
            plan = plan_for_census(config, users)
        except (InfeasiblePlanError, PopulationError) as e:
            yield withheld("no private release: the target is infeasible for this window's population "
                           "(its operator report has the planner's reason)", f"{users:,} users: {e}")
            return
        if plan.theta != job.theta:
            raise AssertionError(f"the plan's theta {plan.theta} is not the graph's {job.theta}")
        probability = job.sample_probability
        if probability is not None and plan.sample_probability != probability:
            raise AssertionError(f"the plan's p_s {plan.sample_probability} is not the graph's {probability}")
        details = {
            "window_start": rfc3339(start),
            "window_end": rfc3339(start + job.windows.size_micros),
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        ledger = ledger_lib.Ledger(config.resolved_ledger_dir, config.budget)
        try:
            ledger.charge_plan(f"{job.stream_id}/{window_dir_name(start)}", plan, details)
        except ledger_lib.BudgetExceededError as e:
            yield withheld(f"withheld: {e}")
            return
        yield WindowPlan(start, True, users, records, plan.theta, plan.batch_size,
                         sample_probability=plan.sample_probability if probability is not None else 0.0)


def _trie_of(job: WindowedJob, results: List[Tuple[int, RoundResult]]) -> Tuple[Trie, state_pb2.JobState]:
    """The window's trie from its rounds' results, and the state its documents describe."""
    config = job.config
    by_round = results_by_round(results)
    trie = Trie.empty(config.encoder)
    state = state_pb2.JobState(input=config.input_spec(), truncate_long_items=config.truncate_long_items)
    step = rounds.next_round(trie, config.max_length)
    while isinstance(step, rounds.NextRound):
        result = by_round.get(step.index, RoundResult((), 0))
        kept = list(result.kept)
        state.rounds.add(round_index=step.index, frontier_size=len(step.frontier), prefixes_kept=len(kept),
                         counters={"users_sampled": result.users_sampled})
        trie, step = rounds.apply_round(trie, step, kept, config.max_length)
    state.stop_reason = step.describe()
    state.finished = True
    state.trie.CopyFrom(trie.to_proto())
    return trie, state


def _leaves_of(results: List[Tuple[int, RoundResult]], job: WindowedJob) -> EstimateTargets:
    """A window's discovered leaves (its trie's heavy hitters and frequent prefixes), from its
    rounds' results: what its frequency estimates count."""
    return EstimateTargets.from_trie(_trie_of(job, results)[0])


def _released_estimates(job: WindowedJob, trie: Trie, estimates: List[FrequencyEstimates]
                        ) -> state_pb2.FrequencyEstimates:
    """A released window's estimates as its state records them (``write_outputs`` publishes
    them). A window whose trie has no leaf has no estimate step: it publishes an empty set of
    estimates, as ``discover`` does for a trie without leaves."""
    epsilon = job.config.estimate_frequencies
    if not estimates:
        if len(EstimateTargets.from_trie(trie)):
            raise AssertionError("a window with discovered leaves has no estimates")
        return state_pb2.FrequencyEstimates(epsilon=epsilon, half_width=TwoSidedGeometric(epsilon).half_width(LEVEL))
    if len(estimates) != 1 or estimates[0].targets != EstimateTargets.from_trie(trie):
        raise AssertionError("a window's estimates are not of its trie's leaves")
    return outputs.estimates_from_json(outputs.estimates_to_json(estimates[0], job.config.encoder),
                                       job.config.encoder)


class _ReleaseDoFn(beam.DoFn):
    """A window's plan and round results -> its published result (if released) and its private
    report; outputs one summary (private: it holds n) per window."""

    def __init__(self, job: WindowedJob):
        self._job = job

    def process(self, plan: WindowPlan, results, estimates=()):
        job, config = self._job, self._job.config
        start = plan.start
        report = {
            "private": outputs.PRIVATE_NOTE,
            "window_start": rfc3339(start),
            "window_end": rfc3339(start + job.windows.size_micros),
            "closed_at_event_time": rfc3339(job.windows.closes_at(start)),
            "stream_id": job.stream_id,
            "released": plan.released,
            "reason": plan.reason,
            "detail": plan.detail,
            "input": {"distinct_users": plan.population, "records": plan.records},
        }
        summary = {"window_start": rfc3339(start), "released": plan.released, "reason": plan.reason}
        if plan.released and not job.released(start):
            trie, state = _trie_of(job, list(results))
            state.job_id = f"{job.stream_id}-{window_dir_name(start)}"
            state.created_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            state.plan.CopyFrom(plan_for_census(config, plan.population))
            if state.plan.estimate_epsilon:  # charged with the plan, before anything was sampled
                state.estimates.CopyFrom(_released_estimates(job, trie, list(estimates)))
            output_dir = job.output_dir(start)
            outputs.write_outputs(output_dir, state, trie)
            report.update(
                privacy=outputs.plan_document(state.plan),
                rounds=[{"round": r.round_index, "frontier_size": r.frontier_size,
                         "prefixes_kept": r.prefixes_kept, "users_sampled": r.counters["users_sampled"]}
                        for r in state.rounds],
                stop_reason=state.stop_reason,
                published_to=output_dir,
                heavy_hitters=len(trie.heavy_hitters()),
            )
            outputs.write_json(job.report_path(start), report, private=True)
            marker = {"window_start": rfc3339(start), "window_end": rfc3339(start + job.windows.size_micros),
                      "job_id": state.job_id}
            outputs.write_atomically(FileSystems.join(output_dir, RELEASED_MARKER),
                                     (json.dumps(marker) + "\n").encode("utf-8"))
            summary.update(heavy_hitters=len(trie.heavy_hitters()), output=output_dir)
        else:
            outputs.write_json(job.report_path(start), report, private=True)
        _LOG.info("window %s: %s", summary["window_start"], "released" if plan.released else plan.reason)
        yield summary


def build_windowed_discovery(records, job: WindowedJob, window_keys, census_key):
    """Adds the per-window discovery downstream of ``records`` (``pa.RecordBatch`` in
    ``job.windows.window_fn()``, each window's in batches of its own, as ``GateLateRecords``
    outputs them); returns the per-window summaries (private).

    ``window_keys`` is ``Sampler.window_keys()`` and ``census_key`` a ``CensusKey``, both derived
    from the seed (the graph never carries the seed).
    """
    config = job.config
    users = (
        records
        | "DistinctFingerprints" >> beam.ParDo(transforms._DistinctFingerprintsDoFn(census_key))
        | "UnionPerShard" >> beam.CombinePerKey(transforms._UnionSizeCombineFn())
        | "ShardSizes" >> beam.Values()
        | "DistinctUsers" >> beam.CombineGlobally(sum).without_defaults()
    )
    counted = (
        records
        | "RowsPerBatch" >> beam.Map(_records_in)
        | "Records" >> beam.CombineGlobally(sum).without_defaults()
    )
    plans = users | "PlanAndCharge" >> beam.ParDo(
        _DecideDoFn(job), window_view(beam.pvalue.AsSingleton(counted)))
    drawn = records | "SampleAllRounds" >> SampleEachWindow(
        job.windows, window_keys, config.max_length, plans, config.encoder, config.truncate_long_items,
        sample_probability=job.sample_probability)
    results = drawn["tables"] | "Rounds" >> RunWindowRounds(config.max_length, job.theta, drawn["samples"])
    side = {"results": window_view(beam.pvalue.AsList(results))}
    if config.estimate_frequencies:
        leaves = (
            results
            | "WindowResults" >> beam.CombineGlobally(beam.combiners.ToListCombineFn()).without_defaults()
            | "WindowLeaves" >> beam.Map(_leaves_of, job=job)
        )
        released = records | "EstimateFrequencies" >> EstimateEachWindow(
            job.windows, window_keys, config.estimate_frequencies, leaves, config.encoder, config.truncate_long_items)
        side["estimates"] = window_view(beam.pvalue.AsList(released))
    return plans | "Release" >> beam.ParDo(_ReleaseDoFn(job), **side)


class _NoteAdmittedDoFn(beam.DoFn):
    """The gate's per-(window, shard) count of records let through, as a private file."""

    def __init__(self, job: WindowedJob):
        self._job = job

    def process(self, admitted: Tuple[int, int, int]):
        start, shard, records = admitted
        path = FileSystems.join(self._job.state_root, window_dir_name(start), "admitted", f"shard-{shard:03d}.json")
        outputs.write_json(path, {"window_start": rfc3339(start), "shard": shard, "records": records}, private=True)


def note_admitted(admitted, job: WindowedJob):
    """Writes ``GateLateRecords``' admitted counts where ``read_window_reports`` finds them."""
    return admitted | "NoteAdmitted" >> beam.ParDo(_NoteAdmittedDoFn(job))


def _matches(pattern: str) -> List[str]:
    return sorted(m.path for match in FileSystems.match([pattern]) for m in match.metadata_list)


def read_window_reports(job: WindowedJob) -> List[dict]:
    """The private reports of the windows closed so far, oldest first.

    Each gains ``records_admitted``, what the gate let into the window (its on-time panes'
    counts, when written), and ``records_admitted_after_close``: those of them the window's
    census did not count. Beam puts every record that arrives after the close in a late pane
    (dead-lettered), so this is 0 unless a runner breaks that; it is checked, never assumed.
    """
    reports = []
    for path in _matches(FileSystems.join(job.state_root, "window=*", outputs.OPERATOR_REPORT_NAME)):
        report = outputs.read_json(path)
        directory = path.rsplit("/", 1)[0]
        admitted = [outputs.read_json(p)["records"] for p in _matches(FileSystems.join(directory, "admitted", "shard-*.json"))]
        if admitted:
            report["records_admitted"] = sum(admitted)
            report["records_admitted_after_close"] = max(0, sum(admitted) - report["input"]["records"])
        reports.append(report)
    return reports
