"""``triehh federated serve``: TrieHH where devices keep their data and only votes reach us. The
server (``federated_server``) plans for the registry's enrolled devices as ``discover`` plans for
its census and charges the ledger before the first announcement; each round it selects m devices
by their keyed ranks, announces the frontier, and counts the reports a streaming Beam job
(``beam.pubsub.federated.LogReports``) appends to a private log, until every selected device reported
or the deadline passed; each closed round is committed, so a crash resumes it. With
``--estimate-frequencies`` an estimate round follows (``federated_estimates``). The published
output is ``discover``'s plus a ``federated`` section; every count is in the private operator
report. The guarantee assumes honest, non-colluding devices (``federated_outputs``). With
``--secure-aggregation`` (``FederatedSource.secure``) each round's votes are summed per cohort under
secure aggregation (``federated_secagg``): the server never sees one device's vote.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, List, Optional

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.io.pubsub import federated_attributes as attributes
from triehh_beam.job.federated import estimates as federated_estimates, outputs as federated_outputs
from triehh_beam.job.federated.log import ReportLog
from triehh_beam.job.federated.server import (RELEASE_NAME, SEED_NAME, FederatedServer, FederatedSource,
                                              Publish, check_protocol, check_report_goal,
                                              federated_job_id)
from triehh_beam.job.release import lifecycle as release_lib
from triehh_beam.job.release import outputs
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state import cas
from triehh_beam.job.state import lease as lease_lib
from triehh_beam.job.state.clock import now_iso
from triehh_beam.job.windows import modes
from triehh_beam.protocol.rounds.trie import Trie

__all__ = ["FederatedResult", "FederatedSource", "Publish", "RELEASE_NAME", "check_protocol", "check_report_goal",
           "federated_job_id", "run_federated", "secure_totals"]


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
    estimate: Optional[dict] = None  # the estimate round's record (private: its labels), if it ran
    # The release's keys (private: the seed): for a reference run that must sample as it did.
    release: Optional[release_lib.Release] = dataclasses.field(default=None, repr=False)



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
      publish: publishes messages to a topic (``io.pubsub.client``).
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
      LeaseHeld: another run holds the state directory (nothing spent).
    """
    from apache_beam.io.gcp.pubsub import ReadFromPubSub

    from triehh_beam.io.pubsub import client as pubsub

    # Nothing is charged that cannot be published: the locations are checked first (the
    # collector's workers write the report log into the state directory).
    modes.check_locations(config, options)
    seed = modes.job_seed(config, SEED_NAME)
    server = FederatedServer(config, source, seed, publish, progress, keep_draining)
    report_path = FileSystems.join(config.resolved_state_dir, outputs.OPERATOR_REPORT_NAME)
    finished = server.progress_doc.get("finished")
    if finished:  # a rerun of a finished job: its results stand; nothing is announced again
        progress(f"federated job {server.job_id} already finished: {finished['stop_reason']}")
        trie = Trie.from_bytes(_read(FileSystems.join(config.output_dir, "trie.pb")))
        return FederatedResult(trie, server.job_id, config.output_dir, report_path, server.progress_doc["rounds"],
                               finished["after_last_round"], finished["redelivered"],
                               server.progress_doc.get(federated_estimates.ESTIMATE_KEY), server.release)
    # Before the charge: a job that cannot announce, or hear back, spends nothing. Beam checks
    # the subscription's name when the read is built.
    read = ReadFromPubSub(subscription=source.reports_subscription, with_attributes=True)
    reports_topic = pubsub.check_subscription(source.reports_subscription)
    if not pubsub.topic_subscriptions(source.announce_topic):
        raise ValueError(f"the announce topic {source.announce_topic} has no subscription: nothing would "
                         "deliver the rounds to the devices (subscribe the push bridge first)")
    cas.make_private_dir(config.resolved_state_dir)
    if cas.is_local(server.root):
        cas.make_private_dir(server.root)
    # One server per state directory (a second one would announce and count the same rounds).
    with lease_lib.StateLease(config.resolved_state_dir, config.lease_seconds) as lease:
        server.renew = _renewer(lease, config.lease_seconds)
        return _run_held(config, source, server, read, reports_topic, options, report_path)


def _renewer(lease, seconds: float) -> Callable[[], None]:
    """Renews ``lease`` when a third of its duration has passed since the last renewal."""
    last = [time.monotonic()]

    def renew() -> None:
        if time.monotonic() - last[0] >= seconds / 3:
            lease.renew()
            last[0] = time.monotonic()

    return renew


def _run_held(config: DiscoveryConfig, source: FederatedSource, server: FederatedServer, read, reports_topic: str,
              options: Optional[PipelineOptions], report_path: str) -> FederatedResult:
    """The job, its state directory's lease held: charge, collect, rounds, outputs."""
    from triehh_beam.beam.pubsub.federated import LogReports

    publish = server.publish
    server.charge()
    log_dir = server.path("reports")
    if cas.is_local(log_dir):
        cas.make_private_dir(log_dir)
    pipeline = modes.stream_pipeline(options or PipelineOptions([]))
    _ = pipeline | "ReadReports" >> read | "LogReports" >> LogReports(log_dir)
    collector = pipeline.run()
    log = ReportLog(log_dir)
    try:
        trie, records, stop_reason, pool = server.run(log)
        estimates, pool = federated_estimates.run_estimate_round(server, trie, log, pool, len(records))
        estimate = server.progress_doc.get(federated_estimates.ESTIMATE_KEY)
        after = server.drain(log, estimate["round"] if estimate else len(records), pool)
    finally:
        _stop_collector(collector, reports_topic, server.job_id, publish)
    state = federated_outputs.state_for_outputs(config, server.job_id, server.plan, trie, records, stop_reason,
                                                estimates)
    outputs.write_outputs(config.output_dir, state, trie,
                          extra={"federated": federated_outputs.published_section(
                              config, estimates is not None, source.secure)},
                          trust_model=(federated_outputs.TRUST_MODEL_SECURE if source.secure is not None
                                       else federated_outputs.TRUST_MODEL))
    report = {
        "private": outputs.PRIVATE_NOTE,
        "job_id": server.job_id,
        "published_to": config.output_dir,
        "registry": {"devices": len(source.registry)},
        "privacy": outputs.plan_document(server.plan),
        "rounds": [{k: v for k, v in record.items() if k != "kept"} for record in records],
        "estimate_round": estimate and {k: v for k, v in estimate.items() if k != "released"},
        "after_last_round": after,
        "messages_redelivered": log.redelivered,
        "log_lines_unreadable": log.unreadable_lines,
        "stop_reason": stop_reason,
        "guarantee_with_dropouts": federated_outputs.dropout_guarantee(config),
        "secure_aggregation": (secure_totals(records + ([estimate] if estimate else []))
                               if source.secure is not None else None),
    }
    outputs.write_json(report_path, report, private=True)
    # Finished before the log goes: a rerun then returns the result instead of reading a log
    # that is no longer there.
    server.progress_doc["finished"] = {"stop_reason": stop_reason, "after_last_round": after,
                                       "redelivered": log.redelivered, "at": now_iso()}
    server.commit()
    log.delete()
    return FederatedResult(trie, server.job_id, config.output_dir, report_path, records, after, log.redelivered,
                           estimate, server.release)


def secure_totals(records: List[dict]) -> dict:
    """The job's cohorts under secure aggregation (private): unmasked, dropped per exchange, the
    devices lost with the dropped cohorts, over ``records`` (the rounds', and the estimate
    round's when it ran)."""
    totals = {"cohorts": 0, "unmasked": 0, "dropped_by_phase": {}, "devices_in_dropped_cohorts": 0,
              "devices_summed": 0}
    for record in records:
        secure = record.get("secure_aggregation", {})
        for key in ("cohorts", "unmasked", "devices_in_dropped_cohorts", "devices_summed"):
            totals[key] += secure.get(key, 0)
        for phase, n in secure.get("dropped_by_phase", {}).items():
            totals["dropped_by_phase"][phase] = totals["dropped_by_phase"].get(phase, 0) + n
    return totals


def _read(path: str) -> bytes:
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()


def _stop_collector(collector, reports_topic: str, job_id: str, publish: Publish) -> None:
    """Cancels the collector and waits for it to stop (``modes.cancel_job``): one message marked
    ``kind=server-stop`` (``io.pubsub.federated_attributes.SERVER_STOP``, which the collector does not
    log) ends its current pull at once. Left running, the cancelled reader would go on pulling, and
    acknowledging, what later jobs should read."""
    modes.cancel_job(collector, 40.0, nudge=lambda: publish(
        reports_topic, [(b"", {attributes.KIND: attributes.SERVER_STOP, attributes.JOB: job_id})]))
