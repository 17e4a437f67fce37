"""The on-device side of a federated deployment (docs/federated_protocol.md), the library a
mobile team ports: ``DeviceClient`` holds a device's records, reads the round's announcement
and its invitation, and answers with the report, its vote computed exactly as the central job
would compute it for that user. It imports only ``triehh_beam.protocol`` and
``triehh_beam.proto``: no Beam, no Arrow, no files, no network (the transport is the caller's).
"""

from triehh_beam.device.client import DeviceClient, InvitationMismatchError

__all__ = ["DeviceClient", "InvitationMismatchError"]
