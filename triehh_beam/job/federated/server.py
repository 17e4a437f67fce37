"""The server of a federated job (``job.federated.serve``): its plan for the registry's enrolled
devices and its release (charged before the first announcement), each round's keyed selection,
announcement and invitations, the count of the round's reports from the report log until every
selected device reported or the deadline passed (by Pub/Sub's publish times), and the commit of
each closed round to the job's private state.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import math
import time
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from apache_beam.io.filesystems import FileSystems

from triehh_beam.io.pubsub import federated_attributes as attributes
from triehh_beam.job.federated import state as federated_state
from triehh_beam.job.federated.log import LoggedMessage, ReportLog, count_until
from triehh_beam.job.federated.secagg import SecureAggregation, is_secagg_report, run_secure_round
from triehh_beam.job.release import lifecycle as release_lib
from triehh_beam.job.release import outputs
from triehh_beam.job.release.planning import plan_for_census
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.clock import now_iso, now_millis
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.federated.messages import (FederatedFormatError, Invitation, RoundAnnouncement,
                                                     VoteReport)
from triehh_beam.protocol.federated.selection import Registry, select_round
from triehh_beam.protocol.federated.tally import RoundTally
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.rounds.trie import Trie

__all__ = ["FederatedServer", "FederatedSource", "Publish", "RELEASE_NAME", "SEED_NAME", "check_protocol", "check_report_goal",
           "federated_job_id"]

#: (data, attributes) messages to one topic; raises if any is not published.
Publish = Callable[[str, Sequence[Tuple[bytes, Dict[str, str]]]], None]

SEED_NAME = "federated_seed"
_MAX_DEADLINE_S = 366 * 86_400
#: The federated state's ``StateStore`` directory (under the job's ``federated/``): the release
#: (plan, nonce, ledger record) and the progress (``job.federated.state``).
RELEASE_NAME = "release"

@dataclasses.dataclass(frozen=True)
class FederatedSource:
    """Where a federated job's messages go, and when its rounds close.

    Attributes:
      registry: the enrolled devices (``io.registry``); ``config.input_pattern`` is set to it.
      announce_topic: ``projects/P/topics/T``: announcements and invitations.
      reports_subscription: ``projects/P/subscriptions/S``: the devices' reports.
      round_deadline: seconds a round stays open at most.
      report_goal: the fraction of a round's selected devices whose reports close it early: 1
        (all of them) while the plan claims a guarantee (``check_report_goal``).
      drain_seconds: after the last round, how long the log is still read (reports arriving
        then are counted as late, so the operator report accounts for them).
      poll_seconds: how often the report log is read.
      quiet_seconds, catch_up_seconds: once a round's close is decided, the log is read until
        no message arrived for ``quiet_seconds`` (at most ``catch_up_seconds``), so reports
        Pub/Sub accepted before the close but not yet written by the collector still count.
      secure: run every round under secure aggregation (``job.federated.secagg``), or None.
      heard_from_all: only for a simulated fleet, which injects the faults and so knows which
        devices will answer: ``(job id, round, devices invited) -> True`` once every answer it
        will send before the deadline is published (``SimulatedFleet.heard_from_all``); the
        round then closes at once, cutting off no report the deadline would have counted.
        Under secure aggregation it is also asked per exchange (``phase=`` 0 to 3).
    """

    registry: Registry
    announce_topic: str
    reports_subscription: str
    round_deadline: float = 300.0
    report_goal: float = 1.0
    drain_seconds: float = 0.0
    poll_seconds: float = 0.5
    quiet_seconds: float = 2.0
    catch_up_seconds: float = 60.0
    secure: Optional[SecureAggregation] = None
    heard_from_all: Optional[Callable[[str, int, int], bool]] = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        if not 0 < self.round_deadline <= _MAX_DEADLINE_S:
            raise ValueError(f"--round-deadline must be > 0 and at most {_MAX_DEADLINE_S:,} seconds (a year), "
                             f"got {self.round_deadline}")
        if not 0.0 < self.report_goal <= 1.0:
            raise ValueError(f"--report-goal is a fraction of the selected devices in (0, 1], got {self.report_goal}")
        if not (0 <= self.drain_seconds <= _MAX_DEADLINE_S) or self.poll_seconds <= 0:
            raise ValueError("--drain-seconds must be >= 0 and the poll interval > 0")



def federated_job_id(release: release_lib.Release) -> str:
    """The public job id of ``release``: a key derived from the seed and the release's keyed
    identity (the nonce included: two releases never share a job id) under its own purpose (it
    reveals nothing of the sampling keys)."""
    key = keyed_hash.derive_key(release.seed, b"federated-job-id", release.keyed_identity)
    return "federated-" + key[0].to_bytes(8, "little").hex() + key[1].to_bytes(8, "little").hex()


def check_protocol(config: DiscoveryConfig) -> None:
    """Refuses, in one line, a central-only protocol (partition selection, noisy rounds): every
    user contributes and the server would need every device's raw vote."""
    if config.protocol.central_only:
        raise ValueError(f"--protocol {config.protocol} is central only: every user contributes, and the server "
                         "would need every device's raw vote (it counts, then noises or selects); use --protocol "
                         "triehh or triehh++")


def check_report_goal(report_goal: float, no_guarantee: bool) -> None:
    """Refuses a report goal below 1 unless the job claims no guarantee (``no_guarantee``: the
    plan's, or before planning ``DiscoveryConfig.allow_no_guarantee``).

    A round that closes at its goal-th report lets one device's early report cut off another's
    late one: adding one user can then change two counts (its own vote, and the vote it cut
    off), which the threshold's analysis (one user, one vote) does not cover. Rounds close at
    their deadline, or once every selected device has reported (which cuts off nobody).
    """
    if report_goal < 1.0 and not no_guarantee:
        raise ValueError(
            f"--report-goal {report_goal:g} would close a round before its deadline while selected devices "
            "may still report: one device's early report could then cut off another's vote (one user "
            "changing two counts), outside the (epsilon, delta) guarantee. Use --report-goal 1 (the "
            "default: a round closes once every selected device reported, else at --round-deadline) and "
            "a shorter --round-deadline to bound a round's length")


class FederatedServer:
    """One federated job's server: its plan and release, the selection and announcement of each
    round, the count of its reports from the log and the commits of its progress."""

    def __init__(self, config: DiscoveryConfig, source: FederatedSource, seed: bytes, publish: Publish,
                 progress: Callable[[str], None], keep_running: Optional[Callable[[int], bool]]):
        if config.deny_list:
            raise ValueError("--deny-list is not available for federated jobs: each device would need "
                             "the list with the announcement (not built)")
        check_protocol(config)
        if not config.protocol.grows_trie:
            raise ValueError("--protocol sample-threshold is not available for federated jobs yet (one report "
                             "per sampled device, not built): use --protocol triehh or triehh++")
        if source.secure is not None:
            source.secure.check(config.encoder)
        self.config, self.source, self.publish, self.progress = config, source, publish, progress
        self.keep_running = keep_running
        # ``discover``'s identity of the same settings with the registry as its input: two
        # federated jobs sharing a seed file sample independently, and a central run given this
        # identity samples the same users.
        self.identity = config.sampling_identity()
        self.root = FileSystems.join(config.resolved_state_dir, "federated")
        self.encoder = config.encoder
        self.plan = plan_for_census(config, len(source.registry))
        check_report_goal(source.report_goal, self.plan.no_guarantee)
        if source.secure is not None:
            expected = (self.plan.sample_probability * len(source.registry) if config.protocol is Protocol.TRIEHH_PP
                        else self.plan.batch_size)
            source.secure.check_selection(expected)
        self.store = StateStore(self.path(RELEASE_NAME))
        self.state = self.store.load()
        if self.state is None:  # a new release: its nonce drawn now, committed after its charge
            self.release = release_lib.Release.fresh(seed, self.identity)
            self.job_id = federated_job_id(self.release)
        else:  # a resume: the committed release's keys and job id
            self._check_resumable(self.state, seed)
            self.release = release_lib.Release.of_state(self.state)
            self.job_id = self.state.job_id
        self.sampler = self.release.sampler()
        self.progress_doc = self._progress_document()
        self.renew: Callable[[], None] = lambda: None  # the state lease's, while the job holds it

    # ---- state -----------------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return FileSystems.join(self.root, *parts)

    def _check_resumable(self, state: state_pb2.JobState, seed: bytes) -> None:
        if state.sampling_identity.encode("ascii") != self.identity or (
                self.config.seed is not None and state.secret_seed != seed):
            raise ValueError(f"{self.root} holds another federated job ({state.job_id}); "
                             "use another state directory for a new job")

    def _what_it_is(self) -> dict:
        """What a resumed job must find unchanged: the registry's contents (its path is in the
        identity, not its devices) and the plan drawn from them."""
        digest = hashlib.sha256(b"".join(len(i).to_bytes(4, "big") + i for i in self.source.registry.ids))
        plan = self.plan
        return {"registry_sha256": digest.hexdigest(), "devices": len(self.source.registry),
                "theta": plan.theta, "batch_size": plan.batch_size, "sample_probability": plan.sample_probability}

    def _progress_document(self) -> dict:
        expected = self._what_it_is()
        if self.state is None:
            return {"job_id": self.job_id, "rounds": [], "created_at": now_iso(), "job": expected}
        found = federated_state.progress_from_state(self.state)
        if found.get("job") != expected:
            raise ValueError(f"{self.root} holds this job started with another registry ({found['job']['devices']:,} "
                             f"devices, now {expected['devices']:,}) or plan: devices enrolled since would change "
                             "n, m and the selection of a job already charged; start a new job (another "
                             "--output or --state-dir)")
        return found

    # ---- the job ---------------------------------------------------------------------------

    def charge(self) -> None:
        """Budget before release, before the first announcement, in ``job.release.lifecycle``'s order: a
        new release's plan, nonce and record id are committed to the state (``StateStore``), then
        charged under its own record id, then committed marked charged; a resume charges a
        release committed but not yet charged, and finds a charged one's charge in the ledger
        (refused in one line if it does not)."""
        ledger = release_lib.open_ledger(self.config)
        current = self.store.load()  # under the lease now: what another run committed meanwhile
        if (current is None) != (self.state is None) or (
                current is not None and current.SerializeToString() != self.state.SerializeToString()):
            raise ValueError(f"{self.root} was changed by another run since this one read it: run again to resume it")
        details = {"job_id": self.job_id, "time": now_iso(), "mode": "federated",
                   "state_dir": self.config.resolved_state_dir}
        if self.state is None:
            state = state_pb2.JobState(job_id=self.job_id, input=self.config.input_spec(),
                                       plan=self.plan, truncate_long_items=self.config.truncate_long_items,
                                       created_at=now_iso(), ledger=self.config.resolved_ledger_dir)
            self.release.record(state, self.release.record_id(self.job_id))
            federated_state.progress_to_state(self.progress_doc, state)
            self.state = release_lib.commit_then_charge(self.store, state, ledger, details)
        else:
            self.state = release_lib.charge_committed(self.store, self.state, ledger, details)

    def _select(self, round_index: int):
        if self.config.protocol is Protocol.TRIEHH_PP:
            return select_round(self.sampler, self.source.registry, round_index,
                                probability=self.plan.sample_probability)
        return select_round(self.sampler, self.source.registry, round_index, batch_size=self.plan.batch_size)

    def announce(self, step: rounds.NextRound, selection, invite: bool = True) -> Tuple[int, int]:
        """Publishes the round's announcement and (``invite``) invitations; returns (deadline,
        goal). The deadline is recorded before the first publication, so a resumed round keeps it."""
        r = step.index
        goal = math.ceil(self.source.report_goal * len(selection))
        path = self.path(f"round={r:03d}", "announced.json")
        announced = outputs.read_json(path)
        if announced is None:
            announced = {"round": r, "deadline_millis": now_millis() + int(self.source.round_deadline * 1000),
                         "selected": len(selection), "goal": goal}
            outputs.write_json(path, announced, private=True)
        deadline = announced["deadline_millis"]
        public_goal = goal if outputs.population_is_public(self.plan) else 0
        announcement = RoundAnnouncement(job_id=self.job_id, round_index=r, encoder=self.encoder,
                                         frontier=frozenset(step.frontier), deadline_millis=deadline,
                                         report_goal=public_goal,
                                         too_long="truncate" if self.config.truncate_long_items else "drop")
        self.publish(self.source.announce_topic,
                     [(announcement.to_bytes(), attributes.announcement_attributes(self.job_id, r))])
        if not invite:  # secure aggregation: each invitation travels inside its device's setup
            return deadline, goal
        invitations = [
            (Invitation(job_id=self.job_id, round_index=r, device_id=device, token=token,
                        choice_word=int(word)).to_bytes(),
             attributes.invitation_attributes(self.job_id, r, device))
            for device, token, word in zip(selection.device_ids, selection.tokens, selection.choice_words)
        ]
        self.publish(self.source.announce_topic, invitations)
        return deadline, goal

    def _wait_for(self, log: ReportLog, pool: List[LoggedMessage], done: Callable[[], bool],
                  complete: Callable[[], bool] = lambda: False) -> None:
        """Reads the log into ``pool`` until ``done()``, then until the collector has caught up:
        no new message for ``quiet_seconds`` (at most ``catch_up_seconds`` more), so that a
        report Pub/Sub accepted before the close but the collector had not written yet (a
        backlog after a restart, a slow bundle) is still counted on time; no longer once
        ``complete()``: every report the close could count is in ``pool``."""
        while not done():
            pool.extend(log.read_new())
            self.renew()
            time.sleep(self.source.poll_seconds)
        if complete():
            return
        quiet_since = caught_up_by = time.monotonic()
        caught_up_by += self.source.catch_up_seconds
        while time.monotonic() - quiet_since < self.source.quiet_seconds and time.monotonic() < caught_up_by:
            time.sleep(self.source.poll_seconds)
            fresh = log.read_new()
            if fresh:
                pool.extend(fresh)
                if complete():
                    return
                quiet_since = time.monotonic()

    def _goal_time(self, pool: List[LoggedMessage], r: int, tokens: FrozenSet[bytes], goal: int,
                   deadline_micros: int) -> Optional[int]:
        """The publish time of the report that makes the goal (the goal-th selected device's
        first report, by publish time), if it was published before the deadline."""
        firsts: Dict[bytes, int] = {}
        for message in pool:
            token = self._token_of(message, r)
            if token in tokens and message.time_micros <= deadline_micros:
                firsts[token] = min(firsts.get(token, message.time_micros), message.time_micros)
        if not goal or len(firsts) < goal:
            return None
        return sorted(firsts.values())[goal - 1]

    def _token_of(self, message: LoggedMessage, r: int) -> Optional[bytes]:
        cached = self._tokens.get(message.message_id)
        if cached is None:
            try:
                report = VoteReport.from_bytes(message.data, self.encoder)
                cached = report.token if (report.job_id == self.job_id and report.round_index == r) else b""
            except FederatedFormatError:
                cached = b""
            self._tokens[message.message_id] = cached
        return cached or None

    def close_round(self, r: int, tokens: FrozenSet[bytes], tally, log: ReportLog, pool: List[LoggedMessage],
                    deadline_millis: int, goal: int) -> Tuple[int, str, List[LoggedMessage]]:
        """Round ``r``'s count into ``tally`` (a ``RoundTally``, or the estimate round's
        ``EstimateTally``). The round closes at the publish time of the report that reaches the
        goal, or at the deadline; a report counts if Pub/Sub accepted it by then, so which
        round a report belongs to depends on its publish time, not on when the server read it
        (the same on a resume). Returns the close time (microseconds), why it closed, and the
        messages published after the close (the next round's to label)."""
        deadline = deadline_millis * 1000
        self._tokens: Dict[str, bytes] = {}
        heard = self.source.heard_from_all
        heard_at: List[int] = []  # when the simulated fleet said it had sent all it will send in time

        def closed() -> bool:
            if (self._goal_time(pool, r, tokens, goal, deadline) is not None
                    or now_millis() * 1000 >= deadline or not goal):
                return True
            if heard is not None and heard(self.job_id, r, len(tokens)):
                heard_at.append(now_millis() * 1000)
                return True
            return False

        self._wait_for(log, pool, closed)
        at = self._goal_time(pool, r, tokens, goal, deadline)
        if at is not None:
            close, why = at, "report goal"
        elif heard_at and heard_at[0] < deadline:
            close, why = heard_at[0], "every report the simulated fleet sends in time"
        else:
            close, why = deadline, "deadline" if goal else "no device selected"
        return close, why, count_until(pool, close, tally.add)

    def waits_for(self, deadline_millis: int, who: str) -> str:
        """What a round waits for, said when it is announced (``who``: the devices invited)."""
        at = datetime.datetime.fromtimestamp(deadline_millis / 1000, datetime.timezone.utc)
        if self.source.heard_from_all is not None:
            return (f"closing once the {who} devices the simulated fleet lets answer have reported (it drops and "
                    f"delays devices itself, so it knows which will), or at the deadline {at:%H:%M:%S} UTC")
        return f"closing once every {who} device has reported, or at the deadline {at:%H:%M:%S} UTC"

    def commit(self) -> None:
        """Commits the release and its progress (a round's level, the estimate round's release,
        the end) as a new state object (``StateStore``: versioned protobuf, then the manifest)."""
        state = state_pb2.JobState()
        state.CopyFrom(self.state)
        federated_state.progress_to_state(self.progress_doc, state)
        self.store.commit(state)
        self.state = state

    def _plain_round(self, step: rounds.NextRound, selection, log: ReportLog, pool: List[LoggedMessage]):
        """A round without secure aggregation: invitations out, one report per device counted.
        Returns (kept prefixes, the round's record, the messages after its close, reports)."""
        r = step.index
        deadline, goal = self.announce(step, selection)
        self.progress(f"round {r}: announced the frontier ({len(step.frontier):,} prefixes) to the "
                      f"selected devices; {self.waits_for(deadline, 'selected')}")
        tally = RoundTally(self.job_id, r, self.encoder, step.frontier, selection.token_set(), self.plan.theta)
        close, closed_by, pool = self.close_round(r, selection.token_set(), tally, log, pool, deadline, goal)
        kept = tally.kept()
        record = {"round": r, "closed_by": closed_by, "close_micros": close, "frontier_size": len(step.frontier),
                  "kept": [outputs.units_to_json(p, self.encoder) for p in kept],
                  "selected": len(selection), "goal": goal, "labels": tally.label_counts()}
        return kept, record, pool, tally.reported

    def _close(self, record: dict, kept, selected: int, reported: int) -> Optional[str]:
        """Commits a closed round's record; returns why the job stops (no device reported)."""
        self.progress_doc["rounds"].append(record)
        self.commit()  # the level, committed
        self.progress(f"round {record['round']}: closed ({record['closed_by']}); {len(kept):,} prefixes kept")
        if selected and not reported:
            return (f"no selected device reported in round {record['round']} before it closed: check that the "
                    "announce topic's messages reach the devices")
        return None

    def run(self, log: ReportLog) -> Tuple[Trie, List[dict], str, List[LoggedMessage]]:
        progress_doc = self.progress_doc
        trie = Trie.empty(self.encoder)
        step = rounds.next_round(trie, self.config.max_length)
        closed_at = 0
        for done in progress_doc["rounds"]:  # resume: committed rounds, in order
            kept = [outputs.units_from_json(p, self.encoder) for p in done["kept"]]
            trie, step = rounds.apply_round(trie, step, kept, self.config.max_length)
            closed_at = done["close_micros"]
        # Messages of committed rounds (published by their close) are theirs, already counted.
        pool = [m for m in log.read_new() if m.time_micros > closed_at]
        stop_reason = None
        while isinstance(step, rounds.NextRound):
            r = step.index
            selection = self._select(r)
            if self.source.secure is not None:
                kept, record, pool, reported = run_secure_round(self, step, selection, log, pool)
            else:
                kept, record, pool, reported = self._plain_round(step, selection, log, pool)
            record["closed_at"] = now_iso()
            stop_reason = self._close(record, kept, len(selection), reported)
            if stop_reason:
                break
            trie, step = rounds.apply_round(trie, step, kept, self.config.max_length)
        return trie, progress_doc["rounds"], stop_reason or step.describe(), pool

    def drain(self, log: ReportLog, last_round: int, pool: List[LoggedMessage]) -> Dict[str, int]:
        """Reads the log for ``drain_seconds`` more (or while ``keep_running(messages read)``):
        every report is then late (or not this job's, or malformed)."""
        until = time.monotonic() + self.source.drain_seconds
        if self.keep_running is not None:
            self._wait_for(log, pool, lambda: not self.keep_running(log.messages))
        else:
            self._wait_for(log, pool, lambda: time.monotonic() >= until)
        tally = RoundTally(self.job_id, last_round + 1, self.encoder, (), frozenset(), self.plan.theta)
        late = 0
        for message in sorted(pool, key=lambda m: (m.time_micros, m.message_id)):
            if self.source.secure is not None and is_secagg_report(message.data, self.job_id):
                late += 1  # an exchange's answer after its round closed
            else:
                tally.add(message.data)
        counts = tally.label_counts()
        counts["late"] += late
        return counts
