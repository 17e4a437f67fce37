"""``triehh federated serve``: TrieHH where devices keep their data and only votes reach us.

The server plans for n = the registry's enrolled devices (``io.registry``), exactly as
``discover`` plans for its census, and records the spend in the population's ledger before the
first announcement (the frontier each announcement carries is the trie learned so far: a
release). Then, round by round:

1. select exactly m devices by the keyed bottom-m ranks (``protocol.federated_selection``:
   the central job's sample of the same users, given the same seed and identity), each with a
   per-round token and its item-choice word;
2. publish the ``RoundAnnouncement`` (job id, round, frontier, encoding, deadline) and one
   ``Invitation`` per selected device to the announce topic;
3. a streaming Beam job (``beam.federated.LogReports``, started once for the whole job) appends
   every message of the reports subscription to the private report log; the round loop reads the
   log as it grows and counts the round's reports (``protocol.federated_tally``: only the first
   report of a token the round issued counts, the frontier checked again, votes counted and
   pruned at theta by ``PrefixCounter``);
4. the round closes when the report goal (a fraction of the m selected) have reported, or at its
   deadline; its level and the log files it read are committed to the private state, then the
   next round starts.

Dropouts (selected devices that never report) lower the number of votes, never the guarantee:
Theorem 1's privacy comes from the selection, which the server draws before any device
answers, and the threshold; a device that does not report is, for the analysis, a device with
nothing to vote for, a case the theorem already covers. What can be discovered shrinks with the
votes (recall), and a round that closes with no prefix at theta ends the discovery, said in the
output's stop reason.

A crash at any point resumes: the seed (``--seed-file``, else kept in the state), the job id and
the selection are functions of the settings; each committed round is read back; the open
round's announcement (same deadline) and invitations are published again (a device that answers
twice is a duplicate) and its count is redone from the whole log. The published output is
``discover``'s (``heavy_hitters.json``, ``trie.pb``, plus a ``federated`` section); every count
(reports by kind, per round) is in the private operator report; the report log is deleted when
the job ends.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.io import federated_attributes as attributes
from triehh_beam.job import cas
from triehh_beam.job import ledger as ledger_lib
from triehh_beam.job import outputs
from triehh_beam.job.config import TRIEHH_PP, DiscoveryConfig
from triehh_beam.job.federated_log import ReportLog
from triehh_beam.job.planning import plan_for_census
from triehh_beam.proto import state_pb2
from triehh_beam.protocol import keyed_hash, rounds
from triehh_beam.protocol.federated import Invitation, RoundAnnouncement
from triehh_beam.protocol.federated_selection import Registry, select_round
from triehh_beam.protocol.federated_tally import KINDS, REPORTED, RoundTally
from triehh_beam.protocol.sampling import Sampler
from triehh_beam.protocol.trie import Trie

__all__ = ["DROPOUT_GUARANTEE", "FederatedResult", "FederatedSource", "Publish", "federated_identity",
           "federated_job_id", "run_federated"]

#: (data, attributes) messages to one topic; raises if any is not published.
Publish = Callable[[str, Sequence[Tuple[bytes, Dict[str, str]]]], None]

SEED_NAME = "federated_seed"
PROGRESS_NAME = "progress.json"

DROPOUT_GUARANTEE = (
    "The (epsilon, delta) guarantee holds whatever fraction of the selected devices report. It "
    "comes from the selection, which the server draws at random (keyed by its secret seed) before "
    "any device answers, m of the n enrolled devices per round, and from the threshold theta: a "
    "selected device that does not report is, for Theorem 1, a device with nothing to vote for, a "
    "case the theorem covers. Dropouts lower the number of votes, and so what can be discovered, "
    "never the privacy. (Assumed: whether a device reports does not depend on other devices' data.)"
)


@dataclasses.dataclass(frozen=True)
class FederatedSource:
    """Where a federated job's messages go, and when its rounds close.

    Attributes:
      registry: the enrolled devices (``io.registry``); ``config.input_pattern`` is set to it.
      announce_topic: ``projects/P/topics/T``: announcements and invitations.
      reports_subscription: ``projects/P/subscriptions/S``: the devices' reports.
      round_deadline: seconds a round stays open at most.
      report_goal: the fraction of a round's selected devices whose reports close it early.
      drain_seconds: after the last round, how long the log is still read (reports arriving
        then are counted as late, so the operator report accounts for them).
      poll_seconds: how often the report log is read.
    """

    registry: Registry
    announce_topic: str
    reports_subscription: str
    round_deadline: float = 300.0
    report_goal: float = 1.0
    drain_seconds: float = 0.0
    poll_seconds: float = 0.5

    def __post_init__(self):
        if not self.round_deadline > 0:
            raise ValueError(f"--round-deadline must be > 0 seconds, got {self.round_deadline}")
        if not 0.0 < self.report_goal <= 1.0:
            raise ValueError(f"--report-goal is a fraction of the selected devices in (0, 1], got {self.report_goal}")
        if self.drain_seconds < 0 or self.poll_seconds <= 0:
            raise ValueError("--drain-seconds must be >= 0 and the poll interval > 0")


@dataclasses.dataclass
class FederatedResult:
    """What the job did: the trie, where it was published, and the private per-round counts."""

    trie: Trie
    job_id: str
    output: str
    report_path: str
    rounds: List[dict]
    after_last_round: Dict[str, int]
    redelivered: int


def federated_identity(config: DiscoveryConfig) -> bytes:
    """The job's sampling identity: ``discover``'s identity of the same settings with the registry
    as its input (so two federated jobs sharing a seed file sample independently, and a central
    run given this identity samples the same users)."""
    return config.sampling_identity()


def federated_job_id(seed: bytes, identity: bytes) -> str:
    """The public job id: a key derived from the seed and the identity under its own purpose
    (it reveals nothing of the sampling keys)."""
    key = keyed_hash.derive_key(seed, b"federated-job-id", identity)
    return "federated-" + key[0].to_bytes(8, "little").hex() + key[1].to_bytes(8, "little").hex()


def _now_millis() -> int:
    return int(time.time() * 1000)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class _Server:
    def __init__(self, config: DiscoveryConfig, source: FederatedSource, seed: bytes, publish: Publish,
                 progress: Callable[[str], None], keep_running: Optional[Callable[[int], bool]]):
        self.config, self.source, self.publish, self.progress = config, source, publish, progress
        self.keep_running = keep_running
        self.identity = federated_identity(config)
        self.sampler = Sampler(seed, self.identity)
        self.job_id = federated_job_id(seed, self.identity)
        self.root = FileSystems.join(config.resolved_state_dir, "federated")
        self.encoder = config.encoder
        self.plan = plan_for_census(config, len(source.registry))

    # ---- state -----------------------------------------------------------------------------

    def _path(self, *parts: str) -> str:
        return FileSystems.join(self.root, *parts)

    def _read_json(self, path: str) -> Optional[dict]:
        if not FileSystems.exists(path):
            return None
        with FileSystems.open(path, compression_type="uncompressed") as f:
            return json.loads(f.read().decode("utf-8"))

    def _write_json(self, path: str, document: dict) -> None:
        directory = path.rsplit("/", 1)[0]
        if not FileSystems.exists(directory):
            FileSystems.mkdirs(directory)
        outputs.write_atomically(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"),
                                 private=True)

    def _progress_document(self) -> dict:
        found = self._read_json(self._path(PROGRESS_NAME))
        if found is None:
            return {"job_id": self.job_id, "rounds": [], "created_at": _now()}
        if found["job_id"] != self.job_id:
            raise ValueError(f"{self.root} holds another federated job ({found['job_id']}); "
                             "use another state directory for a new job")
        return found

    # ---- the job ---------------------------------------------------------------------------

    def charge(self) -> None:
        """Budget before release: before the first announcement (idempotent by job id)."""
        ledger = ledger_lib.Ledger(self.config.resolved_ledger_dir, self.config.budget)
        ledger.charge_plan(self.job_id, self.plan, {"time": _now(), "mode": "federated"})

    def _select(self, round_index: int):
        if self.config.protocol == TRIEHH_PP:
            return select_round(self.sampler, self.source.registry, round_index,
                                probability=self.plan.sample_probability)
        return select_round(self.sampler, self.source.registry, round_index, batch_size=self.plan.batch_size)

    def announce(self, step: rounds.NextRound, selection) -> Tuple[int, int]:
        """Publishes the round's announcement and invitations; returns (deadline, goal). The
        deadline is recorded before the first publication, so a resumed round keeps it."""
        r = step.index
        goal = math.ceil(self.source.report_goal * len(selection))
        path = self._path(f"round={r:03d}", "announced.json")
        announced = self._read_json(path)
        if announced is None:
            announced = {"round": r, "deadline_millis": _now_millis() + int(self.source.round_deadline * 1000),
                         "selected": len(selection), "goal": goal}
            self._write_json(path, announced)
        deadline = announced["deadline_millis"]
        public_goal = goal if outputs.population_is_public(self.plan) else 0
        announcement = RoundAnnouncement(job_id=self.job_id, round_index=r, encoder=self.encoder,
                                         frontier=frozenset(step.frontier), deadline_millis=deadline,
                                         report_goal=public_goal,
                                         too_long="truncate" if self.config.truncate_long_items else "drop")
        self.publish(self.source.announce_topic,
                     [(announcement.to_bytes(), attributes.announcement_attributes(self.job_id, r))])
        invitations = [
            (Invitation(job_id=self.job_id, round_index=r, device_id=device, token=token,
                        choice_word=int(word)).to_bytes(),
             attributes.invitation_attributes(self.job_id, r, device))
            for device, token, word in zip(selection.device_ids, selection.tokens, selection.choice_words)
        ]
        self.publish(self.source.announce_topic, invitations)
        return deadline, goal

    def count_round(self, tally: RoundTally, log: ReportLog, deadline: int, goal: int) -> Tuple[List[str], str]:
        """Reads the log into ``tally`` until the goal or the deadline; the files read, and why
        the round closed."""
        files: List[str] = []
        while True:
            for name in log.new_files():
                files.append(name)
                for data in log.read(name):
                    tally.add(data)
            if goal and tally.reported >= goal:
                return files, "report goal"
            if _now_millis() >= deadline:
                return files, "deadline"
            if goal == 0:
                return files, "no device selected"
            time.sleep(self.source.poll_seconds)

    def run(self, log: ReportLog) -> Tuple[Trie, List[dict], Optional[str]]:
        progress_doc = self._progress_document()
        trie = Trie.empty(self.encoder)
        step = rounds.next_round(trie, self.config.max_length)
        for done in progress_doc["rounds"]:  # resume: committed rounds, in order
            log.remember(done["files"])
            kept = [outputs.units_from_json(p, self.encoder) for p in done["kept"]]
            trie, step = rounds.apply_round(trie, step, kept, self.config.max_length)
        while isinstance(step, rounds.NextRound):
            r = step.index
            selection = self._select(r)
            deadline, goal = self.announce(step, selection)
            self.progress(f"round {r}: announced the frontier ({len(step.frontier):,} prefixes) to the "
                          f"selected devices; closing at the report goal or "
                          f"{datetime.datetime.fromtimestamp(deadline / 1000, datetime.timezone.utc):%H:%M:%S} UTC")
            tally = RoundTally(self.job_id, r, self.encoder, step.frontier, selection.token_set(), self.plan.theta)
            files, closed_by = self.count_round(tally, log, deadline, goal)
            kept = tally.kept()
            record = {"round": r, "files": files, "closed_by": closed_by, "frontier_size": len(step.frontier),
                      "kept": [outputs.units_to_json(p, self.encoder) for p in kept],
                      "selected": len(selection), "goal": goal, "labels": tally.label_counts(),
                      "closed_at": _now()}
            progress_doc["rounds"].append(record)
            self._write_json(self._path(PROGRESS_NAME), progress_doc)  # the level, committed
            self.progress(f"round {r}: closed ({closed_by}); {len(kept):,} prefixes kept")
            trie, step = rounds.apply_round(trie, step, kept, self.config.max_length)
        return trie, progress_doc["rounds"], step.describe()

    def drain(self, log: ReportLog, last_round: int) -> Dict[str, int]:
        """Reads the log for ``drain_seconds`` more (or while ``keep_running(messages read)``):
        every report is then late (or not this job's, or malformed)."""
        tally = RoundTally(self.job_id, last_round + 1, self.encoder, (), frozenset(), self.plan.theta)
        until = time.monotonic() + self.source.drain_seconds
        while True:
            for name in log.new_files():
                for data in log.read(name):
                    tally.add(data)
            if self.keep_running is not None:
                if not self.keep_running(log.messages):
                    break
            elif time.monotonic() >= until:
                break
            time.sleep(self.source.poll_seconds)
        return tally.label_counts()


def _state_for_outputs(config: DiscoveryConfig, server: _Server, trie: Trie, records: List[dict],
                       stop_reason: str) -> state_pb2.JobState:
    state = state_pb2.JobState(job_id=server.job_id, created_at=_now(), input=config.input_spec(),
                               truncate_long_items=config.truncate_long_items, plan=server.plan,
                               stop_reason=stop_reason, finished=True)
    for record in records:
        state.rounds.add(round_index=record["round"], frontier_size=record["frontier_size"],
                         prefixes_kept=len(record["kept"]))
    state.trie.CopyFrom(trie.to_proto())
    return state


def _published_section() -> dict:
    """What ``heavy_hitters.json`` adds for a federated job (how rounds closed, and every count,
    stay in the operator report)."""
    return {
        "mode": "federated: devices kept their records and sent one vote (or an abstention) per round",
        "guarantee_with_dropouts": DROPOUT_GUARANTEE,
    }


def run_federated(
    config: DiscoveryConfig,
    source: FederatedSource,
    publish: Publish,
    options: Optional[PipelineOptions] = None,
    progress: Callable[[str], None] = print,
    keep_draining: Optional[Callable[[int], bool]] = None,
) -> FederatedResult:
    """Runs (or resumes) a federated job; see the module docstring.

    Args:
      config: the job's settings (``input_pattern``: the registry's location, for the identity).
      source: the registry, topics and round timing.
      publish: publishes messages to a topic (``io.pubsub``).
      options: Beam options of the streaming collector (default: the streaming DirectRunner in
        process).
      keep_draining: after the last round, the log is read while this returns True given the
        number of distinct messages read so far (a simulator waiting for its fleet's), instead of
        ``source.drain_seconds``.

    Raises:
      InfeasiblePlanError: the target cannot be met for n enrolled devices (nothing announced).
      BudgetExceededError: the spend does not fit the lifetime budget (nothing announced).
      PubsubUnavailableError, ValueError: Pub/Sub does not answer, or the reports subscription
        does not exist (checked before the charge: nothing spent).
    """
    from apache_beam.io.gcp.pubsub import ReadFromPubSub

    from triehh_beam.beam.federated import LogReports
    from triehh_beam.job.stream import cancel_job, job_seed, stream_pipeline

    from triehh_beam.io import pubsub

    seed = job_seed(config, SEED_NAME)
    server = _Server(config, source, seed, publish, progress, keep_draining)
    # Before the charge: a job that cannot announce or hear back spends nothing.
    pubsub.ensure_topic(source.announce_topic)
    pubsub.check_subscription(source.reports_subscription)
    cas.make_private_dir(config.resolved_state_dir)
    if cas.is_local(server.root):
        cas.make_private_dir(server.root)
    server.charge()
    log_dir = server._path("reports")
    if cas.is_local(log_dir):
        cas.make_private_dir(log_dir)
    pipeline = stream_pipeline(options or PipelineOptions([]))
    _ = (pipeline
         | "ReadReports" >> ReadFromPubSub(subscription=source.reports_subscription, with_attributes=True)
         | "LogReports" >> LogReports(log_dir))
    collector = pipeline.run()
    try:
        log = ReportLog(log_dir)
        trie, records, stop_reason = server.run(log)
        after = server.drain(log, records[-1]["round"] if records else 0)
    finally:
        cancel_job(collector)
    state = _state_for_outputs(config, server, trie, records, stop_reason)
    outputs.write_outputs(config.output_dir, state, trie, extra={"federated": _published_section()})
    report = {
        "private": outputs.PRIVATE_NOTE,
        "job_id": server.job_id,
        "published_to": config.output_dir,
        "registry": {"devices": len(source.registry)},
        "privacy": outputs.plan_document(server.plan),
        "rounds": [{k: v for k, v in record.items() if k not in ("files", "kept")} for record in records],
        "after_last_round": after,
        "messages_redelivered": log.redelivered,
        "log_lines_unreadable": log.unreadable_lines,
        "stop_reason": stop_reason,
        "guarantee_with_dropouts": DROPOUT_GUARANTEE,
    }
    report_path = FileSystems.join(config.resolved_state_dir, outputs.OPERATOR_REPORT_NAME)
    server._write_json(report_path, report)
    log.delete()
    return FederatedResult(trie, server.job_id, config.output_dir, report_path, records, after, log.redelivered)


def label_totals(result: FederatedResult) -> Dict[str, int]:
    """Every label's count over the whole job (private): rounds and the drain after them."""
    totals = {kind: 0 for kind in KINDS}
    for record in result.rounds:
        for kind, n in record["labels"].items():
            totals[kind] += n
    for kind, n in result.after_last_round.items():
        totals[kind] += n
    return totals


def reported_share(record: dict) -> float:
    """The share of a round's selected devices that reported (private)."""
    reported = sum(record["labels"][k] for k in REPORTED)
    return reported / record["selected"] if record["selected"] else 0.0
