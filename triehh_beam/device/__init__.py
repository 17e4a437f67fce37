"""The on-device side of a federated deployment (docs/federated_protocol.md), the library a mobile
team ports: ``DeviceClient`` answers a round's announcement and invitation with its report. It
imports only ``triehh_beam.protocol`` and ``triehh_beam.proto``: no Beam, files or network."""

from triehh_beam.device.client import DeviceClient, InvitationMismatchError

__all__ = ["DeviceClient", "InvitationMismatchError"]
