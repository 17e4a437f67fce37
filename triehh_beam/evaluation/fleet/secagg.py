"""A simulated fleet's devices in secure-aggregation rounds: one ``SecureVoteSession`` per
(job, round, device), started by the device's setup and answering each later request, with the
fleet's faults drawn per exchange (``device_fate`` with its phase: a device can drop out, answer
late, twice or corrupt at any of the four exchanges); a device that dropped out, or whose
request it refused, answers nothing more in that round. Pure of Pub/Sub: the fleet schedules
what ``SecureDevices.answer`` returns."""

from __future__ import annotations

import dataclasses
import threading
from typing import Dict, Optional, Tuple, Union

from triehh_beam.device import DeviceClient, InvitationMismatchError
from triehh_beam.device.secagg import SecureVoteSession
from triehh_beam.evaluation.fleet.faults import DeviceFate, FleetOptions, corrupt_bytes, device_fate
from triehh_beam.protocol.federated.estimate import EstimateAnnouncement
from triehh_beam.protocol.federated.messages import FederatedFormatError, RoundAnnouncement
from triehh_beam.protocol.secagg.device import SecAggProtocolError
from triehh_beam.protocol.secagg.messages import (Inbox, Roster, SecAggReport, SecAggRequest, Setup,
                                                  Survivors)

__all__ = ["SecureAnswer", "SecureDevices", "phase_of"]

_PHASES = {Setup: 0, Roster: 1, Inbox: 2, Survivors: 3}


def phase_of(request: SecAggRequest) -> int:
    """The exchange a request opens: 0 (setup) to 3 (survivors)."""
    return _PHASES[type(request.phase)]


def _refused(data: bytes) -> bool:
    try:
        SecAggReport.from_bytes(data)
    except FederatedFormatError:
        return True
    return False


@dataclasses.dataclass(frozen=True)
class SecureAnswer:
    """What a device sends for one request: its bytes (corrupt for the malformed fate) and fate,
    or nothing (``data`` None) with the count that says why (``dropped`` or ``refused``)."""

    data: Optional[bytes]
    fate: Optional[DeviceFate]
    silent: str = ""


class SecureDevices:
    """The sessions of a fleet's devices (thread-safe)."""

    def __init__(self, options: FleetOptions):
        self.options = options
        self._sessions: Dict[Tuple[str, int, bytes], SecureVoteSession] = {}
        self._stopped: set = set()
        self._lock = threading.Lock()

    def answer(self, client: DeviceClient, announcement: Union[RoundAnnouncement, EstimateAnnouncement],
               device_id: bytes, request: SecAggRequest) -> SecureAnswer:
        """The device's answer to ``request`` under its fate for this exchange."""
        key = (request.job_id, request.round_index, device_id)
        phase = phase_of(request)
        with self._lock:
            if key in self._stopped:
                return SecureAnswer(None, None, "refused")
        fate = device_fate(self.options, request.job_id, request.round_index, device_id, phase)
        if fate.fate == "dropout":
            with self._lock:
                self._stopped.add(key)
            return SecureAnswer(None, fate, "dropped")
        try:
            if phase == 0:
                session = SecureVoteSession(client, announcement, request)
                with self._lock:
                    self._sessions[key] = session
                data = session.keys()
            else:
                with self._lock:
                    session = self._sessions.get(key)
                if session is None:
                    return SecureAnswer(None, None, "refused")
                data = session.handle(request)
        except (FederatedFormatError, InvitationMismatchError, SecAggProtocolError):
            with self._lock:
                self._stopped.add(key)
            return SecureAnswer(None, None, "refused")
        if fate.fate == "malformed":
            data = corrupt_bytes(data, fate.corruption, _refused)
        return SecureAnswer(data, fate)

    def forget(self, job_id: str, round_index: int) -> None:
        """Drops the sessions of a round once its last exchange is answered."""
        with self._lock:
            for key in [k for k in self._sessions if k[:2] == (job_id, round_index)]:
                del self._sessions[key]
