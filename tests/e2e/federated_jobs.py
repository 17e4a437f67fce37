"""The federated end-to-end tests' shared inputs and runs: records of the bundled population with a
planted heavy hitter, ``triehh federated simulate`` as a subprocess, the in-process server against
a simulated fleet on fresh emulator topics, and what a federated job committed to its state."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from triehh_beam.evaluation.demo import DEMO_POPULATION_PATH
from triehh_beam.evaluation.fleet import run as fleet_run
from triehh_beam.evaluation.fleet.devices import SimulatedFleet
from triehh_beam.evaluation.fleet.faults import FleetOptions
from triehh_beam.io.pubsub import client as pubsub
from triehh_beam.job.batch.driver import run_discovery
from triehh_beam.job.federated import serve as federated
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.federated.selection import Registry

__all__ = ["FLAGS", "SEED", "Crash", "central_discovery", "committed_release", "committed_state",
           "demo_records", "estimates_of", "federated_config", "fleet_population", "new_topics",
           "published_messages", "run_simulate", "serve_fleet"]

SEED = bytes(range(100, 132))
FLAGS = ["--epsilon", "8", "--delta", "1e-6", "--max-length", "8"]


def demo_records(path, users: int) -> str:
    """``users`` users of the bundled population; every fifth also holds the next user's word
    (two items, so the device's item choice matters), and every fourth holds "fed" instead
    of its word ("fed", a planted heavy hitter: small populations then discover something whatever the
    sample, which the run's temporary paths, in the job's identity, make random)."""
    table = pq.read_table(DEMO_POPULATION_PATH).slice(0, users)
    ids, items = table.column("user_id").to_pylist(), table.column("item").to_pylist()
    items = ["fed" if i % 4 == 0 else item for i, item in enumerate(items)]
    rows = {"user_id": list(ids), "item": list(items), "count": [1] * users}
    for i in range(0, users - 1, 5):
        rows["user_id"].append(ids[i])
        rows["item"].append(items[i + 1])
        rows["count"].append(2)
    pq.write_table(pa.table(rows), path)
    return str(path)


def run_simulate(tmp_path, name, records, *extra):
    """``triehh federated simulate`` of ``records`` to ``tmp_path/name``, ``SEED``, ``FLAGS``: its summary."""
    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    command = [sys.executable, "-m", "triehh_beam.cli", "federated", "simulate", "--input", records,
               "--output", str(tmp_path / name), "--seed-file", str(seed), "--json", "--verbose", *FLAGS, *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {**summary, **summary.pop("private")}  # --verbose: the private fields, marked as such


def published_messages(sent):
    """How many messages the fleet published, of its ``sent`` counts (reports, duplicates, malformed)."""
    return sent["reports"] + sent["duplicates"] + sent["malformed"]



def federated_config(tmp_path, registry_path, **changes) -> DiscoveryConfig:
    """The federated job of the registry at ``registry_path``: epsilon 8, delta 1e-6, L = 8, ``SEED``."""
    return DiscoveryConfig(input_pattern=str(registry_path), output_dir=str(tmp_path / "out"), epsilon=8.0,
                           delta=1e-6, max_length=8, seed=SEED, **changes)


class Crash(Exception):
    """Raised by a test's hook where it stops the server, as a crash would."""


def new_topics():
    """Fresh announce and report topics on the emulator and the server's subscription to the reports."""
    project = "projects/test-project"
    suffix = os.urandom(4).hex()
    announce, reports = f"{project}/topics/announce-{suffix}", f"{project}/topics/reports-{suffix}"
    server_sub = f"{project}/subscriptions/server-{suffix}"
    for topic in (announce, reports):
        pubsub.ensure_topic(topic)
    pubsub.ensure_subscription(server_sub, reports)
    return announce, reports, server_sub


def serve_fleet(config, users, registry, *, publish_hook=None, after_publish=None, deadline=60.0,
                      topics=None, quiet=0.4):
    """The job against a fleet of ``users`` (no faults). ``quiet``: once a round's close is
    decided, how long the log must stay quiet (``FederatedSource.quiet_seconds``, 2 s by default,
    paid every round): a round these tests close by its report goal already holds every report
    it counts when the goal is seen, so the catch-up only reads early what the next round would;
    a test whose round closes at a passed deadline keeps the default."""
    announce, reports, server_sub = topics or new_topics()
    source = federated.FederatedSource(registry, announce, server_sub, round_deadline=deadline, poll_seconds=0.2,
                                       quiet_seconds=quiet)
    with SimulatedFleet(users, announce, reports, FleetOptions(latency_median_s=0.05)) as fleet, \
            pubsub.BatchPublisher() as publisher:
        def publish(topic, messages):
            if publish_hook:
                publish_hook(topic, messages)
            publisher.publish_many(topic, messages)
            publisher.wait()
            if after_publish:
                after_publish(topic, messages)

        def keep_draining(read):
            return not (fleet.wait_idle(0) and read >= fleet_run._published(fleet.counts()))

        result = federated.run_federated(config, source, publish, progress=lambda line: None,
                                         keep_draining=keep_draining)
        fleet.wait_idle(30)
        return result


def fleet_population(tmp_path, n=2000):
    """``n`` users' records, their devices' registry and its file. The streaming DirectRunner's
    Pub/Sub read takes 10 messages a bundle, so a round's time grows with its m devices (252 at
    4,000 users, 126 at 2,000): the in-process tests use 2,000 unless they need more."""
    from triehh_beam.evaluation.population import load_population

    records = demo_records(tmp_path / "records.parquet", n)
    users = load_population(records).users
    registry = Registry.from_ids(users)
    registry_path = tmp_path / "registry.txt"
    registry_path.write_bytes(b"".join(uid + b"\n" for uid in registry.ids))
    return records, users, registry, registry_path


def committed_state(config):
    """A federated job's committed state (``federated/release``: its release and progress)."""
    return StateStore(os.path.join(config.resolved_state_dir, "federated", federated.RELEASE_NAME)).load()


def committed_release(config) -> Release:
    """The release a federated job committed to its state."""
    return Release.of_state(committed_state(config))


def central_discovery(tmp_path, records, config):
    """``discover`` of the same records with the federated job's release (its keys)."""
    central = dataclasses.replace(config, input_pattern=records, output_dir=str(tmp_path / "central"),
                                  state_dir=None, ledger_dir=str(tmp_path / "central-ledger"))
    result = run_discovery(central, release=committed_release(config))
    return (tmp_path / "central" / "trie.pb").read_bytes(), result


def estimates_of(document):
    """A published document's estimates and intervals: (by heavy hitter, by frequent prefix)."""
    return ({json.dumps(e["item"]): (e["estimate"], e["interval"]) for e in document["heavy_hitters"]},
            {json.dumps(e["prefix"]): (e["estimate"], e["interval"]) for e in document["frequent_prefixes"]})
