"""One private discovery per event-time window of a declared range (``--windows``), as one Beam
graph (streaming or bounded): every declared window, with records or not, gets a census, and
``_DecideDoFn`` reads the window's release, committed and charged by the driver before the window
closes (``job.windows.releases``: nothing random or charged in a step a runner may retry), or its
refusal; the plan depends on public inputs only, so no window is withheld because of its n. The
window's rounds run on keys of (seed, identity, window, nonce) and ``_ReleaseDoFn`` writes its
output like ``discover``'s, then marks it released so it is never released again. Nothing of a
window below the threshold is written anywhere.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import time
from typing import FrozenSet, Iterable, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE as _NAMESPACE
from triehh_beam.beam.windows.window_census import CensusEachWindow
from triehh_beam.beam.windows.window_join import GIVEN, MAIN, MeetGiven
from triehh_beam.beam.windows.windowed import (ChainWindowRounds, RunWindowRounds, SampleEachWindow,
                                               WindowPlan, results_by_round)
from triehh_beam.beam.windows.windowed_estimates import EstimateEachWindow
from triehh_beam.beam.windows.windows import EventWindows, rfc3339
from triehh_beam.job.release import outputs
from triehh_beam.job.release.planning import check_before_census, plan_for_census, window_coverage
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state import cas
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.job.windows.privacy import privacy_unit
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.estimates.frequency_estimates import LEVEL, EstimateTargets, FrequencyEstimates
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.protocol.randomness import keyed_hash, sampling
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.rounds.loop import RoundResult
from triehh_beam.protocol.rounds.trie import Trie

__all__ = [
    "REFUSED_MARKER",
    "RELEASED_MARKER",
    "WITHHELD_NAME",
    "WindowNotDecidedError",
    "WindowStateMismatchError",
    "WindowedJob",
    "build_windowed_discovery",
    "read_window_reports",
    "window_dir_name",
]

RELEASED_MARKER = "_RELEASED"
#: A window the budget refused: published (charged nothing), with the next window it allows.
REFUSED_MARKER = "_REFUSED"
#: Beside a window's state: why the driver did not release it (private).
WITHHELD_NAME = "withheld.json"
_LOG = logging.getLogger(__name__)
# The keyed uniform of a round's count of real users sampled (``sampling.real_users_sampled``).
_PHANTOMS = "phantoms"


class WindowStateMismatchError(ValueError):
    """A window's committed state was planned with other settings than the resuming job's."""


class WindowNotDecidedError(RuntimeError):
    """A window closed before the driver committed and charged its release, or refused it."""


def window_dir_name(start_micros: int) -> str:
    return f"window={rfc3339(start_micros)}"


@dataclasses.dataclass(frozen=True)
class WindowedJob:
    """What every window of one windowed job shares.

    Attributes:
      config: the job's settings (``window`` set); the graph keeps a copy without the seed.
      stream_id: names the job's windows in the ledger (``<stream_id>/window=<start>/release=<nonce>``,
        ``release.record_id_of``): a key derived from the seed and the job's whole identity
        (input and output included) under its own purpose. It reveals nothing of the sampling
        keys; every release of a window is charged under its own record id (its nonce).
      windows: the job's ``EventWindows``.
    """

    config: DiscoveryConfig
    stream_id: str
    windows: EventWindows

    @staticmethod
    def check(config: DiscoveryConfig) -> None:
        """Refuses (ValueError, one line), before anything is made, read or charged, a windowed
        job that declares no windows, whose windows' plan cannot be made from its public inputs
        (TrieHH without ``--population``; an infeasible target: ``InfeasiblePlanError``), or whose
        ``--deny-list`` file is refused (``DenyListError``)."""
        if config.window is None:
            raise ValueError("a windowed job needs --window")
        if config.windows is None:
            raise ValueError("--window needs --windows FROM..TO or FROM.. (RFC 3339 UTC, aligned to the "
                             "window): every window of the range is released and charged, empty or not, "
                             "so which windows are published never depends on the records")
        if config.protocol is not Protocol.TRIEHH_PP and config.population is None:
            raise ValueError("TrieHH windows need --population N, a public lower bound of every window's "
                             "users (the plan may not depend on a window's n); or use --protocol "
                             "triehh++, which needs none")
        check_before_census(config)  # TrieHH++: an infeasible target is refused before any window
        config.deny  # its files read and checked (DenyListError, naming the file), before any window
        plan_for_census(config, config.population or 0)  # TrieHH: infeasible for N, refused here

    @classmethod
    def for_config(cls, config: DiscoveryConfig, seed: bytes) -> "WindowedJob":
        """The job of ``config`` (refused as ``check`` says)."""
        cls.check(config)
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

    def window_state_dir(self, start: int) -> str:
        """The window's ``StateStore`` (its plan, nonce, ledger record and result) and reports."""
        return FileSystems.join(self.state_root, window_dir_name(start))

    def report_path(self, start: int) -> str:
        return FileSystems.join(self.window_state_dir(start), outputs.OPERATOR_REPORT_NAME)

    @property
    def open_ended(self) -> bool:
        """``--windows FROM..``: every window from FROM on, for as long as the stream runs."""
        return self.config.windows[1] is None

    @property
    def declared_starts(self) -> Iterable[int]:
        """The starts of the declared windows (``--windows FROM..TO``), oldest first: a range,
        or an endless count for ``FROM..``."""
        first, last = self.config.windows
        if last is None:
            return itertools.count(first, self.windows.size_micros)
        return range(first, last, self.windows.size_micros)

    def declares(self, start: int) -> bool:
        first, last = self.config.windows
        return first <= start and (last is None or start < last)

    def describe_declared(self) -> str:
        first, last = self.config.windows
        return f"{rfc3339(first)}..{'' if last is None else rfc3339(last)}"

    def plan(self) -> state_pb2.PrivacyPlan:
        """Every window's plan: from public inputs alone (TrieHH: for the declared population N,
        recorded as public; TrieHH++: no n at all), never from a window's records."""
        return plan_for_census(self.config, self.config.population or 0)

    def released(self, start: int) -> bool:
        return FileSystems.exists(FileSystems.join(self.output_dir(start), RELEASED_MARKER))

    @property
    def denied(self) -> FrozenSet[Units]:
        """The deny list's encoded sequences (empty without one): every window's votes skip them."""
        deny = self.config.deny
        return frozenset() if deny is None else deny.sequences

    @property
    def theta(self) -> int:
        """Every window's theta (TrieHH++: tau), fixed by the settings alone."""
        return self.plan().theta

    @property
    def sample_probability(self) -> Optional[float]:
        """TrieHH++'s p_s, every window's (it does not depend on n); None for TrieHH."""
        if self.config.protocol is not Protocol.TRIEHH_PP:
            return None
        return self.plan().sample_probability


class _DecideDoFn(beam.DoFn):
    """A declared window's census -> its ``WindowPlan``: the release the driver committed and
    charged (``window_releases``; a retried bundle, a restarted job: the same nonce, no charge
    here), or the reason it withheld the window. Reads only; waits up to ``wait_seconds`` for a
    window the driver has not decided yet.

    Raises:
      WindowNotDecidedError: the driver did not decide the window in time.
    """

    def __init__(self, job: WindowedJob, window_keys: sampling.WindowKeys, wait_seconds: float = 0.0):
        self._job = job
        self._window_keys = window_keys
        self._wait_seconds = wait_seconds

    def process(self, census: Tuple[int, int], beam_window=beam.DoFn.WindowParam):
        users, records = census
        job = self._job
        start = job.windows.start_of_window(beam_window)
        deadline = time.monotonic() + self._wait_seconds
        while True:
            state = StateStore(job.window_state_dir(start)).load()
            if state is not None and state.finished:
                yield WindowPlan(start, False, users, records, reason="an earlier run already released this window "
                                 "(its state says so); it is never released twice")
                return
            if state is not None and state.release_charged:
                yield self._plan_of(state, start, users, records)
                return
            withheld = outputs.read_json(FileSystems.join(job.window_state_dir(start), WITHHELD_NAME))
            if withheld is not None:
                yield WindowPlan(start, False, users, records, reason=withheld["reason"])
                return
            if time.monotonic() >= deadline:
                raise WindowNotDecidedError(f"window {rfc3339(start)} closed before the driver committed and "
                                            "charged its release (window_releases.WindowReleases.decide)")
            time.sleep(0.2)

    def _plan_of(self, state: state_pb2.JobState, start: int, users: int, records: int) -> WindowPlan:
        job = self._job
        plan = state.plan
        if plan.theta != job.theta:
            raise AssertionError(f"the window's plan's theta {plan.theta} is not the graph's {job.theta}")
        probability = job.sample_probability
        if probability is not None:
            if plan.sample_probability != probability:
                raise AssertionError(f"the plan's p_s {plan.sample_probability} is not the graph's {probability}")
            return WindowPlan(start, True, users, records, plan.theta, plan.batch_size, sample_probability=probability,
                              nonce=state.release_nonce)
        sampler = self._window_keys.sampler(start, state.release_nonce)
        sizes = tuple(sampling.real_users_sampled(sampler.round_uniform(_PHANTOMS, r), plan.public_population,
                                                  users, plan.batch_size)
                      for r in range(1, plan.max_length + 1))
        return WindowPlan(start, True, users, records, plan.theta, plan.batch_size, nonce=state.release_nonce,
                          real_sample_sizes=sizes)


def _trie_of(job: WindowedJob, results: List[Tuple[int, RoundResult]],
             state: Optional[state_pb2.JobState] = None) -> Tuple[Trie, state_pb2.JobState]:
    """The window's trie from its rounds' results, and ``state`` (a copy of the window's
    committed state, or a new one) with its rounds and trie: the state its documents describe."""
    config = job.config
    by_round = results_by_round(results)
    trie = Trie.empty(config.encoder)
    state = state_pb2.JobState.FromString(state.SerializeToString()) if state is not None else state_pb2.JobState()
    del state.rounds[:]
    step = rounds.next_round(trie, config.max_length)
    while isinstance(step, rounds.NextRound):
        result = by_round.get(step.index, RoundResult((), 0))
        kept = list(result.kept)
        state.rounds.add(round_index=step.index, frontier_size=len(step.frontier), prefixes_kept=len(kept),
                         counters={"users_sampled": result.users_sampled})
        trie, step = rounds.apply_round(trie, step, kept, config.max_length)
    state.stop_reason = step.describe()
    state.rounds_completed = len(state.rounds)
    state.finished = True
    state.trie.CopyFrom(trie.to_proto())
    return trie, state


def _leaves_of(chained: Tuple[WindowPlan, List[Tuple[int, RoundResult]]], job: WindowedJob
               ) -> Tuple[WindowPlan, EstimateTargets]:
    """A window's plan and discovered leaves (its trie's heavy hitters and frequent prefixes),
    from its rounds' results: what its frequency estimates count."""
    plan, results = chained
    return plan, EstimateTargets.from_trie(_trie_of(job, results)[0])


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


def _window_document(job: WindowedJob, start: int) -> dict:
    """The published window section: the window, the declared range, and what its guarantee
    assumes of the window's users (publishable: settings only, never the window's n)."""
    config = job.config
    if config.protocol is Protocol.TRIEHH_PP:
        planned = ("the plan does not depend on the window's number of users; every window of the declared "
                   "range is released, with records or not")
    else:
        covered = window_coverage(job.plan())
        planned = (f"planned for a declared population of {config.population:,} users per window (not a "
                   "count): a window with fewer users is sampled as if users holding nothing made up the "
                   f"difference (they never vote), one with more samples m of its users; the guarantee holds "
                   f"for a window of at most {covered:,} users (m^2: Theorem 1 needs m/sqrt(n) >= 1), and a "
                   "window with more has none, which this document, the same in every window, cannot say; "
                   "every window of the declared range is released, with records or not")
    return {"start": rfc3339(start), "end": rfc3339(start + job.windows.size_micros),
            "declared_windows": job.describe_declared(), "planned": planned,
            "privacy_unit": privacy_unit(config, job.plan())}


class _ReleaseDoFn(beam.DoFn):
    """A window's ``(plan, round results, estimates)`` -> its published result (if released),
    its state committed as finished, and its private report; outputs one summary (private: it
    holds n) per window."""

    def __init__(self, job: WindowedJob):
        self._job = job

    def process(self, window: Tuple[WindowPlan, List[Tuple[int, RoundResult]], List[FrequencyEstimates]]):
        plan, results, estimates = window
        job = self._job
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
        if job.sample_probability is None and plan.released:  # TrieHH: n above m^2 has no guarantee
            report["above_guaranteed_users"] = plan.population > window_coverage(job.plan())
        summary = {"window_start": rfc3339(start), "released": plan.released, "reason": plan.reason}
        if plan.released:
            store = StateStore(job.window_state_dir(start))
            committed = store.load()
            if committed is None or committed.release_nonce != plan.nonce:
                raise AssertionError(f"window {rfc3339(start)} is released under a nonce its state does not hold")
            if committed.finished:  # a retried bundle of this stage: the window is published
                return
            trie, state = _trie_of(job, list(results), committed)
            if state.plan.estimate_epsilon:  # charged with the plan, before anything was sampled
                state.estimates.CopyFrom(_released_estimates(job, trie, list(estimates)))
            output_dir = job.output_dir(start)
            if not job.released(start):  # else: an attempt that published it and then failed
                outputs.write_outputs(output_dir, state, trie, {"window": _window_document(job, start)})
                marker = {"window_start": rfc3339(start), "window_end": rfc3339(start + job.windows.size_micros),
                          "job_id": state.job_id}
                outputs.write_atomically(FileSystems.join(output_dir, RELEASED_MARKER),
                                         (json.dumps(marker) + "\n").encode("utf-8"))
            store.commit(state)
            report.update(
                ledger_record=state.ledger_record,
                privacy=outputs.plan_document(state.plan),
                rounds=[{"round": r.round_index, "frontier_size": r.frontier_size,
                         "prefixes_kept": r.prefixes_kept, "users_sampled": r.counters["users_sampled"]}
                        for r in state.rounds],
                stop_reason=state.stop_reason,
                published_to=output_dir,
                heavy_hitters=len(trie.heavy_hitters()),
            )
            if state.HasField("deny_list"):
                report["deny_list"] = outputs.deny_list_report(state)
            summary.update(heavy_hitters=len(trie.heavy_hitters()), output=output_dir)
        outputs.write_json(job.report_path(start), report, private=True)
        _LOG.info("window %s: %s", summary["window_start"], "released" if plan.released else plan.reason)
        yield summary


class _KeepDeclaredDoFn(beam.DoFn):
    """Drops the batches of windows outside the graph's windows (``first`` to ``last``
    inclusive, declared), counting their records (a private total:
    ``window.records_outside_declared_windows``)."""

    def __init__(self, job: WindowedJob, first: int, last: int):
        self._job = job
        self._first, self._last = first, last

    def setup(self):
        self._outside = Metrics.counter(_NAMESPACE, "window.records_outside_declared_windows")

    def process(self, batch, beam_window=beam.DoFn.WindowParam):
        if self._first <= self._job.windows.start_of_window(beam_window) <= self._last:
            yield batch
        else:
            self._outside.inc(batch.num_rows)


def build_windowed_discovery(records, job: WindowedJob, window_keys, census_key, wait_seconds: float = 0.0,
                             starts: Optional[Sequence[int]] = None):
    """Adds the per-window discovery downstream of ``records`` (``pa.RecordBatch`` in
    ``job.windows.window_fn()``, each window's in batches of its own, as ``GateLateRecords``
    outputs them); returns the per-window summaries (private).

    ``window_keys`` is ``Sampler.window_keys()`` and ``census_key`` a ``CensusKey``, both derived
    from the seed (the graph never carries the seed). Records of windows outside the declared
    range are dropped (counted); every declared window gets a census (0 users when it has no
    record), so every declared window is published, as the driver decided it
    (``window_releases``: charged, or refused) before it closes; ``wait_seconds``: how long a
    closed window waits for that decision (a stream's driver decides as the clock goes).
    ``starts``: the windows of this graph, consecutive and declared (default: every declared
    window of a ``FROM..TO`` range; an open-ended stream's driver gives the next ones).
    """
    config = job.config
    starts = list(job.declared_starts if starts is None else starts)
    if not starts or any(not job.declares(s) for s in (starts[0], starts[-1])):
        raise ValueError("a windowed graph has at least one window, all declared")
    records = records | "KeepDeclaredWindows" >> beam.ParDo(_KeepDeclaredDoFn(job, starts[0], starts[-1]))
    census = records | "Census" >> CensusEachWindow(job.windows, census_key, starts)
    plans = census | "PlanAndCharge" >> beam.ParDo(_DecideDoFn(job, window_keys, wait_seconds))
    drawn = records | "SampleAllRounds" >> SampleEachWindow(
        window_keys, config.max_length, plans, config.encoder, config.truncate_long_items,
        sample_probability=job.sample_probability)
    kept = drawn["tables"] | "Rounds" >> RunWindowRounds(job.theta, job.denied)
    chained = plans | "ChainRounds" >> ChainWindowRounds(kept, drawn["samples"])
    if config.estimate_frequencies:
        released = records | "EstimateFrequencies" >> EstimateEachWindow(
            window_keys, config.estimate_frequencies, chained | "WindowLeaves" >> beam.Map(_leaves_of, job=job),
            config.encoder, config.truncate_long_items)
        windows = ({GIVEN: chained | "ChainedOfWindow" >> beam.Map(_keyed_once), MAIN: released
                    | "EstimatesOfWindow" >> beam.Map(_keyed_once)}
                   | "MeetEstimates" >> MeetGiven() | "WithEstimates" >> beam.Map(_with_estimates))
    else:
        windows = chained | "WithoutEstimates" >> beam.Map(_without_estimates)
    return windows | "Release" >> beam.ParDo(_ReleaseDoFn(job))


def _keyed_once(element):
    return 0, element


def _with_estimates(met):
    _, chained, estimates = met
    if chained is None:
        raise ValueError("a window's estimates have no rounds")
    return chained[0], chained[1], list(estimates)


def _without_estimates(chained):
    return chained[0], chained[1], []


class _NoteAdmittedDoFn(beam.DoFn):
    """The gate's per-(window, shard) count of records let through, as a private file."""

    def __init__(self, job: WindowedJob):
        self._job = job

    def process(self, admitted: Tuple[int, int, int]):
        start, shard, records = admitted
        # The window's folder may not exist yet (a record outside the declared windows, a window
        # not yet decided): made owner-only here, as write_json makes only admitted/ so.
        cas.make_private_dir(self._job.window_state_dir(start))
        path = FileSystems.join(self._job.window_state_dir(start), "admitted", f"shard-{shard:03d}.json")
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
