"""Regenerate the secure-aggregation test vectors (``secagg_vectors.json``) from the Python
reference: one cohort of four devices (threshold 3) of a text round, every device's secrets
drawn from a seeded stream (``random.Random(seed).randbytes``: a port replays the same bytes),
and every message of the four exchanges as hex, device by device, with the server's unmasked sum;
device 4 drops after sharing (it never masks), so the unmasking recovers its mask key; and the
refusals (``refusals``): requests a device must refuse, each after answering the first
``answered`` of its committed requests, with the kind both libraries name (``secagg:malformed``,
``version``, ``invalid``, ``mismatch``, ``protocol``).
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

from triehh_beam.device import DeviceClient, InvitationMismatchError  # noqa: E402
from triehh_beam.device.secagg import SecureVoteSession  # noqa: E402
from triehh_beam.protocol.items.encoding import ItemEncoder  # noqa: E402
from triehh_beam.proto import secagg_pb2  # noqa: E402
from triehh_beam.protocol.federated.messages import FederatedFormatError, Invitation, RoundAnnouncement  # noqa: E402
from triehh_beam.protocol.secagg.cohorts import CohortPolicy  # noqa: E402
from triehh_beam.protocol.secagg.device import SecAggProtocolError  # noqa: E402
from triehh_beam.protocol.secagg.messages import SecAggRequest  # noqa: E402
from triehh_beam.protocol.secagg.round import SecureRound  # noqa: E402
from triehh_beam.protocol.secagg.vectors import round_candidates  # noqa: E402

VECTORS = ROOT / "tests" / "vectors" / "secagg_vectors.json"
FORMAT = "triehh-secagg-vectors/1"
JOB, ROUND, ALPHABET = "job-secagg-vectors", 2, "abc"
RECORDS = [{"ab": 2, "ca": 1}, {"ba": 1}, {"abc": 1, "b": 1}, {"zz": 1}]


def refusal(error: Exception) -> str:
    """The kind of a refused secure-aggregation request, as the Java library's ``Refusal.code()``.

    Raises:
      the error itself, when it is not a refusal of the protocol (a bug, not a vector).
    """
    if isinstance(error, InvitationMismatchError):
        return "secagg:mismatch"
    if isinstance(error, SecAggProtocolError):
        return "secagg:protocol"
    if not isinstance(error, FederatedFormatError):
        raise error
    if error.problem.startswith("not a triehh_beam."):
        return "secagg:malformed"
    return "secagg:version" if "schema_version" in error.problem else "secagg:invalid"


def _edited(request: bytes, **fields) -> bytes:
    message = secagg_pb2.SecAggRequest()
    message.ParseFromString(request)
    for name, value in fields.items():
        setattr(message, name, value)
    return message.SerializeToString()


def refusal_cases(device: dict) -> list:
    """Requests device 1 must refuse (``device``: its committed exchanges): a roster cut inside
    a field, of another schema version, of another round, for another token; a roster replayed
    after it was answered; a setup after the keys."""
    setup, roster = (bytes.fromhex(device["exchanges"][i]["request"]) for i in (0, 1))
    cases = [("cut_inside_a_field", 1, roster[:len(roster) // 2]),
             ("another_schema_version", 1, _edited(roster, schema_version=2)),
             ("another_round", 1, _edited(roster, round_index=ROUND + 1)),
             ("another_token", 1, _edited(roster, token=bytes(16))),
             ("a_replayed_roster", 2, roster),
             ("a_second_setup", 1, setup)]
    return [{"name": name, "device": 0, "answered": answered, "request": request.hex()}
            for name, answered, request in cases]


def replay_refusal(announcement: RoundAnnouncement, device: dict, answered: int, request: bytes) -> str:
    """The kind of refusal the Python device gives ``request`` after answering the first
    ``answered`` committed requests (or "answered" if it does not refuse it)."""
    requests = [bytes.fromhex(e["request"]) for e in device["exchanges"][:answered]]
    session = SecureVoteSession(DeviceClient(dict(device["records"])), announcement,
                                SecAggRequest.from_bytes(requests[0]), random.Random(device["seed"]).randbytes)
    session.keys()
    for earlier in requests[1:]:
        session.handle_bytes(earlier)
    try:
        session.handle_bytes(request)
    except (FederatedFormatError, InvitationMismatchError, SecAggProtocolError) as error:
        return refusal(error)
    return "answered"


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
    refusals = refusal_cases(devices[0])
    for case in refusals:
        case["refusal"] = replay_refusal(announcement, devices[0], case["answered"], bytes.fromhex(case["request"]))
    return {"format": FORMAT, "announcement": announcement.to_bytes().hex(), "devices": devices,
            "sum": server.total().tolist(), "slots": [list(c) for c in slots.candidates], "refusals": refusals}


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
