"""Regenerate the secure-aggregation test vectors (``secagg_vectors.json``) from the Python
reference: one cohort of four devices (threshold 3) of a text round, every device's secrets
drawn from a seeded stream (``random.Random(seed).randbytes``: a port replays the same bytes),
and every message of the four exchanges as hex, device by device, with the server's unmasked sum;
device 4 drops after sharing (it never masks), so the unmasking recovers its mask key.
``tests/device/test_secagg_vectors.py`` checks that the committed file equals a fresh generation
and replays every device from its records, seed and requests to the same report bytes.

Usage:
  python tests/vectors/secagg_generate.py            # rewrite the committed file
  python tests/vectors/secagg_generate.py --check    # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from triehh_beam.device import DeviceClient  # noqa: E402
from triehh_beam.device.secagg import SecureVoteSession  # noqa: E402
from triehh_beam.protocol.encoding import ItemEncoder  # noqa: E402
from triehh_beam.protocol.federated import Invitation, RoundAnnouncement  # noqa: E402
from triehh_beam.protocol.secagg.cohorts import CohortPolicy  # noqa: E402
from triehh_beam.protocol.secagg.messages import SecAggRequest  # noqa: E402
from triehh_beam.protocol.secagg.round import SecureRound  # noqa: E402
from triehh_beam.protocol.secagg.vectors import round_candidates  # noqa: E402

VECTORS = ROOT / "tests" / "vectors" / "secagg_vectors.json"
FORMAT = "triehh-secagg-vectors/1"
JOB, ROUND, ALPHABET = "job-secagg-vectors", 2, "abc"
RECORDS = [{"ab": 2, "ca": 1}, {"ba": 1}, {"abc": 1, "b": 1}, {"zz": 1}]


def build_vectors() -> dict:
    """The whole vector document (a pure function of the Python library and the constants)."""
    encoder = ItemEncoder(max_length=4)
    announcement = RoundAnnouncement(JOB, ROUND, encoder, {("a",), ("b",), ("c",)}, 1_790_000_000_000)
    rng = random.Random(40)
    invitations = [Invitation(JOB, ROUND, b"device-%d" % i, rng.randbytes(16), rng.getrandbits(64))
                   for i in range(len(RECORDS))]
    slots = round_candidates(announcement.frontier, list(ALPHABET), encoder.eos)
    server = SecureRound(JOB, ROUND, [inv.token for inv in invitations], CohortPolicy(max_size=8, min_size=2, fraction=0.75),
                         slots, tuple(u.encode() for u in ALPHABET))
    by_token = {inv.token: i for i, inv in enumerate(invitations)}
    devices = [{"records": [[item, count] for item, count in sorted(r.items())], "seed": 1000 + i,
                "exchanges": []} for i, r in enumerate(RECORDS)]
    sessions = {}
    requests = server.setups({inv.token: inv.to_bytes() for inv in invitations})
    for phase in range(4):
        for token, request in requests:
            i = by_token[token]
            if phase == 0:
                sessions[i] = SecureVoteSession(DeviceClient(RECORDS[i]), announcement, SecAggRequest.from_bytes(request),
                                                random.Random(1000 + i).randbytes)
                report = sessions[i].keys()
            elif phase == 2 and i == 3:
                continue  # device 4 drops after sharing: the others' shares of its mask key unmask the sum
            else:
                report = sessions[i].handle_bytes(request)
            devices[i]["exchanges"].append({"request": request.hex(), "report": report.hex()})
            server.add(report)
        requests = server.close_phase()
    return {"format": FORMAT, "announcement": announcement.to_bytes().hex(), "devices": devices,
            "sum": server.total().tolist(), "slots": [list(c) for c in slots.candidates]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = json.dumps(build_vectors(), indent=1, sort_keys=True) + "\n"
    if args.check:
        if not VECTORS.exists() or VECTORS.read_text() != text:
            print(f"{VECTORS} is stale: run python tests/vectors/secagg_generate.py", file=sys.stderr)
            return 1
        return 0
    VECTORS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
