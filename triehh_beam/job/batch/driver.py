"""The multi-round driver of a discovery, which holds no Beam logic of its own (the graphs are
``graphs``'): on ``discovery_job``'s census, plan and charge, ONE sampling pass draws every
round's sample into a private artefact in the state directory, then the rounds run on their
samples (``protocol.rounds.loop``' loop), one Beam job per round or all in one job
(``--rounds-per-job all``), each result committed before it is announced; then the samples are
deleted, the frequency estimates released (``estimates``), and the operator report and the
publishable outputs written (``outputs``). A re-run on the same state directory resumes after
the last committed round with the same keys and samples; a whole-item job branches to
``whole_items`` once its plan is committed.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from typing import Callable, Dict, List, Optional, Tuple, Union

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.job.batch import estimates as estimates_lib
from triehh_beam.job.batch import jobs as jobs_lib
from triehh_beam.job.batch import levels, noisy_rounds, passes, whole_items
from triehh_beam.job.batch.discovery_job import ConfigMismatchError, DiscoveryJob, copy_state
from triehh_beam.job.batch.graphs import (build_census, build_rounds, build_sampled_round,
                                          build_sampling, build_sampling_from_candidates)
from triehh_beam.job.batch.jobs import job_wide_counters, split_round_counters, submit_job_graphs
from triehh_beam.job.release import lifecycle as release_lib
from triehh_beam.job.release import outputs, partition_outputs
from triehh_beam.job.release.input_checks import BadInputError, UnusableItemsError
from triehh_beam.job.release.planning import (InfeasiblePlanError, PopulationError, check_before_census,
                                              protocol_of)
from triehh_beam.job.settings import sources
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.settings.input_files import InputChangedError
from triehh_beam.job.settings.paths import canonical_path
from triehh_beam.job.state import lease as lease_lib
from triehh_beam.job.state import leftovers
from triehh_beam.job.state.state_store import MANIFEST_NAME
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.randomness.sampling import users_required
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.rounds.loop import RoundResult
from triehh_beam.protocol.rounds.trie import Trie

__all__ = [
    "BadInputError",
    "build_census",
    "build_rounds",
    "build_sampled_round",
    "build_sampling",
    "submit_job_graphs",
    "ConfigMismatchError",
    "DiscoveryConfig",
    "DiscoveryResult",
    "Driver",
    "InfeasiblePlanError",
    "InputChangedError",
    "PopulationError",
    "UnusableItemsError",
    "run_discovery",
]


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


def _sampled(state: state_pb2.JobState, rounds) -> Optional[int]:
    """The users the sampling pass drew for ``rounds`` (None if it recorded none)."""
    drawn = list(state.samples.users_sampled)
    if not drawn:
        return None
    return sum(drawn[r - 1] for r in rounds if 0 < r <= len(drawn))


class Driver(DiscoveryJob):
    """Runs (or resumes) one discovery: ``run``; see the module."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Counters of rounds a one-job run has run but the driver not yet committed, by round.
        self._round_counters: Dict[int, Dict[str, int]] = {}

    # ---- the sampling pass and the rounds on its samples ------------------------------------

    def _samples_dir(self, state: state_pb2.JobState) -> str:
        # Where this run finds the job's samples (not the path recorded when they were drawn:
        # the state directory may have moved since).
        return levels.samples_dir(self.config.resolved_state_dir, state.job_id)

    def _levels_dir(self, state: state_pb2.JobState) -> str:
        return levels.levels_dir(self.config.resolved_state_dir, state.job_id)

    def _users_required(self, state: state_pb2.JobState) -> Optional[int]:
        """TrieHH's sample size, ``min(m, n)``; None for TrieHH++ (a Bernoulli sample's size is
        random: the pass is never short, and each round checks the size it drew instead)."""
        return users_required(state.plan.batch_size, self.population(state),
                              by_probability=protocol_of(state.plan).samples_by_probability)

    def _round_required(self, state: state_pb2.JobState, rounds) -> Union[None, int, Dict[int, int]]:
        """The users each of ``rounds`` must read back from its sample (fewer: files were lost,
        and the round is short): ``min(m, n)``, or per round what TrieHH++'s pass drew."""
        if not protocol_of(state.plan).samples_by_probability:
            return self._users_required(state)
        drawn = list(state.samples.users_sampled)
        return {r: drawn[r - 1] for r in rounds if 0 < r <= len(drawn)}

    def _sampling_job(self, state: state_pb2.JobState, rounds: List[int], population: Optional[int],
                      run_rounds: bool) -> Tuple[Dict[int, int], Dict[str, int]]:
        """Runs one sampling pass over ``rounds``: ({round: users sampled}, the job's counters).

        Refuses (InputChangedError) a pass that did not rank exactly the records the census
        counted, or input that changed meanwhile, before anything of it is used
        (``passes.run_checked_pass``). The pass's candidates (raw items) are deleted once it ends."""
        summary = FileSystems.join(self.config.resolved_state_dir, "census", f"sampling-{uuid.uuid4().hex}.json")
        keys = self.sampler(state).pass_keys(state.plan.max_length)
        pass_id = uuid.uuid4().hex
        candidates = levels.candidates_prefix(self.config.resolved_state_dir, pass_id)
        try:
            document, counters = passes.run_checked_pass(
                self.config, self.jobs, state, lambda p, reported: build_sampling(
                    p, self.config, keys, state.plan, rounds, population, self._samples_dir(state), summary,
                    candidates, run_rounds_into=self._levels_dir(state) if run_rounds else None, progress=reported,
                    as_of_millis=sources.pinned_at(state.input_snapshot), denied=self.denied),
                "sampling", summary, passes.SAMPLING)
        finally:
            levels.delete_tree(levels.candidates_dir(self.config.resolved_state_dir, pass_id))
        return {int(r): int(users) for r, users in document["users_sampled"].items()}, counters

    def _cut_job(self, state: state_pb2.JobState, run_rounds: bool) -> Tuple[Dict[int, int], Dict[str, int]]:
        """Cuts this run's first-pass candidates to every round's sample (its rounds run too with
        ``run_rounds``): as ``_sampling_job``, without reading the records again."""
        summary = FileSystems.join(self.config.resolved_state_dir, "census", f"sampling-{uuid.uuid4().hex}.json")
        keys = self.sampler(state).pass_keys(state.plan.max_length)
        counters = self.jobs.run(lambda p, reported: build_sampling_from_candidates(
            p, self.config, keys, state.plan, self.candidates_prefix, self.population(state),
            self._samples_dir(state), summary, run_rounds_into=self._levels_dir(state) if run_rounds else None,
            records_ranked=state.input_snapshot.records, denied=self.denied), "sampling")
        document = json.loads(jobs_lib.read_single_output(summary))
        FileSystems.delete([summary])
        return {int(r): int(users) for r, users in document["users_sampled"].items()}, counters

    def sample(self, state: state_pb2.JobState, first_round: int) -> state_pb2.JobState:
        """Draws every round's sample and commits where it is (``state.samples``): from the
        candidates this run's first read kept (``DiscoveryJob.new_state``), or, on a resume, in
        one more pass over the records.

        With ``--rounds-per-job all`` the same job also runs the rounds, from ``first_round``
        (a fresh job: 1) on the empty trie, each level written as its round completes. A round
        whose sample came up short (the candidates kept too few users: odds about 1e-12 by the
        rank prefilter, but common when a tiny worker budget caps each bundle's smallest ranks
        below m) is drawn again, alone, without the prefilter: the same, complete sample; the
        loop then runs it and the rounds after it again (in this job they met an empty frontier).
        """
        rounds = list(range(1, state.plan.max_length + 1))
        run_rounds = self.config.rounds_per_job == "all" and first_round == 1
        how = ("from the candidates of the first read" if self.candidates_prefix is not None and first_round == 1
               else "in one pass")
        self.say("sampling_start", f"sampling: drawing the samples of rounds 1-{rounds[-1]} {how}"
                  + (", and running the rounds in the same job" if run_rounds else ""))
        started = time.monotonic()
        levels.delete_tree(self._samples_dir(state))  # a pass that died may have left part of one
        if self.candidates_prefix is not None and first_round == 1:
            drawn, counters = self._cut_job(state, run_rounds)
        else:  # a resume reads the records again: candidates a dead run left are not used
            levels.clear_candidates(self.config.resolved_state_dir)
            drawn, counters = self._sampling_job(state, rounds, self.population(state), run_rounds)
        levels.clear_candidates(self.config.resolved_state_dir)  # raw items, in the samples now
        self.candidates_prefix = None
        required = self._users_required(state)
        short = [] if required is None else [r for r in rounds if drawn.get(r, 0) < required]
        if short:
            self.say("prefilter_retry", f"sampling: rank prefilter too tight for rounds "
                      f"{', '.join(map(str, short))}, drawing them again without it", rounds=short)
            for r in short:
                levels.delete_tree(FileSystems.join(self._samples_dir(state), f"round-{r:04d}"))
            again, _ = self._sampling_job(state, short, None, run_rounds=False)
            drawn.update(again)
        elapsed = time.monotonic() - started
        # Rounds run in this job counted as round3.votes_cast and the like; the pass's own
        # per-round counters (round3.items_too_long) stay with the pass.
        by_round = split_round_counters(counters)
        self._round_counters = {r: {k: v for k, v in c.items() if not k.startswith("items_")}
                                for r, c in by_round.items()}
        state = copy_state(state)
        state.samples.dir = self._samples_dir(state)
        state.samples.complete = True
        state.samples.users_sampled[:] = [drawn[r] for r in rounds]
        state.samples.records_ranked = state.input_snapshot.records
        state.samples.counters.clear()
        state.samples.counters.update({k: v for k, v in counters.items()
                                       if not (k.startswith("round") and ".items_" not in k)})
        state.samples.elapsed_seconds = elapsed
        self.store.commit(state)
        self.say("sampling_done", "sampling: done",  # its duration depends on the records: private
                  private=(f"{elapsed:.1f} s; users sampled per round {list(state.samples.users_sampled)}",
                           {"users_sampled": list(state.samples.users_sampled), "metrics": counters}))
        return state

    def run_round(self, state: state_pb2.JobState, trie: Trie, round_index: int) -> Tuple[RoundResult, Dict[str, int]]:
        """Runs round ``round_index`` on its sample alone: (its result, the job's counters)."""
        if protocol_of(state.plan).noises_rounds:  # every user's vote, noised: job.batch.noisy_rounds
            return noisy_rounds.run_round(self, state, trie, round_index)
        required = self._round_required(state, [round_index])
        if isinstance(required, dict):
            required = required.get(round_index)
        path = FileSystems.join(
            self.config.resolved_state_dir, "rounds", f"round-{round_index:04d}-kept-{uuid.uuid4().hex}.json")
        counters = self.jobs.run(lambda p, reported: build_sampled_round(
            p, self.config, self._samples_dir(state), state.plan, trie.frontier(), round_index, path,
            users_required=required, records_ranked=state.samples.records_ranked,
            progress=reported, denied=self.denied), f"round {round_index}/{state.plan.max_length}",
            _sampled(state, [round_index]), unit="users")
        result = outputs.round_result_from_json(jobs_lib.read_single_output(path), self.encoder)
        FileSystems.delete([path])
        return result, counters

    def run_rounds(self, state: state_pb2.JobState, trie: Trie, first_round: int) -> Dict[int, Dict[str, int]]:
        """Runs rounds ``first_round``..L on their samples in one job; each level is written as
        its round completes. Returns each round's counters (the job's, split by round)."""
        last = state.plan.max_length
        counters = self.jobs.run(lambda p, reported: build_rounds(
            p, self.config, self._samples_dir(state), state.plan, trie.frontier(), first_round,
            self._levels_dir(state), users_required=self._round_required(state, range(first_round, last + 1)),
            records_ranked=state.samples.records_ranked, progress=reported, denied=self.denied),
            f"rounds {first_round}-{last}", _sampled(state, range(first_round, last + 1)), unit="users")
        by_round = split_round_counters(counters)
        # The job's rows held and its workers' peak memory: reported with the first round it ran.
        by_round.setdefault(first_round, {}).update(job_wide_counters(counters))
        return by_round

    def _level(self, state: state_pb2.JobState, round_index: int) -> Optional[RoundResult]:
        """Round ``round_index``'s level, written by an earlier job of this one, if it is usable:
        computed from a complete sample of exactly the records the census counted."""
        result = levels.read_level(self._levels_dir(state), round_index, self.encoder)
        if result is None or result.sample_short:
            return None
        if result.records_ranked != state.input_snapshot.records:
            return None
        return result

    # ---- the loop ----------------------------------------------------------------------------

    def run(self) -> DiscoveryResult:
        root = self.config.resolved_state_dir
        # Nothing is charged that cannot be published: the locations are checked first.
        release_lib.check_locations(canonical_path(self.config.output_dir), root, self.options)
        before = leftovers.local_entries(root)
        self.prepare_state_dir()
        lease = lease_lib.StateLease(root, self.config.lease_seconds)
        try:
            with lease as held:
                self._lease = held
                return self._run()
        except BaseException:
            # A run refused (or failed) before it committed a job leaves nothing behind, once
            # its lease shows that no other run took the directory meanwhile.
            if not FileSystems.exists(FileSystems.join(root, MANIFEST_NAME)) and lease.discard():
                leftovers.remove_new(root, before, keep=[self.config.dead_letter or ""])
            raise

    def _run(self) -> DiscoveryResult:
        self.announce_deny_list()
        state = self.store.load()
        resumed_from = None
        if state is None:
            # Refused before any record is read if the target does not fit the budget.
            release_lib.check_target(self.ledger, self.config)
            check_before_census(self.config)  # TrieHH++'s plan needs no n: refused unread
            state = self.new_state()
        else:
            self.check_resumable(state)
            resumed_from = state.rounds_completed
            self.say(
                "resume",
                f"resuming job {state.job_id[:8]} after round {state.rounds_completed}"
                + (" (finished)" if state.finished else ""),
                job_id=state.job_id,
                rounds_completed=state.rounds_completed,
                finished=state.finished,
            )
        if not protocol_of(state.plan).grows_trie:  # one release, no trie: job.batch.whole_items
            return self._release_whole_items(state, resumed_from)
        plan = state.plan
        self.announce_plan(plan)
        advice = outputs.unit_advice_message(plan, self.config)  # issue 16; never changes what runs
        if advice is not None:
            self.say("advice", advice[0], private=advice[1])
        central = partition_outputs.central_advice(plan, self.config.unit_size)  # issue 41: central protocols
        if central is not None:
            self.say("advice", central)
        # Budget before release: charged (once per release) before any round can release anything.
        state = self.charge(state)
        trie = Trie.from_proto(state.trie)
        step = rounds.next_round(trie, plan.max_length)
        if not state.finished and isinstance(step, rounds.Stop):
            state = self._finish(state, step.describe())  # a state committed before its stop
        if not state.finished:
            # Once per run, before its first round: a resumed job refuses changed input before
            # it reads it or uses samples drawn from it. The sampling pass checks again after it
            # read the input (``_sampling_job``).
            sources.check_unchanged(state, self.config, f"(before round {step.index})")
        resampled = False
        while not state.finished:
            started = time.monotonic()
            # A level a one-job run wrote (this run, or one that died) is the round's result.
            result = self._level(state, step.index)
            ran_earlier = result is not None  # by the job that drew the samples, or a run before
            counters = self._round_counters.pop(step.index, {})
            if result is None:
                if not state.samples.complete:
                    state = self.sample(state, step.index)
                    continue
                if self.config.rounds_per_job == "all":
                    self._round_counters = self.run_rounds(state, trie, step.index)
                    result = levels.read_level(self._levels_dir(state), step.index, self.encoder)
                    if result is None:
                        raise RuntimeError(f"the rounds job wrote no level for round {step.index}")
                    counters = self._round_counters.pop(step.index, {})
                else:
                    result, counters = self.run_round(state, trie, step.index)
                if result.sample_short:
                    # Fewer users than were drawn: the artefact lost files. Draw it again.
                    if resampled:
                        raise RuntimeError(f"round {step.index}'s sample in {state.samples.dir} is incomplete twice")
                    resampled = True
                    self.say("resample", f"round {step.index}: its sample in the state directory is "
                              "incomplete, drawing every sample again", round=step.index)
                    state = copy_state(state)
                    state.samples.complete = False
                    self.store.commit(state)
                    continue
            state, trie, step = self._commit_round(state, trie, step, result, counters, time.monotonic() - started,
                                                   ran_earlier)
        state = self._discard_samples(state)
        state = self._estimate(state, trie)
        report_path = outputs.write_operator_report(
            self.config.resolved_state_dir, state, canonical_path(self.config.output_dir))
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

    def _release_whole_items(self, state: state_pb2.JobState, resumed_from: Optional[int]) -> DiscoveryResult:
        state, output_path, report_path = whole_items.run_release(self, state)
        return DiscoveryResult(
            heavy_hitters=[self.encoder.decode(s) for s, _ in whole_items.released(state, self.encoder)],
            frequent_prefixes=[], rounds_run=1, stop_reason=state.stop_reason, plan=state.plan,
            output_path=output_path, resumed_from_round=resumed_from, report_path=report_path)

    def _commit_round(self, state, trie, step, result: RoundResult, counters: Dict[str, int], elapsed: float,
                      ran_earlier: bool = False):
        """Commits one round's result as a new state object, then announces it (``ran_earlier``:
        its level was written by an earlier job, whose time the line does not claim)."""
        plan = state.plan
        state = noisy_rounds.record_round(state, step.index, result)  # noisy rounds: committed with the round
        round_index, frontier, kept = step.index, step.frontier, list(result.kept)
        trie, step = rounds.apply_round(trie, step, kept, plan.max_length)
        state = copy_state(state)
        # What the pass counted for this round's sample (items too long or unencodable among its
        # users' records, the records its sample was drawn from), then the round's own counters.
        drawn = {name[len(f"round{round_index}."):]: value for name, value in state.samples.counters.items()
                 if name.startswith(f"round{round_index}.")}
        counters = {**drawn, "records_ranked": state.samples.records_ranked, **counters,
                    "users_sampled": result.users_sampled}
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
        self.say(
            "round",
            f"round {round_index}/{plan.max_length}: frontier {len(frontier):,}, "
            f"kept {len(kept):,} prefix{'' if len(kept) == 1 else 'es'}"
            + (" (run in the samples' job)" if ran_earlier else ""),
            private=(("" if ran_earlier else f"{elapsed:.1f} s; ") + f"users sampled {counters.get('users_sampled', 0):,}, "
                     f"votes {counters.get('votes_cast', 0):,}", {"metrics": counters}),
            round=round_index,
            max_rounds=plan.max_length,
            frontier_size=len(frontier),
            prefixes_kept=len(kept),
            elapsed_seconds=round(elapsed, 3),
        )
        self._lease.renew()
        return state, trie, step

    def _discard_samples(self, state: state_pb2.JobState) -> state_pb2.JobState:
        """Deletes a finished job's samples (raw items) and levels, unless ``--keep-samples``."""
        if self.config.keep_samples or state.samples.deleted or not state.samples.dir:
            return state
        levels.delete_tree(self._samples_dir(state))
        levels.delete_tree(self._levels_dir(state))
        levels.clear_candidates(self.config.resolved_state_dir)
        state = copy_state(state)
        state.samples.deleted = True
        self.store.commit(state)
        return state

    def _estimate(self, state: state_pb2.JobState, trie: Trie) -> state_pb2.JobState:
        """The frequency estimates (``--estimate-frequencies``; ``job.batch.estimates``): one more pass
        after the rounds, its noisy release committed before anything is published (once: a
        re-run publishes the committed estimates). Their spend was charged with the plan."""
        if not state.plan.estimate_epsilon or state.HasField("estimates"):
            return state
        self.say("estimates_start", f"estimates: counting the users of each discovered item and prefix "
                  f"(epsilon_est={state.plan.estimate_epsilon:.4g})")
        started = time.monotonic()
        released = estimates_lib.run_estimates(self.config, self.jobs, state, trie)
        state = copy_state(state)
        state.estimates.CopyFrom(released)
        self.store.commit(state)
        self.say("estimates_done", f"estimates: done, {len(released.items):,} estimates "
                  f"(noise +-{released.half_width:,} at 95%; the published intervals add the users' draws)",
                  private=(f"{time.monotonic() - started:.1f} s", {"seconds": time.monotonic() - started}),
                  estimates=len(released.items), half_width=released.half_width)
        return state

    def _write_outputs(self, state: state_pb2.JobState, trie: Trie) -> str:
        return outputs.write_outputs(self.config.output_dir, state, trie, noisy_rounds.published_section(state, trie))

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
    ticks: Optional[Callable[[Optional[str]], None]] = None,
    release: Optional[release_lib.Release] = None,
) -> DiscoveryResult:
    """Runs (or resumes) a whole discovery; see the module docstring.

    Args:
      config: the job.
      options: Beam pipeline options for every job (default: the in-process runner).
      progress: called with one human-readable line per step.
      events: called with the same steps as dicts (``event``, ``time``, ``message`` and the
        step's figures: plan, per-round Beam metrics), e.g. to log JSON lines; while a job
        runs, also a ``progress`` event every ``PROGRESS_EVENT_SECONDS``.
      ticks: called about every second while a job (the census, the sampling pass, a round)
        runs, with a one-line progress bar to show in place (``progress.describe``), and with
        None when the job ends; e.g. ``progress.TerminalBar()``.
      release: the keys of another release (``release.Release``), instead of a fresh one: only
        for a run that must sample exactly as that release did, to compare with it (``triehh
        federated simulate``'s reference run of the federated job's records), never to publish
        beside it. Recorded in the state, as always.

    Raises:
      InfeasiblePlanError: the privacy target cannot be met for the counted population.
      ConfigMismatchError: the state directory holds a different job.
      StateError: the state directory is corrupt.
    """
    return Driver(config, options or PipelineOptions([]), progress, events, ticks, release).run()
