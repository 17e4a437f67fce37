"""``triehh federated simulate``: the federated server (``job.federated.serve``) against a simulated fleet
of one device per user (``evaluation.fleet.devices``), talking through Pub/Sub (``PUBSUB_EMULATOR_HOST``,
else an emulator started for the run), beside the central run of the same records with the same
seed and sampling identity. The fleet injects the faults, so each round closes once every device
that will answer in time has (``SimulatedFleet.heard_from_all``) or at the deadline; after the
last round the server reads until every message sent is read (or a minute passes). The summary
says whether the two tries (and, with ``--estimate-frequencies``, the estimates) are equal, as
they are with no faults, else the federated run's recall of the central heavy hitters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
import uuid
from typing import Dict, Iterator, List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.evaluation.fleet.faults import FleetOptions, check_fate_probabilities
from triehh_beam.io.schema import RecordColumns
from triehh_beam.job.release.wording import counted
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.protocol.federated.selection import Registry

__all__ = ["SimulationSummary", "fleet_options", "main", "simulate"]

_PROJECT = "triehh-simulation"
_DRAIN_TIMEOUT_S = 60.0


def fleet_options(dropout: float = 0.0, duplicate: float = 0.0, late: float = 0.0, malformed: float = 0.0,
                  latency: float = 0.2, seed: int = 0) -> FleetOptions:
    """The fleet of ``triehh federated simulate``'s flags: each fault's probability per selected
    device, the median latency in seconds and the fleet's seed.

    Raises:
      ValueError: a value out of range, named as its flag (``--dropout``, ``--latency``).
    """
    faults = {"dropout": dropout, "malformed": malformed, "late": late, "duplicate": duplicate}
    check_fate_probabilities(faults, named=lambda name: f"--{name}")
    if not latency >= 0:
        raise ValueError(f"--latency must be >= 0 seconds, got {latency}")
    return FleetOptions(**faults, latency_median_s=latency, seed=seed)


# Private, shown only on request: the exact message counts (functions of who was sampled and
# voted), and the central reference's estimates, released with the same keyed noise as the
# federated ones, so that their difference is the exact count of non-reporting devices per target.
_PRIVATE_COUNTS = ("sent", "received", "redelivered", "unread", "central_estimates", "secure_aggregation",
                  "seconds")  # and the time
# Private too: the central run releases the same records with the federated release's keys (so
# that "same trie" checks the federated path), a second release of them that no ledger covers.
_PRIVATE_CENTRAL = ("central_heavy_hitters", "trie_equal_to_central", "recall_vs_central",
                    "estimates_equal_to_central")


@dataclasses.dataclass
class SimulationSummary:
    job_id: str
    devices: int
    rounds: int
    heavy_hitters: List
    central_heavy_hitters: List
    trie_equal_to_central: Optional[bool]
    recall_vs_central: Optional[float]
    estimates: Optional[Dict[str, int]]
    central_estimates: Optional[Dict[str, int]]
    estimates_equal_to_central: Optional[bool]
    seconds: float
    sent: Dict[str, int]
    received: Dict[str, int]
    redelivered: int
    unread: int
    output: str
    report: str
    secure_aggregation: Optional[dict] = None  # cohorts unmasked and dropped, devices lost (private)
    population_public: bool = False

    def document(self, counts: bool = False) -> dict:
        """The summary as JSON; the exact message counts, the central comparison and (n not
        public) the number of devices, all private, only with ``counts``, under ``private``."""
        document = dataclasses.asdict(self)
        private = {key: document.pop(key) for key in _PRIVATE_COUNTS + _PRIVATE_CENTRAL}
        if not self.population_public:
            private["devices"] = document.pop("devices")
        if counts:
            document["private"] = {"note": "operator only, never publish", **private}
        return document


@contextlib.contextmanager
def _pubsub_host() -> Iterator[str]:
    """``PUBSUB_EMULATOR_HOST`` if set, else an emulator started on loopback for the run."""
    if os.environ.get("PUBSUB_EMULATOR_HOST"):
        yield os.environ["PUBSUB_EMULATOR_HOST"]
        return
    from triehh_beam.io.pubsub.emulator import start_pubsub_emulator

    with start_pubsub_emulator() as host:
        previous = os.environ.get("PUBSUB_EMULATOR_HOST")
        os.environ["PUBSUB_EMULATOR_HOST"] = host
        try:
            yield host
        finally:
            if previous is None:
                os.environ.pop("PUBSUB_EMULATOR_HOST", None)
            else:
                os.environ["PUBSUB_EMULATOR_HOST"] = previous


def _central_config(config: DiscoveryConfig, seed: bytes, work: str) -> DiscoveryConfig:
    """``discover`` of the same records and settings, its output, state and ledger in ``work``."""
    return dataclasses.replace(config, seed=seed, output_dir=FileSystems.join(work, "out"),
                               state_dir=FileSystems.join(work, "state"), ledger_dir=FileSystems.join(work, "ledger"),
                               budget_epsilon=None, budget_delta=None, verbose=False)


def simulate(config: DiscoveryConfig, faults: FleetOptions, round_deadline: float, report_goal: float,
             beam_args: List[str], progress=print, compare: bool = True, secure=None) -> SimulationSummary:
    """Runs the fleet, the server and (``compare``) the central reference; see the module
    docstring. Without the reference, the summary's central fields are empty (None).
    ``secure``: a ``SecureAggregation`` to run every round under, or None."""
    from triehh_beam.evaluation.fleet.devices import SimulatedFleet
    from triehh_beam.evaluation.population import load_population
    from triehh_beam.io.pubsub import client as pubsub
    from triehh_beam.job.batch.driver import run_discovery
    from triehh_beam.job.federated import serve as federated, outputs as federated_outputs

    population = load_population(config.input_pattern, config.input_format,
                                 RecordColumns(config.user_column, config.item_column, config.count_column),
                                 options=config.record_options)
    users = {uid: items for uid, items in population.users.items() if sum(items.values()) > 0}
    registry = Registry.from_ids(users)
    registry_path = FileSystems.join(config.resolved_state_dir, "registry.txt")
    server_config = dataclasses.replace(config, input_pattern=registry_path)
    progress(f"simulated fleet: {len(registry):,} devices from {config.input_pattern}" if config.population
             else f"simulated fleet: the devices of {config.input_pattern} (their number is private: "
                  "--json --verbose)")
    run = uuid.uuid4().hex[:12]
    with _pubsub_host():
        announce = f"projects/{_PROJECT}/topics/triehh-announce-{run}"
        reports = f"projects/{_PROJECT}/topics/triehh-reports-{run}"
        server_sub = f"projects/{_PROJECT}/subscriptions/triehh-server-{run}"
        for topic in (announce, reports):
            pubsub.ensure_topic(topic)
        pubsub.ensure_subscription(server_sub, reports)
        fleet = SimulatedFleet(users, announce, reports, faults)
        # The fleet injects the faults, so it knows when the server has heard every device it will:
        # a round closes then (no report cut off), not at a deadline no dropout can meet.
        source = federated.FederatedSource(registry, announce, server_sub, round_deadline, report_goal,
                                           secure=secure, heard_from_all=fleet.heard_from_all)
        _write_registry(registry, registry_path, config)
        options = PipelineOptions(list(beam_args) + [f"--project={_PROJECT}"])
        started = time.monotonic()

        def keep_draining(read: int) -> bool:
            if time.monotonic() - started > _DRAIN_TIMEOUT_S + round_deadline * (config.max_length + 1):
                return False
            idle = fleet.wait_idle(0)
            return not (idle and read >= _published(fleet.counts()))

        with fleet, pubsub.BatchPublisher() as publisher:
            def publish(topic, messages):
                publisher.publish_many(topic, messages)
                publisher.wait()

            result = federated.run_federated(server_config, source, publish, options, progress, keep_draining)
        elapsed = time.monotonic() - started
        sent = fleet.counts()
    found, estimates = _published_items(result.output)
    truth, central_estimates, same_trie = None, None, None
    if compare:
        central_work = FileSystems.join(config.resolved_state_dir, "central-run")
        progress("central run of the same records (discover, the federated release's keys) for comparison")
        central = run_discovery(_central_config(config, result.release.seed, central_work), release=result.release)
        truth, central_estimates = _published_items(central.output_path)
        same_trie = _read(FileSystems.join(result.output, "trie.pb")) == _read(
            FileSystems.join(FileSystems.split(central.output_path)[0], "trie.pb"))
    received = federated_outputs.label_totals(result)
    return SimulationSummary(
        job_id=result.job_id, devices=len(registry), rounds=len(result.rounds),
        population_public=config.population is not None,
        heavy_hitters=sorted(found, key=str),
        central_heavy_hitters=None if truth is None else sorted(truth, key=str),
        trie_equal_to_central=same_trie,
        recall_vs_central=(len(found & truth) / len(truth)) if truth else None,
        estimates=estimates, central_estimates=central_estimates,
        estimates_equal_to_central=(estimates == central_estimates) if estimates is not None and compare else None,
        seconds=round(elapsed, 2),
        sent=sent, received=received, redelivered=result.redelivered,
        unread=max(0, _published(sent) - sum(received.values())),
        output=result.output, report=result.report_path,
        secure_aggregation=None if secure is None else _secure_totals(
            result.rounds + ([result.estimate] if result.estimate else [])))


def _secure_totals(records: List[dict]) -> dict:
    from triehh_beam.job.federated.serve import secure_totals

    return secure_totals(records)


def _read(path: str) -> bytes:
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()


def _published_items(path: str) -> Tuple[set, Optional[Dict[str, int]]]:
    """The heavy hitters a ``heavy_hitters.json`` (or the directory holding it) publishes, and
    with frequency estimates each published item's and prefix's estimate (keyed by its JSON
    text; None without)."""
    if not path.endswith(".json"):
        path = FileSystems.join(path, "heavy_hitters.json")
    document = json.loads(_read(path))

    def key(value) -> str:
        return json.dumps(value) if isinstance(value, (list, dict)) else value

    if "frequency_estimates" not in document:
        return {key(v) for v in document["heavy_hitters"]}, None
    estimates = {json.dumps(e["item"]): e["estimate"] for e in document["heavy_hitters"]}
    estimates.update({json.dumps({"prefix": e["prefix"]}): e["estimate"] for e in document["frequent_prefixes"]})
    return {key(e["item"]) for e in document["heavy_hitters"]}, estimates


def _published(counts: Dict[str, int]) -> int:
    """Messages the fleet published: reports (late ones included), second copies, corrupt ones."""
    return counts["reports"] + counts["duplicates"] + counts["malformed"]


def _write_registry(registry: Registry, path: str, config: DiscoveryConfig) -> None:
    from triehh_beam.job.state import cas

    cas.make_private_dir(config.resolved_state_dir)
    with FileSystems.create(path) as f:
        f.write(b"".join(uid + b"\n" for uid in registry.ids))


def main(config: DiscoveryConfig, faults: FleetOptions, round_deadline: float, report_goal: float,
         beam_args: List[str], as_json: bool, verbose: bool = False, secure=None) -> int:
    """Runs ``simulate`` and prints its summary; the exact message counts only when ``verbose``
    (marked private, as every count on the console), always in the operator report."""
    from triehh_beam.job.federated import outputs as federated_outputs

    summary = simulate(config, faults, round_deadline, report_goal, beam_args,
                       progress=(lambda line: None) if as_json else (lambda line: print(line, flush=True)),
                       secure=secure)
    if as_json:
        print(json.dumps(summary.document(counts=verbose), sort_keys=True))
        return 0
    recall = "n/a" if summary.recall_vs_central is None else f"{summary.recall_vs_central:.3f}"
    found = counted(len(summary.heavy_hitters), "heavy hitter")
    print(f"federated: {found} in {counted(summary.rounds, 'round')}"
          + ("" if summary.estimates is None else f"; {len(summary.estimates)} frequency estimates"))
    if verbose:  # the central run reuses the federated release's keys: a second release, private
        print(f"central comparison (private, {summary.seconds:.1f} s): central {len(summary.central_heavy_hitters or [])}; "
              f"recall vs central {recall}; same trie: {'yes' if summary.trie_equal_to_central else 'no'}"
              + ("" if summary.estimates_equal_to_central is None else
                 f"; estimates equal to central: {'yes' if summary.estimates_equal_to_central else 'no'}"))
    print(federated_outputs.console_guarantee(summary.estimates is not None, summary.secure_aggregation is not None))
    if not verbose:
        print(f"published: {summary.output}; the central comparison and message counts (private): --verbose; "
              "the counts also in the operator report "
              f"{summary.report}")
        return 0
    if summary.secure_aggregation is not None:
        lost = summary.secure_aggregation
        print(f"secure aggregation: {lost['unmasked']:,} of {lost['cohorts']:,} cohorts unmasked; "
              f"{lost['cohorts'] - lost['unmasked']:,} dropped whole "
              + ("(" + ", ".join(f"{n} at {p}" for p, n in sorted(lost["dropped_by_phase"].items())) + ") "
                 if lost["dropped_by_phase"] else "")
              + f"with {lost['devices_in_dropped_cohorts']:,} devices; {lost['devices_summed']:,} devices summed "
              "(private: counts)")
    print("fleet sent (private, simulated): " + ", ".join(f"{k} {v:,}" for k, v in sorted(summary.sent.items())))
    print("server counted (private): " + ", ".join(f"{k} {v:,}" for k, v in sorted(summary.received.items()) if v)
          + f"; redelivered {summary.redelivered:,}; never read {summary.unread:,}")
    print(f"published: {summary.output}; operator report (private): {summary.report}")
    return 0
