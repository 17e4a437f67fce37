"""Every federated run is a release (``job.release.lifecycle``, issue 24 finding 3): a run after the state
was deleted draws a fresh nonce, so it selects other devices under another job id and is charged
again under another record id; a resume (a crash after the first announcement) keeps the
committed nonce, selects the same devices and finds its one charge. Each run here stops at its
first invitations (the charge and the release are committed before them), so no fleet answers."""

from __future__ import annotations

import shutil

import pytest

from tests.e2e.federated_jobs import federated_config, fleet_population, new_topics
from triehh_beam.io.pubsub import client as pubsub
from triehh_beam.job.federated import serve as federated
from triehh_beam.job.state.ledger import Ledger


class _Stop(Exception):
    pass


def _first_invitations(config, registry):
    """Runs the server until it publishes round 1's invitations; returns (job id, the invited
    device ids), both read from the published messages."""
    announce, _, server_sub = new_topics()
    pubsub.ensure_subscription(announce.replace("/topics/", "/subscriptions/") + "-devices", announce)
    source = federated.FederatedSource(registry, announce, server_sub, round_deadline=60.0, poll_seconds=0.2)
    seen = {}

    def publish(topic, messages):
        attributes = messages[0][1]
        if attributes["kind"] == "invitation":
            seen["job"] = attributes["job"]
            seen["devices"] = sorted(a["device"] for _, a in messages)
            raise _Stop()
        # The rest is published (the announcement, and the server's stop nudge to its collector:
        # swallowed, the collector's cancel waited out a quiet 30-s pull, every run).
        with pubsub.BatchPublisher() as publisher:
            publisher.publish_many(topic, messages)
            publisher.wait()

    with pytest.raises(_Stop):
        federated.run_federated(config, source, publish, progress=lambda line: None)
    return seen["job"], seen["devices"]


def test_a_rerun_after_the_state_is_deleted_is_a_new_release_charged_again(pubsub_emulator, tmp_path):
    _, _, registry, registry_path = fleet_population(tmp_path, n=2000)
    ledger_dir = tmp_path / "ledger"  # outside the state directory: it outlives it
    config = federated_config(tmp_path, registry_path, ledger_dir=str(ledger_dir))
    job_1, devices_1 = _first_invitations(config, registry)
    # A crash after the first announcement: the resume keeps the release (same job, same
    # devices) and its one charge.
    resumed_job, resumed_devices = _first_invitations(config, registry)
    assert (resumed_job, resumed_devices) == (job_1, devices_1)
    assert len(Ledger(str(ledger_dir)).records()) == 1
    # The state deleted (same seed file, settings, registry and output): a new release.
    shutil.rmtree(config.resolved_state_dir)
    job_2, devices_2 = _first_invitations(config, registry)
    records = [r["record_id"] for r in Ledger(str(ledger_dir)).records()]
    assert len(records) == 2 and records[0] != records[1], records
    assert job_1 in records[0] and job_2 in records[1] and job_1 != job_2
    # Devices selected twice independently (TrieHH++: each with probability p_s): the same set
    # has probability about 2^-2000.
    assert devices_1 and devices_2 and devices_1 != devices_2


def test_a_resume_with_another_ledger_is_refused_in_one_line(pubsub_emulator, tmp_path):
    _, _, registry, registry_path = fleet_population(tmp_path, n=2000)
    config = federated_config(tmp_path, registry_path, ledger_dir=str(tmp_path / "ledger"))
    _first_invitations(config, registry)
    moved = federated_config(tmp_path, registry_path, ledger_dir=str(tmp_path / "another-ledger"))
    announce, _, server_sub = new_topics()
    pubsub.ensure_subscription(announce.replace("/topics/", "/subscriptions/") + "-devices", announce)
    source = federated.FederatedSource(registry, announce, server_sub, round_deadline=60.0)
    with pytest.raises(ValueError, match="holds no charge"):
        federated.run_federated(moved, source, lambda topic, messages: None, progress=lambda line: None)


def test_an_output_that_is_a_file_is_refused_before_anything_is_charged(tmp_path):
    _, _, registry, registry_path = fleet_population(tmp_path, n=500)
    (tmp_path / "out").write_text("not a directory")
    config = federated_config(tmp_path, registry_path, ledger_dir=str(tmp_path / "ledger"))
    source = federated.FederatedSource(registry, "projects/p/topics/t", "projects/p/subscriptions/s")
    with pytest.raises(ValueError, match="is not a directory"):
        federated.run_federated(config, source, lambda topic, messages: None, progress=lambda line: None)
    assert not (tmp_path / "ledger").exists()


def test_a_federated_release_is_committed_then_charged_then_marked_charged(pubsub_emulator, tmp_path, monkeypatch):
    from tests.release_events import check_order, record_events

    _, _, registry, registry_path = fleet_population(tmp_path, n=2000)
    config = federated_config(tmp_path, registry_path, ledger_dir=str(tmp_path / "ledger"))
    events = record_events(monkeypatch)
    job_id, _ = _first_invitations(config, registry)
    charged = check_order(events)
    assert len(charged) == 1 and job_id in charged[0]
    assert [r["record_id"] for r in Ledger(str(tmp_path / "ledger")).records()] == charged
