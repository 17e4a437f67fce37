"""Regenerate the shared device test vectors (``device_vectors.json``) and the Unicode tables the
Java device library carries, all from the Python reference (``triehh_beam.device.DeviceClient``):
for each case, a record set, an announcement's and an invitation's bytes (by index into the
document's ``messages``, hex), and the exact report
bytes the device answers or the refusal it gives (``refusal``). The cases themselves are built by
``tests/vectors/cases.py``; ``tests/device/test_vectors.py`` checks that the committed files equal
a fresh generation, and device-java's JUnit suite runs every case in Java.

Usage:
  python tests/vectors/generate.py            # rewrite the committed files
  python tests/vectors/generate.py --check    # exit 1 if any committed file is stale
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import unicodedata
from typing import Dict, List

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.vectors.cases import all_cases, record_sets  # noqa: E402
from triehh_beam.device import DeviceClient, InvitationMismatchError  # noqa: E402
from triehh_beam.protocol.federated.messages import FederatedFormatError  # noqa: E402

VECTORS = ROOT / "tests" / "vectors" / "device_vectors.json"
RESOURCES = ROOT / "device-java" / "src" / "main" / "resources" / "org" / "triehh" / "device"
CASEFOLD = RESOURCES / "casefold.txt"
CHAR_CLASSES = RESOURCES / "char_classes.txt"
FORMAT = "triehh-device-vectors/1"

#: The refusal kinds both implementations agree on (docs/guides/device-java.md): which message
#: ("announcement" or "invitation") and why, as "<message>:<kind>".
REFUSAL_KINDS = {
    "malformed": "the bytes do not parse as the message (cut inside a field, corrupt)",
    "version": "no schema_version, or one this reader does not understand",
    "invalid": "parses, but a field is missing, out of range or inconsistent (cut at a field "
               "boundary, a bad encoding, a frontier or targets not canonically coded, a bad token)",
    "mismatch": "the invitation does not belong with the announcement or this device",
}


def refusal(error: Exception) -> str:
    """The stable refusal kind of a ``respond_bytes`` error, as ``<message>:<kind>``.

    Raises:
      the error itself, when it is not a refusal of the protocol (a bug, not a vector).
    """
    if isinstance(error, InvitationMismatchError):
        return "invitation:mismatch"
    if not isinstance(error, FederatedFormatError) or error.source not in ("announcement", "invitation"):
        raise error
    problem = error.problem
    if problem.startswith("not a triehh_beam."):
        kind = "malformed"
    elif "this reader understands schema_version" in problem:
        kind = "version"
    else:
        kind = "invalid"
    return f"{error.source}:{kind}"


def answer(records, device_id, announcement: bytes, invitation: bytes) -> Dict[str, str]:
    """What the Python device answers: ``{"report": hex}`` or ``{"refusal": kind}``."""
    device = DeviceClient(records, device_id=device_id)
    try:
        return {"report": device.respond_bytes(announcement, invitation).hex()}
    except (FederatedFormatError, InvitationMismatchError) as error:
        return {"refusal": refusal(error)}


def build_vectors() -> dict:
    """The whole vector document (a pure function of the Python library and cases.py)."""
    sets = record_sets()
    messages: Dict[bytes, int] = {}
    cases = []
    for case in all_cases():
        records = sets[case.records].records
        device_id = sets[case.records].device_id
        cases.append({
            "name": case.name,
            "records": case.records,
            "announcement": messages.setdefault(case.announcement, len(messages)),
            "invitation": messages.setdefault(case.invitation, len(messages)),
            **answer(records, device_id, case.announcement, case.invitation),
        })
    return {
        "format": FORMAT,
        "unicode_version": unicodedata.unidata_version,
        "refusal_kinds": REFUSAL_KINDS,
        "record_sets": {name: record_set.to_json() for name, record_set in sorted(sets.items())},
        "messages": [data.hex() for data in messages],
        "cases": cases,
    }


def to_json(document: dict) -> str:
    """The document as JSON, one message and one case a line (diffs stay readable)."""
    lines = ["{"]
    for key, value in document.items():
        if isinstance(value, list):
            lines.append(f"{json.dumps(key)}: [")
            lines.append(",\n".join(json.dumps(v, ensure_ascii=True) for v in value))
            lines.append("],")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=True)},")
    lines[-1] = lines[-1].rstrip(",")
    return "\n".join(lines) + "\n}\n"


def casefold_table() -> str:
    """Every code point whose ``str.casefold`` differs from itself: ``XXXX<TAB>YYYY ZZZZ``."""
    lines = [f"# str.casefold of Python's Unicode {unicodedata.unidata_version}: code point, its folding"]
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        folded = chr(code).casefold()
        if folded != chr(code):
            lines.append(f"{code:04X}\t" + " ".join(f"{ord(c):04X}" for c in folded))
    return "\n".join(lines) + "\n"


def _char_class(code: int) -> str:
    category = unicodedata.category(chr(code))
    if category[0] in "LN":
        return "W"  # letter or number
    if category[0] == "M":
        return "M"  # combining mark
    if category == "So":
        return "S"  # other symbol
    if category == "Cf":
        return "F"  # format
    if category == "Cn":
        return "N"  # unassigned
    return "O"  # anything else


def char_class_table() -> str:
    """The general-category classes words-v1 tells apart, as runs: ``XXXX<TAB>class``."""
    lines = [f"# words-v1 character classes of Python's Unicode {unicodedata.unidata_version}: first code "
             "point of a run, W letter/number, M mark, S So, F Cf, N Cn, O other"]
    previous = None
    for code in range(0x110000):
        cls = _char_class(code)
        if cls != previous:
            lines.append(f"{code:04X}\t{cls}")
            previous = cls
    return "\n".join(lines) + "\n"


def generated() -> Dict[pathlib.Path, bytes]:
    """Every generated file's path and content."""
    vectors = to_json(build_vectors())
    return {
        VECTORS: vectors.encode("ascii"),
        CASEFOLD: casefold_table().encode("ascii"),
        CHAR_CLASSES: char_class_table().encode("ascii"),
    }


def stale(files: Dict[pathlib.Path, bytes]) -> List[pathlib.Path]:
    """The generated files whose committed content differs (or is missing)."""
    return [path for path, content in files.items() if not path.exists() or path.read_bytes() != content]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed file differs")
    args = parser.parse_args(argv)
    files = generated()
    differing = stale(files)
    if args.check:
        for path in differing:
            print(f"stale: {path.relative_to(ROOT)} (run: python tests/vectors/generate.py)", file=sys.stderr)
        return 1 if differing else 0
    for path in differing:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(files[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
