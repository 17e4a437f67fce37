"""How fast the simulated fleet answers a federated round through the Pub/Sub emulator: N
devices (one word each, Zipf over the bundled demo words), one round with M of them invited
(the keyed bottom-M ranks, as the server selects), the announcement published after the
invitations. Prints, per M, the seconds from the first invitation published until every report
has arrived on the reports topic, and the CPU seconds of this process (server side, fleet and
report collector all run in it), with the fleet's counts.

    python benchmarks/fleet_throughput.py --devices 20000 --invited 1000 5000 20000
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import threading
import time

import numpy as np

from triehh_beam.evaluation import demo
from triehh_beam.evaluation.fleet.devices import SimulatedFleet
from triehh_beam.evaluation.fleet.faults import FleetOptions
from triehh_beam.io.pubsub import client as pubsub
from triehh_beam.io.pubsub import federated_attributes as fa
from triehh_beam.io.pubsub.emulator import start_pubsub_emulator
from triehh_beam.protocol.federated.messages import Invitation, RoundAnnouncement
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness.keyed_hash import pack_messages
from triehh_beam.protocol.randomness.sampling import Sampler

PROJECT = "bench"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _devices(n: int):
    words = [w for w, _ in demo.truth(demo.demo_population_path()) if w.isalpha() and len(w) <= 9][:2000]
    weights = 1.0 / np.arange(1, len(words) + 1)
    picks = np.random.default_rng(1).choice(len(words), size=n, p=weights / weights.sum())
    return {f"device-{i:06d}".encode(): {words[w]: 1} for i, w in enumerate(picks)}


def run_round(devices, invited: int, run: int, options: FleetOptions) -> dict:
    suffix, job, round_index = f"{invited}-{run}", f"bench-{invited}-{run}", 1
    announce, reports = f"projects/{PROJECT}/topics/announce-{suffix}", f"projects/{PROJECT}/topics/reports-{suffix}"
    collect = f"projects/{PROJECT}/subscriptions/collect-{suffix}"
    for topic in (announce, reports):
        pubsub.ensure_topic(topic)
    pubsub.ensure_subscription(collect, reports)
    sampler = Sampler(bytes(32), job.encode())
    chosen = sampler.sample(round_index, devices, invited)
    encoder = ItemEncoder(max_length=10)
    announcement = RoundAnnouncement(job, round_index, encoder, {()}, int((time.time() + 600) * 1000))
    arrived = []
    lock = threading.Lock()

    def on_report(message):
        with lock:
            arrived.append(time.monotonic())
        message.ack()

    with pubsub.PullLoop(collect, on_report), SimulatedFleet(devices, announce, reports, options) as fleet:
        with pubsub.BatchPublisher() as publisher:
            # The server's side, made before the clock starts (a server computes the words in batches).
            data, offsets = pack_messages(chosen)
            words = sampler.round_keys(round_index).choice_words_packed(data, offsets)
            invitations = [(Invitation(job, round_index, d, hashlib.sha256(d).digest()[:16], int(w)).to_bytes(),
                            fa.invitation_attributes(job, round_index, d)) for d, w in zip(chosen, words)]
            cpu, started = _cpu(), time.monotonic()
            publisher.publish_many(announce, invitations)
            publisher.publish(announce, announcement.to_bytes(), fa.announcement_attributes(job, round_index))
            publisher.wait()
            published = time.monotonic() - started
        while len(arrived) < invited and time.monotonic() - started < 600:
            time.sleep(0.01)
        elapsed = max(arrived) - started
        cpu = _cpu() - cpu
        counts = fleet.counts()
    return {"invited": invited, "published_s": published, "all_reports_s": elapsed, "cpu_s": cpu,
            "reports": counts["reports"], "invitations": counts["invitations"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=20_000)
    parser.add_argument("--invited", type=int, nargs="+", default=[1000, 5000, 20_000])
    parser.add_argument("--latency-median", type=float, default=0.05)
    args = parser.parse_args()
    devices = _devices(args.devices)
    options = FleetOptions(latency_median_s=args.latency_median, latency_spread=0.5, latency_max_s=1.0)
    with start_pubsub_emulator() as host:
        os.environ["PUBSUB_EMULATOR_HOST"] = host
        print(f"{args.devices} devices, lognormal latency median {args.latency_median} s spread 0.5 (cap 1 s)")
        print("invited | invitations published (s) | all reports arrived (s) | CPU (s) | reports/s")
        for run, invited in enumerate(args.invited):
            r = run_round(devices, invited, run, options)
            assert r["reports"] == r["invitations"] == invited, r
            print(f"{invited:,} | {r['published_s']:.2f} | {r['all_reports_s']:.2f} | {r['cpu_s']:.2f} | "
                  f"{invited / r['all_reports_s']:,.0f}")


if __name__ == "__main__":
    main()
