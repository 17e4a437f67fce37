"""The Pub/Sub attributes of federated rounds, defined once for the server and the devices: the
message bodies are the wire messages of ``protocol.federated.messages`` and say everything; the
attributes only route them without parsing a body. The announce topic carries one
``kind=announcement`` message per round (``job``, ``round``) and one ``kind=invitation`` per
selected device (``job``, ``round``, ``device``: the device id as UTF-8 text, so that a fleet or
a push endpoint dispatches on it); the reports topic carries ``kind=report`` (``job``,
``round``), and no device id. A secure-aggregation round sends ``kind=secagg`` requests to
one device each (``job``, ``round``, ``device``) in place of invitations. Attributes are text: the round in decimal digits.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional

__all__ = [
    "ANNOUNCEMENT",
    "DEVICE",
    "INVITATION",
    "JOB",
    "KIND",
    "KINDS",
    "REPORT",
    "SERVER_STOP",
    "ROUND",
    "SECAGG",
    "Envelope",
    "EnvelopeError",
    "announcement_attributes",
    "device_text",
    "invitation_attributes",
    "read_attributes",
    "report_attributes",
    "secagg_attributes",
]

KIND, JOB, ROUND, DEVICE = "kind", "job", "round", "device"
ANNOUNCEMENT, INVITATION, REPORT = "announcement", "invitation", "report"
#: A secure-aggregation request (``protocol.secagg.messages.SecAggRequest``) to one device: like an
#: invitation, it names the device.
SECAGG = "secagg"
KINDS = (ANNOUNCEMENT, INVITATION, REPORT, SECAGG)
_ADDRESSED = (INVITATION, SECAGG)
#: The kind of the one message a federated server sends its own reports subscription when it
#: stops its collector (it ends the collector's current pull); never a report, never logged.
SERVER_STOP = "server-stop"
_MAX_VALUE_BYTES = 1024  # Pub/Sub's limit on an attribute value


class EnvelopeError(ValueError):
    """A message's attributes are not those of a federated message (the text says which)."""


@dataclasses.dataclass(frozen=True)
class Envelope:
    """What a federated message's attributes say: its ``kind`` (``KINDS``), ``job_id``,
    ``round_index`` (from 1) and, for an invitation, the ``device`` id bytes (else None)."""

    kind: str
    job_id: str
    round_index: int
    device: Optional[bytes] = None


def device_text(device_id: bytes) -> str:
    """The ``device`` attribute of a device id.

    Raises:
      ValueError: the id is empty, not UTF-8, or longer than an attribute value may be (1,024
        bytes).
    """
    if not device_id:
        raise ValueError("a device id cannot be empty")
    if len(device_id) > _MAX_VALUE_BYTES:
        raise ValueError(f"a device id is at most {_MAX_VALUE_BYTES} bytes, got {len(device_id)}")
    try:
        return device_id.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"device id {device_id[:32]!r} is not UTF-8 text, which the device attribute must be") from e


def _common(kind: str, job_id: str, round_index: int) -> Dict[str, str]:
    if not job_id or len(job_id.encode("utf-8")) > _MAX_VALUE_BYTES:
        raise ValueError(f"a job id is 1 to {_MAX_VALUE_BYTES} bytes of text, got {job_id!r}")
    if isinstance(round_index, bool) or not isinstance(round_index, int) or round_index < 1:
        raise ValueError(f"a round is an integer from 1, got {round_index!r}")
    return {KIND: kind, JOB: job_id, ROUND: str(round_index)}


def announcement_attributes(job_id: str, round_index: int) -> Dict[str, str]:
    """The attributes of round ``round_index``'s announcement."""
    return _common(ANNOUNCEMENT, job_id, round_index)


def invitation_attributes(job_id: str, round_index: int, device_id: bytes) -> Dict[str, str]:
    """The attributes of the invitation of ``device_id`` to round ``round_index``."""
    return {**_common(INVITATION, job_id, round_index), DEVICE: device_text(device_id)}


def secagg_attributes(job_id: str, round_index: int, device_id: bytes) -> Dict[str, str]:
    """The attributes of a secure-aggregation request to ``device_id`` in round ``round_index``."""
    return {**_common(SECAGG, job_id, round_index), DEVICE: device_text(device_id)}


def report_attributes(job_id: str, round_index: int) -> Dict[str, str]:
    """The attributes of a report for round ``round_index``."""
    return _common(REPORT, job_id, round_index)


def read_attributes(attributes: Mapping[str, str]) -> Envelope:
    """The envelope a message's attributes describe.

    Raises:
      EnvelopeError: a kind that is not one of ``KINDS``, a missing job, a round that is not
        a positive decimal number, an invitation without a device or another kind with one.
    """
    kind = attributes.get(KIND)
    if kind not in KINDS:
        raise EnvelopeError(f"the kind attribute is {kind!r}, not one of {', '.join(KINDS)}")
    job_id = attributes.get(JOB)
    if not job_id:
        raise EnvelopeError(f"a {kind} without a job attribute")
    text = attributes.get(ROUND, "")
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise EnvelopeError(f"a {kind} whose round attribute is {text!r}, not a round number from 1")
    device = attributes.get(DEVICE)
    if (kind in _ADDRESSED) != (device is not None) or device == "":
        raise EnvelopeError(f"a {kind} with device attribute {device!r}: invitations and secure-aggregation "
                            "requests, and only they, name a device")
    return Envelope(kind, job_id, int(text), None if device is None else device.encode("utf-8"))
