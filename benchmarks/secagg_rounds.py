#!/usr/bin/env python
"""Costs of secure aggregation per round and cohort (issue 40): for cohorts of 100, 500 and
1,000 devices and vote vectors of 1,000 and 10,000 slots, one device's CPU time and the bytes it
sends and receives (the serialized ``SecAggRequest``/``SecAggReport`` of the four exchanges; the
announcement is a plain round's too), and the server's CPU time for the cohort (routing, the
masked sum, the Shamir reconstructions and mask removal), with no dropout and with 5% of the
devices dropping after sharing, before their masked input (the costly case: each dropped device's pairwise masks are
recomputed against every survivor). Every device runs the real protocol (``protocol/secagg``),
in one process; the threshold is 2/3 of the cohort.

Usage (from the repository root)::

  python benchmarks/secagg_rounds.py                      # the table, as in benchmarks/README.md
  python benchmarks/secagg_rounds.py --sizes 100 --slots 1000
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402

from triehh_beam.protocol.secagg.crypto import CohortContext  # noqa: E402
from triehh_beam.protocol.secagg.device import SecAggDevice  # noqa: E402
from triehh_beam.protocol.secagg.messages import (  # noqa: E402
    Inbox, Keys, Masked, Roster, SecAggReport, SecAggRequest, Setup, Shares, Survivors, Unmask)
from triehh_beam.protocol.secagg.server import SecAggCohort  # noqa: E402

JOB, TOKEN = "federated-0123456789abcdef0123456789abcdef", bytes(16)
INVITATION_BYTES = 86  # a serialized Invitation with this job id and a 9-byte device id


def _cpu(fn, *args):
    start = time.process_time()
    out = fn(*args)
    return out, time.process_time() - start


def run(size: int, slots: int, drop_fractions, seed: int = 0) -> list:
    """One cohort's four exchanges; from the masked inputs on, once per drop fraction (the
    devices copied, so each unmasking starts from the same shared state)."""
    rng = np.random.default_rng(seed)
    context = CohortContext(JOB, 3, 0)
    threshold = math.ceil(2 * size / 3)
    votes = rng.integers(0, slots, size)
    devices = []
    for i in range(size):
        vector = np.zeros(slots, dtype=np.uint32)
        vector[votes[i]] = 1
        devices.append(SecAggDevice(context, i + 1, size, threshold, vector, os.urandom))
    server = SecAggCohort(context, size, threshold, slots)
    device_cpu, server_cpu = 0.0, 0.0
    sent = received = 0

    def request(phase):
        return len(SecAggRequest(JOB, 3, TOKEN, phase).to_bytes())

    def report(phase):
        return len(SecAggReport(JOB, 3, TOKEN, phase).to_bytes())

    received += request(Setup(0, 1, size, threshold, tuple(bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyz"),
                              slots, bytes(INVITATION_BYTES)))
    adverts = {}
    for d in devices:
        keys, cpu = _cpu(d.advertise)
        adverts[d.index] = keys
        device_cpu += cpu if d.index == 1 else 0
    sent += report(Keys(*adverts[1]))
    roster, cpu = _cpu(server.keys, adverts)
    server_cpu += cpu
    received += request(Roster(tuple((i, c, m) for i, (c, m) in roster.items())))
    outs = {}
    for d in devices:
        outs[d.index], cpu = _cpu(d.share, roster)
        device_cpu += cpu if d.index == 1 else 0
    sent += report(Shares(tuple(outs[1].items())))
    inbox, cpu = _cpu(server.shares, outs)
    server_cpu += cpu
    received += request(Inbox(tuple(inbox[1].items())))
    inputs = {}
    for d in devices:
        inputs[d.index], cpu = _cpu(d.mask, inbox[d.index])
        device_cpu += cpu if d.index == 1 else 0
    sent += report(Masked.of(inputs[1]))
    rows = []
    for drop in drop_fractions:
        dropped = set(range(size - int(drop * size) + 1, size + 1))
        cohort, peers = copy.deepcopy(server), copy.deepcopy(devices)
        survivors, cpu_masked = _cpu(cohort.masked, {i: v for i, v in inputs.items() if i not in dropped})
        responses, unmask_cpu = {}, 0.0
        for d in peers:
            if d.index in survivors:
                responses[d.index], cpu = _cpu(d.unmask, survivors)
                unmask_cpu += cpu if d.index == 1 else 0
        total, cpu_unmask = _cpu(cohort.unmask, responses)
        expected = np.bincount(votes[[i - 1 for i in survivors]], minlength=slots)
        assert total.tolist() == expected.tolist(), "the unmasked sum differs from the survivors' votes"
        unmask = report(Unmask(tuple((o, k, s) for o, (k, s) in responses[1].items())))
        rows.append({"cohort": size, "slots": slots, "dropped": len(dropped),
                     "device_cpu_s": round(device_cpu + unmask_cpu, 3),
                     "device_sent_bytes": sent + unmask, "device_received_bytes": received + request(Survivors(survivors)),
                     "server_cpu_s": round(server_cpu + cpu_masked + cpu_unmask, 3)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--slots", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--drop", type=float, nargs="+", default=[0.0, 0.05])
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    rows = []
    print("| cohort | slots | dropped before masked input | device CPU (s) | device sends | device receives | server CPU (s) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        for slots in args.slots:
            for row in run(size, slots, args.drop):
                rows.append(row)
                print(f"| {size:,} | {slots:,} | {row['dropped']} | {row['device_cpu_s']:.3f} | "
                      f"{row['device_sent_bytes']:,} B | {row['device_received_bytes']:,} B | "
                      f"{row['server_cpu_s']:.3f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
