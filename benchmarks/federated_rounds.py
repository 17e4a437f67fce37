"""A whole federated discovery through the Pub/Sub emulator: ``triehh federated simulate``'s
server, streaming collector and simulated fleet for N devices (the first N users of the bundled
population, one word each), no faults, and, beside it, the central ``discover`` of the same
records. Prints per N: m, rounds, reports read, the federated job's wall seconds (from the
first announcement until every report is read), reports per second, and the central run's
seconds, with whether the two tries are equal.

    python benchmarks/federated_rounds.py --devices 5000 20000 50000
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time

import pyarrow.parquet as pq

from triehh_beam.evaluation.demo import DEMO_POPULATION_PATH
from triehh_beam.evaluation.fleet import run as fleet_run
from triehh_beam.io.pubsub.emulator import start_pubsub_emulator
from triehh_beam.job.batch.driver import run_discovery
from triehh_beam.job.settings.config import DiscoveryConfig


def _one(devices: int, work: str, epsilon: float, max_length: int) -> dict:
    records = os.path.join(work, f"records-{devices}.parquet")
    pq.write_table(pq.read_table(DEMO_POPULATION_PATH).slice(0, devices), records)
    config = DiscoveryConfig(input_pattern=records, output_dir=os.path.join(work, f"out-{devices}"),
                             epsilon=epsilon, delta=1e-6, max_length=max_length, seed=os.urandom(32),
                             protocol="triehh")
    summary = fleet_run.simulate(config, fleet_run.fleet_options(latency=0.05), 600.0, 1.0, [], progress=lambda _: None,
                                 compare=False)
    received = sum(summary.received.values())
    registry_config = dataclasses.replace(config, input_pattern=os.path.join(config.resolved_state_dir, "registry.txt"))
    central = dataclasses.replace(config, output_dir=os.path.join(work, f"central-{devices}"))
    started = time.monotonic()
    run_discovery(central, identity=registry_config.sampling_identity())
    central_seconds = time.monotonic() - started
    with open(os.path.join(summary.output, "trie.pb"), "rb") as a, open(os.path.join(central.output_dir, "trie.pb"), "rb") as b:
        same = a.read() == b.read()
    return {"devices": devices, "rounds": summary.rounds, "reports": received, "seconds": summary.seconds,
            "reports_per_second": received / summary.seconds, "central_seconds": central_seconds, "same_trie": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--max-length", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, start_pubsub_emulator() as host:
        os.environ["PUBSUB_EMULATOR_HOST"] = host
        print("| devices | rounds | reports read | federated s | reports/s | central discover s | same trie |")
        print("|---:|---:|---:|---:|---:|---:|---|")
        for n in args.devices:
            row = _one(n, work, args.epsilon, args.max_length)
            print(f"| {row['devices']:,} | {row['rounds']} | {row['reports']:,} | {row['seconds']:.1f} | "
                  f"{row['reports_per_second']:,.0f} | {row['central_seconds']:.1f} | {'yes' if row['same_trie'] else 'no'} |",
                  flush=True)


if __name__ == "__main__":
    main()
