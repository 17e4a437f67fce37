"""Federated rounds under secure aggregation through the Pub/Sub emulator (issue 40's "done
when"): with no fault ``federated simulate --secure-aggregation`` publishes the central run's trie;
with 15% of devices dropping at each of the four exchanges, and with every fault kind at every
exchange, it completes, every message the fleet sent is labelled once, and the report says how
many cohorts (and devices) were lost; and no file the server writes, its report log included,
holds a device's plaintext vote encoding (its ``VoteReport`` or its one-hot vector), which the
same search finds in a plain run's log. With ``--estimate-frequencies`` the estimate round runs
under secure aggregation too: its estimates are the central run's, and no file holds a device's
chosen leaf."""

from __future__ import annotations

import base64
import json
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.e2e.federated_jobs import SEED, demo_records, published_messages, run_simulate
from triehh_beam.device.secagg import SecureVoteSession
from triehh_beam.evaluation.fleet import run as fleet_run, secagg as fleet_secagg
from triehh_beam.job.federated.log import ReportLog
from triehh_beam.job.federated.secagg import SecureAggregation
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.protocol.federated.estimate import EstimateAnnouncement
from triehh_beam.protocol.secagg.cohorts import CohortPolicy

SECURE = ["--secure-aggregation", "--cohort-size", "100"]


@pytest.mark.slow
def test_secure_rounds_without_faults_publish_the_central_trie(pubsub_emulator, tmp_path):
    records = demo_records(tmp_path / "records.parquet", 2000)
    summary = run_simulate(tmp_path, "out", records, "--round-deadline", "60", *SECURE)
    assert summary["trie_equal_to_central"], summary
    assert summary["heavy_hitters"] == summary["central_heavy_hitters"] and summary["heavy_hitters"]
    secure, sent, received = summary["secure_aggregation"], summary["sent"], summary["received"]
    assert secure["unmasked"] == secure["cohorts"] > 0 and secure["devices_in_dropped_cohorts"] == 0
    assert secure["devices_summed"] == sent["invitations"]  # every selected device in a sum
    assert received["counted"] == sent["reports"] == sent["secagg_requests"] == 4 * sent["invitations"]
    assert summary["unread"] == 0 and sum(received.values()) == published_messages(sent)
    published = (tmp_path / "out" / "heavy_hitters.json").read_text()
    assert "secure aggregation" in published and "Sybils" in published  # the default threshold is a majority


@pytest.mark.slow
def test_fifteen_percent_dropping_at_each_exchange_completes_and_counts_the_lost(pubsub_emulator, tmp_path):
    records = demo_records(tmp_path / "records.parquet", 2000)
    summary = run_simulate(tmp_path, "out", records, "--round-deadline", "10", "--dropout", "0.15",
                           "--cohort-threshold", "0.4", *SECURE)
    secure, sent, received = summary["secure_aggregation"], summary["sent"], summary["received"]
    assert summary["unread"] == 0 and sum(received.values()) == published_messages(sent), summary
    assert secure["unmasked"] + sum(secure["dropped_by_phase"].values()) == secure["cohorts"]
    assert secure["unmasked"] > 0 and summary["rounds"] >= 1
    # Each exchange loses 15% of the devices asked: binomial over the requests, 6 sd.
    asked = sent["secagg_requests"]
    assert abs(sent["dropped"] - 0.15 * asked) < 6 * (asked * 0.15 * 0.85) ** 0.5, sent
    # Survivors of all four exchanges: about 0.85^4 of those set up, never more than sent a vector.
    assert secure["devices_summed"] <= sent["invitations"]
    # Every answer counted, unless the machine was so slow that it came after its exchange's deadline:
    # 3.5% did once, on 2 cores shared with other emulator tests (load 6); an exchange misfiled in
    # every round would be about a quarter of the reports.
    assert received["counted"] + received["out_of_phase"] + received["late"] == sent["reports"]
    assert received["out_of_phase"] + received["late"] <= 0.05 * sent["reports"]


@pytest.mark.slow
def test_every_fault_kind_at_every_exchange_is_accounted_for(pubsub_emulator, tmp_path):
    records = demo_records(tmp_path / "records.parquet", 2000)
    summary = run_simulate(tmp_path, "out", records, "--round-deadline", "4", "--dropout", "0.05",
                           "--duplicate", "0.05", "--late", "0.05", "--malformed", "0.05",
                           "--cohort-threshold", "0.4", *SECURE)
    sent, received = summary["sent"], summary["received"]
    assert summary["unread"] == 0 and sum(received.values()) == published_messages(sent), summary
    assert received["duplicate"] == sent["duplicates"] > 0 and received["malformed"] == sent["malformed"] > 0
    assert sent["late"] > 0 and received["out_of_phase"] + received["late"] >= sent["late"], summary
    assert received["not_selected"] == received["other_job"] == 0


def _files(root: pathlib.Path):
    return [p for p in root.rglob("*") if p.is_file()]


def _contents(path: pathlib.Path) -> bytes:
    """A file's bytes, and for the report log's JSON lines each message's decoded body too."""
    data = path.read_bytes()
    if path.suffix == ".jsonl" and "reports" in path.parts:
        data += b"".join(base64.b64decode(json.loads(line)["data"]) for line in data.splitlines() if line)
    return data


@pytest.mark.slow
@pytest.mark.parametrize("secure", [True, False])
def test_no_file_the_server_writes_holds_a_plaintext_vote(pubsub_emulator, tmp_path, monkeypatch, secure):
    records = demo_records(tmp_path / "records.parquet", 1000)
    encodings = []  # every selected device's plaintext report and one-hot vector, per round

    class Recording(SecureVoteSession):
        def __init__(self, client, announcement, setup, *args):
            super().__init__(client, announcement, setup, *args)
            report = client.respond(announcement, self.invitation)
            from triehh_beam.device.secagg import vote_slots
            encodings.append(report.to_bytes())
            encodings.append(vote_slots(announcement, setup.phase).one_hot(report.prefix).astype("<u4").tobytes())

    monkeypatch.setattr(fleet_secagg, "SecureVoteSession", Recording)
    if not secure:  # the plain run: the devices' reports, as the fleet sends them
        from triehh_beam.evaluation.fleet import devices as fleet_module

        original = fleet_module.DeviceClient.respond

        def respond(self, announcement, invitation):
            report = original(self, announcement, invitation)
            encodings.append(report.to_bytes())
            return report
        monkeypatch.setattr(fleet_module.DeviceClient, "respond", respond)
    monkeypatch.setattr(ReportLog, "delete", lambda self: None)  # keep the log to search it
    config = DiscoveryConfig(input_pattern=records, output_dir=str(tmp_path / "out"), epsilon=8.0, delta=1e-6,
                             max_length=8, seed=SEED)
    option = SecureAggregation(CohortPolicy(max_size=100, min_size=10)) if secure else None
    summary = fleet_run.simulate(config, fleet_run.fleet_options(), 60.0, 1.0, [], progress=lambda line: None,
                                 compare=False, secure=option)
    assert summary.rounds >= 2 and encodings
    written = [(p, _contents(p)) for p in _files(tmp_path / "out.state") + _files(tmp_path / "out")]
    assert any(p.parent.name == "reports" or "reports" in p.parts for p, _ in written)  # the log is searched
    found = [(p, e) for e in set(encodings) for p, data in written if e in data]
    if secure:
        assert not found, found[:3]
    else:  # the search can fail: a plain run's log holds every report
        assert found


def _one_letter_items(path, users: int) -> str:
    """Half the users hold "a", two fifths "b", a tenth only "xy" (longer than ``max_length`` 2
    allows: dropped, so the device abstains); every seventh also holds the other letter twice
    (its choice then matters)."""
    rows = {"user_id": [], "item": [], "count": []}
    for i in range(users):
        word = "a" if i % 2 == 0 else ("b" if i % 10 != 9 else "xy")
        rows["user_id"].append(f"user-{i}"), rows["item"].append(word), rows["count"].append(1)
        if i % 7 == 0:
            rows["user_id"].append(f"user-{i}"), rows["item"].append("b" if word == "a" else "a")
            rows["count"].append(2)
    pq.write_table(pa.table(rows), path)
    return str(path)


@pytest.mark.slow
def test_secure_estimates_equal_the_central_ones_and_no_file_holds_a_leaf(pubsub_emulator, tmp_path, monkeypatch):
    # 120 devices, two rounds (one-letter items) and the estimate round, cohorts of at most 20:
    # about 900 reports, 20-30 s. Every exchange closes once every device asked has answered.
    records = _one_letter_items(tmp_path / "records.parquet", 120)
    leaves = []  # each device's chosen leaf in the estimate round: its report and its one-hot vector

    class Recording(SecureVoteSession):
        def __init__(self, client, announcement, setup, *args):
            super().__init__(client, announcement, setup, *args)
            if isinstance(announcement, EstimateAnnouncement):
                from triehh_beam.device.secagg import vote_slots

                report = client.respond(announcement, self.invitation)
                leaves.append(report.to_bytes())
                leaves.append(vote_slots(announcement, setup.phase).one_hot(report.prefix).astype("<u4").tobytes())

    monkeypatch.setattr(fleet_secagg, "SecureVoteSession", Recording)
    monkeypatch.setattr(ReportLog, "delete", lambda self: None)  # keep the log to search it
    config = DiscoveryConfig(input_pattern=records, output_dir=str(tmp_path / "out"), epsilon=8.0, delta=1e-6,
                             max_length=2, seed=SEED, estimate_frequencies=1.0)
    option = SecureAggregation(CohortPolicy(max_size=20, min_size=5))
    summary = fleet_run.simulate(config, fleet_run.fleet_options(latency=0.01), 60.0, 1.0, [],
                                 progress=lambda line: None, secure=option)
    assert summary.trie_equal_to_central
    # Equal counts under the same keyed noise: each cohort sum's slot is the target's exact count.
    assert summary.estimates and len(summary.estimates) >= 2 and summary.estimates_equal_to_central, (
        summary.estimates, summary.central_estimates)
    secure, sent, received = summary.secure_aggregation, summary.sent, summary.received
    assert secure["unmasked"] == secure["cohorts"] > 0 and secure["devices_in_dropped_cohorts"] == 0
    assert secure["devices_summed"] == sent["invitations"]  # the estimate round's 120 included
    assert received["counted"] == sent["reports"] == 4 * sent["invitations"]
    assert len(leaves) == 2 * 120  # every enrolled device chose a leaf or abstained
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    assert "of the leaves its devices chose" in published["federated"]["server_sees"]
    written = [(p, _contents(p)) for p in _files(tmp_path / "out.state") + _files(tmp_path / "out")]
    assert any("reports" in p.parts for p, _ in written)  # the log is searched
    found = [(p, e) for e in set(leaves) for p, data in written if e in data]
    assert not found, found[:3]
