"""``triehh federated serve`` as a user runs it: a subprocess against the Pub/Sub emulator, the
fleet answering from the test; and its refusals, each one line, before anything is spent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.e2e.federated_jobs import SEED, central_discovery, federated_config, fleet_population, new_topics
from triehh_beam.evaluation.fleet.devices import SimulatedFleet
from triehh_beam.evaluation.fleet.faults import FleetOptions

PROJECT = "projects/test-project"


def _serve(tmp_path, registry_path, announce, subscription, env=None, timeout=300, python=("-m", "triehh_beam.cli")):
    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    command = [sys.executable, *python, "federated", "serve", "--devices", str(registry_path),
               "--announce-topic", announce, "--reports-subscription", subscription,
               "--output", str(tmp_path / "out"), "--seed-file", str(seed), "--epsilon", "8", "--delta", "1e-6",
               "--max-length", "8", "--round-deadline", "60", "--project", "test-project"]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env or dict(os.environ))


def test_serve_against_a_fleet_publishes_the_central_trie(pubsub_emulator, tmp_path):
    records, users, _, registry_path = fleet_population(tmp_path, n=2000)
    announce, reports, subscription = new_topics()
    with SimulatedFleet(users, announce, reports, FleetOptions(latency_median_s=0.05)):
        done = _serve(tmp_path, registry_path, announce, subscription)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "round 1: closed (report goal)" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert "assuming honest, non-colluding devices" in done.stdout  # the trust model, on the console
    central_trie, _ = central_discovery(tmp_path, records, federated_config(tmp_path, registry_path))
    assert (tmp_path / "out" / "trie.pb").read_bytes() == central_trie
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    assert "fed" in published["heavy_hitters"] and "federated" in published
    assert "honest, non-colluding devices" in published["federated"]["trust_model"]
    # Published: no count of any kind (reports, votes, n: not declared public).
    text = json.dumps(published)
    for private in ("voted", "abstained", "duplicate", "labels", '"population"'):
        assert private not in text


def test_a_missing_subscription_is_refused_before_anything_is_spent(pubsub_emulator, tmp_path):
    _, _, _, registry_path = fleet_population(tmp_path, n=500)
    done = _serve(tmp_path, registry_path, f"{PROJECT}/topics/a-topic", f"{PROJECT}/subscriptions/missing")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"triehh federated serve: error: the subscription {PROJECT}/subscriptions/missing does not exist: "
        "create it on the topic the devices' reports are published to"]
    assert not (tmp_path / "out.state" / "ledger.jsonl").exists()


# ``triehh`` as ``python -m triehh_beam.cli`` runs it, with the subscription check's retry
# deadline (``pubsub.DEFAULT_TIMEOUT_S``, 30 s, which no flag sets) bound to 2 s: an unreachable
# host costs that deadline, and nothing else about the command changes.
_SHORT_PUBSUB_TIMEOUT = ("-c", "import functools, sys; from triehh_beam.io.pubsub import client as pubsub; "
                         "pubsub.check_subscription = functools.partial(pubsub.check_subscription, timeout=2); "
                         "from triehh_beam.cli.dispatch import main; sys.exit(main())")


def test_an_unreachable_pubsub_is_one_line_and_spends_nothing(tmp_path):
    _, _, _, registry_path = fleet_population(tmp_path, n=500)
    env = dict(os.environ, PUBSUB_EMULATOR_HOST="127.0.0.1:9")  # discard port: nothing listens
    done = _serve(tmp_path, registry_path, f"{PROJECT}/topics/t", f"{PROJECT}/subscriptions/s", env=env,
                  python=_SHORT_PUBSUB_TIMEOUT)
    assert done.returncode == 1, done.stderr[-2000:]  # transient: retry
    assert len(done.stderr.strip().splitlines()) == 1 and "did not answer within 2 s" in done.stderr, done.stderr
    assert not (tmp_path / "out.state" / "ledger.jsonl").exists()


@pytest.mark.parametrize("content,message", [
    (b"", "holds no device id"),
    (b"\xff\xfe\n", "is not UTF-8 text"),
])
def test_a_bad_registry_is_refused(tmp_path, capsys, content, message):
    """In process (``triehh``'s ``main``): the registry is read before Beam or Pub/Sub is touched,
    and the subprocess's console is what the tests above check."""
    from triehh_beam.cli.dispatch import main

    registry = tmp_path / "registry.txt"
    registry.write_bytes(content)
    (tmp_path / "seed.bin").write_bytes(SEED)
    code = main(["federated", "serve", "--devices", str(registry), "--announce-topic", f"{PROJECT}/topics/t",
                 "--reports-subscription", f"{PROJECT}/subscriptions/s", "--output", str(tmp_path / "out"),
                 "--seed-file", str(tmp_path / "seed.bin"), "--epsilon", "8", "--delta", "1e-6", "--max-length", "8",
                 "--round-deadline", "60", "--project", "test-project"])
    assert code == 2 and message in capsys.readouterr().err
