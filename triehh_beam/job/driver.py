"""The multi-round driver, which holds no Beam logic of its own (the job graphs are in
``graphs``): a census job counts the distinct users n; the plan (``planning``: theta and m for the
target, an infeasible one refused) and the secret seed are committed, and the spend charged to the
population's ledger, before any round runs, so nothing is released before the budget is recorded
(the plan's epsilon covers all L rounds, since where the data stops the loop cannot be known in
advance); then ONE sampling pass reads the records and draws every round's sample (samples depend
on the seed, the round and the user, never on the trie) into a private artefact in the state
directory; then the rounds, on the round loop of ``protocol.rounds`` (the simulation's), each on
its sample alone: one Beam job per round (default), each result committed as a new state object
before it is announced, or all of them in one job (``--rounds-per-job all``) that writes each
level as its round completes, committed by the driver in order. Last the samples are deleted
(unless ``--keep-samples``), with ``--estimate-frequencies`` one more pass releases each
discovered item's noisy count (``estimates``, committed before anything is published), the
private operator report (every count) is written into the state directory and the publishable
outputs (``outputs``: ``heavy_hitters.json`` and ``trie.pb``, no exact count, never the seed).
With ``--deny-list`` the earlier releases' heavy hitters are read and checked before anything
else, recorded in the state (part of the job's identity) and applied by every round's vote, never
by the sample (``deny_lists``). Progress shows exact counts only with ``verbose``, marked private. Every job uses the same
``PipelineOptions``, and re-running on the same state directory resumes after the last committed
round with the same seed and the same samples. A whole-item job (``--protocol sample-threshold``:
one release, no trie) branches to ``whole_items`` once its plan is committed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from typing import Callable, Dict, List, Optional, Tuple, Union

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

import apache_beam as beam

from triehh_beam.job import cas
from triehh_beam.job import estimates as estimates_lib
from triehh_beam.job import graphs
from triehh_beam.job import sources
from triehh_beam.job import leftovers, levels
from triehh_beam.job import lease as lease_lib
from triehh_beam.job import ledger as ledger_lib
from triehh_beam.job import release as release_lib
from triehh_beam.job import outputs
from triehh_beam.job import whole_items
from triehh_beam.job import jobs as jobs_lib
from triehh_beam.job.jobs import JobRunner, now, split_round_counters, submit_job_graphs
from triehh_beam.job.config import DiscoveryConfig
from triehh_beam.job.input_checks import (BadInputError, UnusableItemsError, check_census, describe_item_counters,
                                          describe_unusable)
from triehh_beam.job.input_files import InputChangedError
from triehh_beam.job.paths import canonical_path
from triehh_beam.job.planning import (InfeasiblePlanError, PopulationError, check_before_census,
                                      is_sample_threshold, is_whole_items, plan_for_census)
from triehh_beam.job.graphs import build_census, build_rounds, build_sampled_round, build_sampling
from triehh_beam.beam.census import Census
from triehh_beam.io.drops import describe_drops
from triehh_beam.io.schema import RecordFormatError
from triehh_beam.protocol import rounds
from triehh_beam.protocol.rounds import RoundResult
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.sampling import SCHEME_V1, SCHEME_V2, Sampler
from triehh_beam.job.state_store import MANIFEST_NAME, StateStore
from triehh_beam.protocol.trie import Trie

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
    "InfeasiblePlanError",
    "InputChangedError",
    "PopulationError",
    "StateLocationError",
    "UnusableItemsError",
    "check_state_location",
    "run_discovery",
]



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


def _sampled(state: state_pb2.JobState, rounds) -> Optional[int]:
    """The users the sampling pass drew for ``rounds`` (None if it recorded none)."""
    drawn = list(state.samples.users_sampled)
    if not drawn:
        return None
    return sum(drawn[r - 1] for r in rounds if 0 < r <= len(drawn))


def _copy(state: state_pb2.JobState) -> state_pb2.JobState:
    return state_pb2.JobState.FromString(state.SerializeToString())


class _Driver:
    def __init__(
        self,
        config: DiscoveryConfig,
        options: PipelineOptions,
        progress: Callable[[str], None],
        events: Optional[Callable[[dict], None]],
        ticks: Optional[Callable[[Optional[str]], None]] = None,
        release: Optional[release_lib.Release] = None,
    ):
        self.config = config
        self.release = release
        self.options = options
        self.progress = progress
        self.events = events
        self.jobs = JobRunner(options, config.verbose, ticks, events)
        self.encoder = config.encoder
        check_state_location(config)
        self.store = StateStore(config.resolved_state_dir)
        # Counters of rounds a one-job run has run but the driver not yet committed, by round.
        self._round_counters: Dict[int, Dict[str, int]] = {}
        self.ledger = release_lib.open_ledger(config)

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
            self.events({"event": event, "time": now(), "message": message, **fields})

    # ---- jobs -------------------------------------------------------------------------------

    def _run_job(self, build: Callable[[beam.Pipeline, Optional[str]], None], phase: str,
                 total: Optional[int] = None, estimated: bool = False, unit: str = "records") -> Dict[str, int]:
        return self.jobs.run(build, phase, total, estimated, unit)

    def census(self, sampler: Sampler) -> Tuple[Census, Dict[str, int], state_pb2.InputSnapshot]:
        """``jobs.take_census`` for this job."""
        return jobs_lib.take_census(self.config, self.jobs, sampler)

    def check_census(self, counted: Census, counters: Dict[str, int]) -> Dict[str, int]:
        """Announces the census and refuses (``BadInputError``, ``UnusableItemsError``) input a
        job must not spend budget on; returns the counters the state records."""
        counters = {**counters, "distinct_users": counted.users,
                    "users_without_usable_item": counted.unusable_users}
        # Whether any user holds no usable item is a fact of the data (one user flips it): said
        # only with --verbose, as private, like every exact count.
        if counted.unusable_users and self.config.verbose:
            why = ("not encodable" if self.config.truncate_long_items
                   else f"too long for --max-length {self.config.max_length}, or not encodable")
            self._say("census_unusable",
                      f"census: some users hold no usable item (every item of theirs {why}): they are "
                      "sampled but cannot vote",
                      private=(describe_unusable(self.config, counted),
                               {"users_without_usable_item": counted.unusable_users,
                                "items_too_long": counters.get("items_too_long", 0)}))
        check_census(self.config, counters, counted, self.config.population or counted.users)
        return counters

    def check_input(self, state: state_pb2.JobState, when: str) -> None:
        """Refuses (InputChangedError) input that is not what the census read (``sources``)."""
        sources.check_unchanged(state, self.config, self.store.root, when)

    # ---- the sampling pass and the rounds on its samples ------------------------------------

    def _sampler(self, state: state_pb2.JobState) -> Sampler:
        # The committed release's keys (``release``): a resume draws what the first run drew.
        return release_lib.Release.of_state(state).sampler(scheme=state.sampling_scheme or SCHEME_V1)

    def _samples_dir(self, state: state_pb2.JobState) -> str:
        # Where this run finds the job's samples (not the path recorded when they were drawn,
        # which an older state may have recorded relative to another working directory).
        return levels.samples_dir(self.config.resolved_state_dir, state.job_id)

    def _levels_dir(self, state: state_pb2.JobState) -> str:
        return levels.levels_dir(self.config.resolved_state_dir, state.job_id)

    def _users_required(self, state: state_pb2.JobState) -> Optional[int]:
        """TrieHH's sample size, ``min(m, n)``; None for TrieHH++ (a Bernoulli sample's size is
        random: the pass is never short, and each round checks the size it drew instead)."""
        if is_sample_threshold(state.plan):
            return None
        return min(state.plan.batch_size, self._population(state))

    def _round_required(self, state: state_pb2.JobState, rounds) -> Union[None, int, Dict[int, int]]:
        """The users each of ``rounds`` must read back from its sample (fewer: files were lost,
        and the round is short): ``min(m, n)``, or per round what TrieHH++'s pass drew."""
        if not is_sample_threshold(state.plan):
            return self._users_required(state)
        drawn = list(state.samples.users_sampled)
        return {r: drawn[r - 1] for r in rounds if 0 < r <= len(drawn)}

    @staticmethod
    def _population(state: state_pb2.JobState) -> int:
        # The prefilter's cutoff is for the users the census counted (n may be a public N).
        return state.census_counters.get("distinct_users") or state.plan.population

    def _sampling_job(self, state: state_pb2.JobState, rounds: List[int], population: Optional[int],
                      run_rounds: bool) -> Tuple[Dict[int, int], Dict[str, int]]:
        """Runs one sampling pass over ``rounds``: ({round: users sampled}, the job's counters).

        Refuses (InputChangedError) a pass that did not rank exactly the records the census
        counted, or input that changed meanwhile, before anything of it is used."""
        summary = FileSystems.join(self.config.resolved_state_dir, "census", f"sampling-{uuid.uuid4().hex}.json")
        sources.check_credentials(self.config, self.options)
        sources.check_readable(state, self.config)  # a table's pin still in its time-travel window
        keys = self._sampler(state).pass_keys(state.plan.max_length)
        counters = self._run_job(lambda p, reported: build_sampling(
            p, self.config, keys, state.plan, rounds, population, self._samples_dir(state), summary,
            run_rounds_into=self._levels_dir(state) if run_rounds else None,
            users_required=self._users_required(state), records_ranked=state.input_snapshot.records,
            progress=reported, as_of_millis=sources.pinned_at(state.input_snapshot), denied=self.denied),
            "sampling", state.input_snapshot.records)
        unreadable = jobs_lib.read_single_output(graphs.unreadable_path(summary))
        document = json.loads(jobs_lib.read_single_output(summary))
        FileSystems.delete([summary, graphs.unreadable_path(summary)])
        try:
            graphs.refuse_unreadable(unreadable)
        except RecordFormatError as e:
            raise InputChangedError(
                f"sampling: input the census read is now unreadable: {e}; no round was run") from None
        expected = state.input_snapshot.records
        if document["records"] != expected:
            # The one check a --query has: it cannot be pinned, so it should be deterministic.
            why = ("the --query result changed (make it deterministic, e.g. a fixed date range)"
                   if self.config.query is not None else "the input changed under the job")
            raise InputChangedError(
                f"the sampling pass ranked {document['records']:,} records where the census "
                f"counted {expected:,}: {why}; no sample was kept")
        self.check_input(state, "(after the sampling pass read it)")
        return {int(r): int(users) for r, users in document["users_sampled"].items()}, counters

    def sample(self, state: state_pb2.JobState, first_round: int) -> state_pb2.JobState:
        """Draws every round's sample in one pass and commits where it is (``state.samples``).

        With ``--rounds-per-job all`` the same job also runs the rounds, from ``first_round``
        (a fresh job: 1) on the empty trie, each level written as its round completes. A round
        whose sample came up short (the rank prefilter kept too few users, odds about 1e-12)
        is drawn again, alone, without the prefilter: the same, complete sample.
        """
        rounds = list(range(1, state.plan.max_length + 1))
        run_rounds = self.config.rounds_per_job == "all" and first_round == 1
        self._say("sampling_start", f"sampling: drawing the samples of rounds 1-{rounds[-1]} in one pass"
                  + (", and running the rounds in the same job" if run_rounds else ""))
        started = time.monotonic()
        levels.delete_tree(self._samples_dir(state))  # a pass that died may have left part of one
        drawn, counters = self._sampling_job(state, rounds, self._population(state), run_rounds)
        required = self._users_required(state)
        short = [] if required is None else [r for r in rounds if drawn.get(r, 0) < required]
        if short:
            self._say("prefilter_retry", f"sampling: rank prefilter too tight for rounds "
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
        state = _copy(state)
        state.samples.dir = self._samples_dir(state)
        state.samples.complete = True
        state.samples.users_sampled[:] = [drawn[r] for r in rounds]
        state.samples.records_ranked = state.input_snapshot.records
        state.samples.counters.clear()
        state.samples.counters.update({k: v for k, v in counters.items()
                                       if not (k.startswith("round") and ".items_" not in k)})
        state.samples.elapsed_seconds = elapsed
        self.store.commit(state)
        self._say("sampling_done", f"sampling: done, {elapsed:.1f} s",
                  private=(f"users sampled per round {list(state.samples.users_sampled)}",
                           {"users_sampled": list(state.samples.users_sampled), "metrics": counters}))
        return state

    def run_round(self, state: state_pb2.JobState, trie: Trie, round_index: int) -> Tuple[RoundResult, Dict[str, int]]:
        """Runs round ``round_index`` on its sample alone: (its result, the job's counters)."""
        required = self._round_required(state, [round_index])
        if isinstance(required, dict):
            required = required.get(round_index)
        path = FileSystems.join(
            self.config.resolved_state_dir, "rounds", f"round-{round_index:04d}-kept-{uuid.uuid4().hex}.json")
        counters = self._run_job(lambda p, reported: build_sampled_round(
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
        counters = self._run_job(lambda p, reported: build_rounds(
            p, self.config, self._samples_dir(state), state.plan, trie.frontier(), first_round,
            self._levels_dir(state), users_required=self._round_required(state, range(first_round, last + 1)),
            records_ranked=state.samples.records_ranked, progress=reported, denied=self.denied),
            f"rounds {first_round}-{last}", _sampled(state, range(first_round, last + 1)), unit="users")
        return split_round_counters(counters)

    def _level(self, state: state_pb2.JobState, round_index: int) -> Optional[RoundResult]:
        """Round ``round_index``'s level, written by an earlier job of this one, if it is usable:
        computed from a complete sample of exactly the records the census counted."""
        result = levels.read_level(self._levels_dir(state), round_index, self.encoder)
        if result is None or result.sample_short:
            return None
        if result.records_ranked != state.input_snapshot.records:
            return None
        return result

    # ---- the loop ---------------------------------------------------------------------------

    def _new_state(self) -> state_pb2.JobState:
        config = self.config
        # A fresh release (``release``): every key derived from the seed, the job's identity (so
        # another job given the same seed file samples independently) and a fresh nonce (so a
        # re-run of this job after its state was deleted is another release, with other keys);
        # recorded, so a resume keys its rounds exactly as this run did.
        release = self.release or release_lib.Release.fresh(config.seed or os.urandom(32),
                                                            config.sampling_identity())
        sampler = release.sampler()
        self._say("census_start", f"census: counting distinct users in {config.source}",
                  input=config.source)
        started = time.monotonic()
        counted, counters, read = self.census(sampler)
        population = counted.users
        self._say(
            "census_done",
            f"census: done, {time.monotonic() - started:.1f} s",
            private=(f"{population:,} users; {describe_drops(counters)}{describe_item_counters(counters)}",
                     {"population": population, "input": counters}),
        )
        counters = self.check_census(counted, counters)
        plan = plan_for_census(config, population)
        state = state_pb2.JobState(
            job_id=uuid.uuid4().hex,
            sampling_scheme=SCHEME_V2,
            input=config.input_spec(),
            plan=plan,
            truncate_long_items=config.truncate_long_items,
            trie=Trie.empty(self.encoder).to_proto(),
            created_at=now(),
            census_counters=counters,
            ledger=config.resolved_ledger_dir,
            input_snapshot=read,
        )
        deny = config.deny
        if deny is not None:
            state.deny_list.CopyFrom(state_pb2.DenyList(digest=deny.digest, items=deny.size, files=deny.files,
                                                        items_digest=deny.items_digest))
        # The plan, the nonce and the ledger record id committed, then charged (``_charge``)
        # before anything is sampled: a crash in between resumes this release and charges it once.
        release.record(state, release.record_id(state.job_id))
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

    def _charge_details(self, state: state_pb2.JobState) -> dict:
        return {
            "job_id": state.job_id,
            "time": now(),
            "input": state.input.file_pattern or state.input.query,
            "state_dir": self.config.resolved_state_dir,
        }

    def _charge(self, state: state_pb2.JobState) -> state_pb2.JobState:
        """Charges the committed release once (``release.ensure_charged``), before anything of it
        is sampled; returns the state to commit next (marked charged, when it was just charged).

        Raises:
          BudgetExceededError: the spend no longer fits the budget.
          LedgerMismatchError: a release already charged whose record the ledger does not hold.
        """
        if not release_lib.ensure_charged(self.ledger, state, self._charge_details(state)):
            return state
        state = _copy(state)
        state.release_charged = True  # committed with the next state, before any sample is kept
        return state

    def prepare_state_dir(self) -> None:
        """Makes a local state directory owner-only (0700) before anything is written there,
        with the subdirectories where Beam writes each job's output."""
        root = self.config.resolved_state_dir
        for private in (root, FileSystems.join(root, "census"), FileSystems.join(root, "rounds"),
                        FileSystems.join(root, "samples"), FileSystems.join(root, "levels")):
            cas.make_private_dir(private)

    def run(self) -> DiscoveryResult:
        root = self.config.resolved_state_dir
        # Nothing is charged that cannot be published: the locations are checked first.
        release_lib.check_locations(canonical_path(self.config.output_dir), root)
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

    @property
    def denied(self):
        """The deny list's encoded sequences (empty without one)."""
        deny = self.config.deny
        return frozenset() if deny is None else deny.sequences

    def _announce_deny_list(self) -> None:
        """Reads and checks the deny list's files (refused before anything runs) and says so."""
        deny = self.config.deny
        if deny is None:
            return
        self._say("deny_list", f"deny list: {deny.size:,} earlier heavy hitter{'' if deny.size == 1 else 's'} from "
                  f"{len(deny.files)} file{'' if len(deny.files) == 1 else 's'}: a sampled user holding one votes "
                  "among its other items, or abstains (samples and spend unchanged)",
                  items=deny.size, files=list(deny.files), digest=deny.items_digest)

    def _run(self) -> DiscoveryResult:
        self._announce_deny_list()
        state = self.store.load()
        resumed_from = None
        if state is None:
            # Refused before any record is read if the target does not fit the budget.
            release_lib.check_target(self.ledger, self.config)
            check_before_census(self.config)  # TrieHH++'s plan needs no n: refused unread
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
        if is_whole_items(state.plan):  # one release, no trie: job.whole_items
            return self._release_whole_items(state, resumed_from)
        plan = state.plan
        self._say(
            "plan", f"plan: {outputs.describe_published_plan(plan)}",
            private=None if outputs.population_is_public(plan)
            else (outputs.describe_plan(plan), outputs.plan_document(plan)),
            **outputs.published_plan_document(plan),
        )
        advice = outputs.unit_advice_message(plan, self.config)  # issue 16; never changes what runs
        if advice is not None:
            self._say("advice", advice[0], private=advice[1])
        # Budget before release: charged (once per release) before any round can release anything.
        state = self._charge(state)
        trie = Trie.from_proto(state.trie)
        step = rounds.next_round(trie, plan.max_length)
        if not state.finished and isinstance(step, rounds.Stop):
            state = self._finish(state, step.describe())  # a state committed before its stop
        if not state.finished:
            # Once per run, before its first round: a resumed job refuses changed input before
            # it reads it or uses samples drawn from it. The sampling pass checks again after it
            # read the input (``_sampling_job``).
            self.check_input(state, f"(before round {step.index})")
        resampled = False
        while not state.finished:
            started = time.monotonic()
            # A level a one-job run wrote (this run, or one that died) is the round's result.
            result = self._level(state, step.index)
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
                    self._say("resample", f"round {step.index}: its sample in the state directory is "
                              "incomplete, drawing every sample again", round=step.index)
                    state = _copy(state)
                    state.samples.complete = False
                    self.store.commit(state)
                    continue
            state, trie, step = self._commit_round(state, trie, step, result, counters, time.monotonic() - started)
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

    def _commit_round(self, state, trie, step, result: RoundResult, counters: Dict[str, int], elapsed: float):
        """Commits one round's result as a new state object, then announces it."""
        plan = state.plan
        round_index, frontier, kept = step.index, step.frontier, list(result.kept)
        trie, step = rounds.apply_round(trie, step, kept, plan.max_length)
        state = _copy(state)
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
        self._say(
            "round",
            f"round {round_index}/{plan.max_length}: frontier {len(frontier):,}, "
            f"kept {len(kept):,} prefix{'' if len(kept) == 1 else 'es'}, {elapsed:.1f} s",
            private=(f"users sampled {counters.get('users_sampled', 0):,}, "
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
        state = _copy(state)
        state.samples.deleted = True
        self.store.commit(state)
        return state

    def _estimate(self, state: state_pb2.JobState, trie: Trie) -> state_pb2.JobState:
        """The frequency estimates (``--estimate-frequencies``; ``job.estimates``): one more pass
        after the rounds, its noisy release committed before anything is published (once: a
        re-run publishes the committed estimates). Their spend was charged with the plan."""
        if not state.plan.estimate_epsilon or state.HasField("estimates"):
            return state
        self._say("estimates_start", f"estimates: counting the users of each discovered item and prefix "
                  f"(epsilon_est={state.plan.estimate_epsilon:.4g})")
        started = time.monotonic()
        released = estimates_lib.run_estimates(self.config, self.jobs, state, trie)
        state = _copy(state)
        state.estimates.CopyFrom(released)
        self.store.commit(state)
        self._say("estimates_done", f"estimates: done, {len(released.items):,} estimates "
                  f"(noise +-{released.half_width:,} at 95%; the published intervals add the users' draws), "
                  f"{time.monotonic() - started:.1f} s",
                  estimates=len(released.items), half_width=released.half_width)
        return state

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
    return _Driver(config, options or PipelineOptions([]), progress, events, ticks, release).run()
