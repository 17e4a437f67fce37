#!/usr/bin/env python
"""Sizes of the federated messages (issue 13): the RoundAnnouncement of a round whose frontier
holds 1,000 prefixes, front-coded, against the same frontier as the older FrontierBroadcast (one
Prefix message per prefix), and the Invitation and VoteReport a device receives and sends.

Frontiers: for each prefix length 2..6 (rounds 3..7), the 1,000 prefixes of that length held by
the most users of the bundled demo population (200,000 users, one English word each; fewer
when fewer exist), text units of 1 character, L = 10; and 1,000 distinct random prefixes of
random bytes (units of 1 byte) of the same lengths. Every message is built and serialized by
the library (``protocol/federated/messages.py``) and parsed back; the device's costs (parse the
announcement, answer one invitation) are timed on this machine, best of 5.

Usage (from the repository root)::

  python benchmarks/federated_messages.py            # the tables, as in benchmarks/README.md
  python benchmarks/federated_messages.py --json out.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time
import zlib
from typing import Dict, List

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import pyarrow.parquet as pq  # noqa: E402

from triehh_beam.device import DeviceClient  # noqa: E402
from triehh_beam.evaluation.demo import demo_population_path  # noqa: E402
from triehh_beam.proto import vote_pb2  # noqa: E402
from triehh_beam.protocol.items.encoding import ItemEncoder  # noqa: E402
from triehh_beam.protocol.federated.messages import Invitation, RoundAnnouncement, VoteReport  # noqa: E402
from triehh_beam.protocol.rounds.wire import SCHEMA_VERSION, encoding_to_proto  # noqa: E402

PREFIXES = 1000
LENGTHS = range(2, 7)
JOB_ID = "job-2026-11-23-keyboard-words"  # a realistic job id: 29 characters
DEADLINE = 1_795_000_000_000
TEXT = ItemEncoder(max_length=10)
BYTES = ItemEncoder(kind="bytes", max_length=10)


def _best(function, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def demo_frontier(length: int) -> List[tuple]:
    """The ``PREFIXES`` length-``length`` prefixes of demo words held by the most users."""
    words = pq.read_table(demo_population_path(), columns=["item"]).column("item").to_pylist()
    held = collections.Counter(w[:length] for w in words if len(w) >= length)
    ranked = sorted(held.items(), key=lambda pair: (-pair[1], pair[0]))[:PREFIXES]
    return [tuple(prefix) for prefix, _ in ranked]


def random_frontier(length: int, seed: int = 13) -> List[tuple]:
    rng = random.Random(seed * 100 + length)
    prefixes = set()
    while len(prefixes) < PREFIXES:
        prefixes.add(tuple(bytes([rng.randrange(256)]) for _ in range(length)))
    return sorted(prefixes)


def frontier_broadcast_bytes(encoder: ItemEncoder, round_index: int, frontier) -> bytes:
    """The same frontier as a FrontierBroadcast, written as ``Trie.frontier_to_proto`` does."""
    prefixes = sorted(tuple(encoder.unit_to_bytes(u) for u in p) for p in frontier)
    return vote_pb2.FrontierBroadcast(
        schema_version=SCHEMA_VERSION, round_index=round_index, encoding=encoding_to_proto(encoder),
        prefixes=[vote_pb2.Prefix(units=p) for p in prefixes], prefix_count=len(prefixes),
    ).SerializeToString(deterministic=True)


def measure_frontier(kind: str, encoder: ItemEncoder, length: int, frontier) -> Dict:
    round_index = length + 1
    announcement = RoundAnnouncement(JOB_ID, round_index, encoder, frontier, DEADLINE, report_goal=21_978)
    data = announcement.to_bytes()
    assert RoundAnnouncement.from_bytes(data) == announcement
    legacy = frontier_broadcast_bytes(encoder, round_index, frontier)
    sample = next(iter(sorted(frontier)))
    item = ("".join(sample) + "s") if encoder is TEXT else b"".join(sample) + b"s"
    device = DeviceClient({item: 2, ("zz" if encoder is TEXT else b"zz"): 1})
    invitation = Invitation(JOB_ID, round_index, b"8123456789012345678", bytes(16), 2**63)
    invitation_bytes = invitation.to_bytes()
    return {
        "frontier": kind,
        "prefix_length": length,
        "round": round_index,
        "prefixes": len(frontier),
        "announcement_bytes": len(data),
        "announcement_bytes_per_prefix": round(len(data) / len(frontier), 2),
        "announcement_zlib_bytes": len(zlib.compress(data, 9)),
        "frontier_broadcast_bytes": len(legacy),
        "frontier_broadcast_bytes_per_prefix": round(len(legacy) / len(frontier), 2),
        "compact_over_broadcast": round(len(data) / len(legacy), 3),
        "device_parse_ms": round(_best(lambda: RoundAnnouncement.from_bytes(data)) * 1e3, 2),
        "device_respond_bytes_ms": round(_best(lambda: device.respond_bytes(data, invitation_bytes)) * 1e3, 2),
    }


def message_sizes() -> List[Dict]:
    rows = []
    for device_id in (b"8123456789012345678", b"device-7f3a9c2e-1b4d-4e8a-9c1f-2b3d4e5f6a7b"):
        invitation = Invitation(JOB_ID, 7, device_id, bytes(range(16)), 2**64 - 1)
        rows.append({"message": f"Invitation (device id of {len(device_id)} bytes)",
                     "bytes": len(invitation.to_bytes())})
    for r in (1, 3, 6):
        report = VoteReport(JOB_ID, r, bytes(range(16)), tuple("heavy!"[:r]))
        rows.append({"message": f"VoteReport, a {r}-unit text prefix", "bytes": len(report.to_bytes())})
    rows.append({"message": "VoteReport, abstain", "bytes": len(VoteReport(JOB_ID, 6, bytes(range(16)), None).to_bytes())})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    frontiers = []
    for length in LENGTHS:
        frontiers.append(measure_frontier("demo words", TEXT, length, demo_frontier(length)))
    for length in LENGTHS:
        frontiers.append(measure_frontier("random bytes", BYTES, length, random_frontier(length)))
    sizes = message_sizes()

    print(f"Job id of {len(JOB_ID)} characters; a report goal announced; text units of 1 character.\n")
    print("| frontier | prefix length | prefixes | RoundAnnouncement | per prefix | zlib -9 | FrontierBroadcast "
          "| per prefix | compact / broadcast | device: parse (ms) | device: answer (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in frontiers:
        print(f"| {row['frontier']} | {row['prefix_length']} | {row['prefixes']:,} | {row['announcement_bytes']:,} "
              f"| {row['announcement_bytes_per_prefix']} | {row['announcement_zlib_bytes']:,} "
              f"| {row['frontier_broadcast_bytes']:,} | {row['frontier_broadcast_bytes_per_prefix']} "
              f"| {row['compact_over_broadcast']:.2f} | {row['device_parse_ms']} | {row['device_respond_bytes_ms']} |")
    print("\n| message | bytes |\n|---|---:|")
    for row in sizes:
        print(f"| {row['message']} | {row['bytes']} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"frontiers": frontiers, "messages": sizes}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
