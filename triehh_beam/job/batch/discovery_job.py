"""What every discovery job does before its rounds or its release, shared by the driver
(``driver.Driver``), a whole-item release (``whole_items``) and a dry run (``dry_run``): the job's
collaborators (configuration, Beam job runner, state store, ledger), its progress lines and
events, the census and the checks on what it counted, the new state with its plan and release
keys committed before anything is charged, the refusal of a state of another job, and the charge.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Callable, Dict, Optional, Tuple

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam.census import Census
from triehh_beam.io.drops import describe_drops
from triehh_beam.job.batch import jobs, levels
from triehh_beam.job.batch.candidate_bounds import candidate_bounds
from triehh_beam.job.release import lifecycle as release_lib
from triehh_beam.job.release import outputs
from triehh_beam.job.release.input_checks import check_census, describe_item_counters, describe_unusable
from triehh_beam.job.release.planning import plan_for_census
from triehh_beam.job.settings import deny_lists
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state import cas
from triehh_beam.job.state.clock import now_iso
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.trie import Trie

__all__ = ["ConfigMismatchError", "DiscoveryJob", "copy_state"]


class ConfigMismatchError(ValueError):
    """A resumed job was started with different inputs or parameters than its state holds."""


def copy_state(state: state_pb2.JobState) -> state_pb2.JobState:
    """A copy of ``state`` to change and commit (a committed state is never changed)."""
    return state_pb2.JobState.FromString(state.SerializeToString())


class DiscoveryJob:
    """One discovery job's collaborators and its steps before the rounds (see the module).

    Args:
      config: the job.
      options: Beam pipeline options for every job.
      progress: called with one human-readable line per step.
      events: called with the same steps as dicts, or None.
      ticks: called about every second while a Beam job runs (``run_discovery``'s).
      release: the keys of another release instead of a fresh one (``run_discovery``'s).
    """

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
        self.jobs = jobs.JobRunner(options, config.verbose, ticks, events, log_dir=config.resolved_state_dir)
        self.encoder = config.encoder
        self.store = StateStore(config.resolved_state_dir)
        self.ledger = release_lib.open_ledger(config)
        # Where this run's first pass wrote its candidates (None: it wrote none, or resumed).
        self.candidates_prefix: Optional[str] = None

    def say(self, event: str, message: str, private: Optional[Tuple[str, dict]] = None, **fields) -> None:
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
            self.events({"event": event, "time": now_iso(), "message": message, **fields})

    def census(self, sampler: Sampler, candidates=None, leased: bool = False,
               ) -> Tuple[Census, Dict[str, int], state_pb2.InputSnapshot]:
        """``jobs.take_census`` for this job (``candidates``: its). ``leased``: the caller holds
        the state directory's lease (a discovery, not a dry run), so the spills a killed run
        left are deleted first."""
        return jobs.take_census(self.config, self.jobs, sampler, candidates, clear_stale_spills=leased)

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
            self.say("census_unusable",
                     f"census: some users hold no usable item (every item of theirs {why}): they are "
                     "sampled but cannot vote",
                     private=(describe_unusable(self.config, counted),
                              {"users_without_usable_item": counted.unusable_users,
                               "items_too_long": counters.get("items_too_long", 0)}))
        check_census(self.config, counters, counted, self.config.population or counted.users)
        return counters

    @staticmethod
    def sampler(state: state_pb2.JobState) -> Sampler:
        """The committed release's keys (``release``): a resume draws what the first run drew."""
        return release_lib.Release.of_state(state).sampler()

    @staticmethod
    def population(state: state_pb2.JobState) -> int:
        """The users the census counted (n may be a public N): the prefilter's cutoff is for them."""
        return state.census_counters.get("distinct_users") or state.plan.population

    @property
    def denied(self):
        """The deny list's encoded sequences (empty without one)."""
        deny = self.config.deny
        return frozenset() if deny is None else deny.sequences

    def announce_deny_list(self) -> None:
        """Reads and checks the deny list's files (refused before anything runs) and says so."""
        deny = self.config.deny
        if deny is None:
            return
        self.say("deny_list", f"deny list: {deny.size:,} earlier heavy hitter{'' if deny.size == 1 else 's'} from "
                 f"{len(deny.files)} file{'' if len(deny.files) == 1 else 's'}: a sampled user holding one votes "
                 "among its other items, or abstains (samples and spend unchanged)",
                 items=deny.size, files=list(deny.files), digest=deny.items_digest)

    def announce_plan(self, plan: state_pb2.PrivacyPlan) -> None:
        """Says the plan: what is published of it, and the rest (functions of n) as private."""
        self.say("plan", f"plan: {outputs.describe_published_plan(plan)}",
                 private=None if outputs.population_is_public(plan)
                 else (outputs.describe_plan(plan), outputs.plan_document(plan)),
                 **outputs.published_plan_document(plan))

    def new_state(self) -> state_pb2.JobState:
        """Takes the census, plans for it and commits the new job's state (its plan, seed and
        release keys), before anything is charged or sampled."""
        config = self.config
        # A fresh release (``release``): every key derived from the seed, the job's identity (so
        # another job given the same seed file samples independently) and a fresh nonce (so a
        # re-run of this job after its state was deleted is another release, with other keys);
        # recorded, so a resume keys its rounds exactly as this run did.
        release = self.release or release_lib.Release.fresh(config.seed or os.urandom(32),
                                                            config.sampling_identity())
        job_id = uuid.uuid4().hex
        candidates = None
        # Raw items a run killed before it committed its job may have left (only the run that
        # writes candidates ever uses them).
        levels.clear_candidates(config.resolved_state_dir)
        if config.protocol.grows_trie:
            # One read: the census and every round's candidates (``beam.samples.candidates``), cut to the
            # plan's m once it is charged (``Driver.sample``).
            self.candidates_prefix = levels.candidates_prefix(config.resolved_state_dir, job_id)
            candidates = (release.sampler().pass_keys(config.max_length), candidate_bounds(config),
                          self.candidates_prefix)
            self.say("census_start", f"census: counting distinct users in {config.source}, and keeping every "
                     "round's candidates in the same read", input=config.source)
        else:
            self.say("census_start", f"census: counting distinct users in {config.source}", input=config.source)
        started, created_at = time.monotonic(), now_iso()  # the start, not after the census (its length is private)
        counted, counters, read = self.census(release.sampler(), candidates, leased=True)  # under the lease
        self.say(
            "census_done",
            "census: done",  # its duration depends on the records: private, as the counts
            private=(f"{time.monotonic() - started:.1f} s; {counted.users:,} users; "
                     f"{describe_drops(counters)}{describe_item_counters(counters)}",
                     {"population": counted.users, "input": counters}),
        )
        counters = self.check_census(counted, counters)
        state = state_pb2.JobState(
            job_id=job_id,
            input=config.input_spec(),
            plan=plan_for_census(config, counted.users),
            truncate_long_items=config.truncate_long_items,
            trie=Trie.empty(self.encoder).to_proto(),
            created_at=created_at,
            census_counters=counters,
            ledger=config.resolved_ledger_dir,
            input_snapshot=read,
        )
        deny = config.deny
        if deny is not None:
            state.deny_list.CopyFrom(deny_lists.state_record(deny))
        # The plan, the nonce and the ledger record id committed, then charged (``charge``)
        # before anything is sampled: a crash in between resumes this release and charges it once.
        release.record(state, release.record_id(state.job_id))
        self.store.commit(state)
        return state

    def check_resumable(self, state: state_pb2.JobState) -> None:
        """Refuses (``ConfigMismatchError``, one line) a state of another job."""
        mismatches = self.config.resume_mismatches(state, Trie.from_proto(state.trie).encoder)
        if mismatches:
            raise ConfigMismatchError(
                f"{self.store.root} holds a job with a different "
                + ", ".join(mismatches)
                + "; use another output/state directory for a new job"
            )

    def charge(self, state: state_pb2.JobState) -> state_pb2.JobState:
        """Charges the committed release once (``release.ensure_charged``), before anything of it
        is sampled; returns the state to commit next (marked charged, when it was just charged).

        Raises:
          BudgetExceededError: the spend no longer fits the budget.
          LedgerMismatchError: a release already charged whose record the ledger does not hold.
        """
        details = {"job_id": state.job_id, "time": now_iso(), "input": state.input.file_pattern or state.input.query,
                   "state_dir": self.config.resolved_state_dir}
        if not release_lib.ensure_charged(self.ledger, state, details):
            return state
        state = copy_state(state)
        state.release_charged = True  # committed with the next state, before any sample is kept
        return state

    def prepare_state_dir(self) -> None:
        """Makes a local state directory owner-only (0700) before anything is written there,
        with the subdirectories where Beam writes each job's output."""
        root = self.config.resolved_state_dir
        for private in (root, FileSystems.join(root, "census"), FileSystems.join(root, "rounds"),
                        FileSystems.join(root, "samples"), FileSystems.join(root, "levels"),
                        FileSystems.join(root, "candidates")):
            cas.make_private_dir(private)
