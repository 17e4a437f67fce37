"""``SecureVoteSession``: a device's run of secure aggregation in one round: its vote (exactly
``DeviceClient``'s) as a one-hot vector over the round's slots, answered phase by phase to the
server's ``SecAggRequest`` messages, so that only masked vectors and encrypted or unmasking
shares leave the device. Its class docstring is the specification a port implements."""

from __future__ import annotations

import os
from typing import Callable, Optional, Union

from triehh_beam.device.client import DeviceClient, InvitationMismatchError
from triehh_beam.protocol.federated.estimate import EstimateAnnouncement
from triehh_beam.protocol.federated.messages import FederatedFormatError, Invitation, RoundAnnouncement
from triehh_beam.protocol.rounds import wire
from triehh_beam.protocol.secagg.crypto import CohortContext
from triehh_beam.protocol.secagg.device import SecAggDevice, SecAggProtocolError
from triehh_beam.protocol.secagg.messages import (Inbox, Keys, Masked, Roster, SecAggReport,
                                                  SecAggRequest, Setup, Shares, Survivors, Unmask)
from triehh_beam.protocol.secagg.vectors import CandidateSlots, round_candidates

__all__ = ["SecureVoteSession", "vote_slots"]


def vote_slots(announcement: Union[RoundAnnouncement, EstimateAnnouncement], setup: Setup) -> CandidateSlots:
    """The round's slots: a vote round's frontier extended by the setup's alphabet and the end
    marker; the estimate round's targets.

    Raises:
      FederatedFormatError: an alphabet unit that is not a unit of the encoding, an alphabet in
        the estimate round, or slots other than the setup says.
    """
    source = "<SecAggRequest setup>"
    if isinstance(announcement, EstimateAnnouncement):
        if setup.alphabet:
            raise FederatedFormatError(source, "an alphabet in the estimate round (its slots are the targets)")
        slots = CandidateSlots(tuple(announcement.targets.sequences))
    else:
        encoder = announcement.encoder
        try:
            units = [wire.unit_from_bytes(encoder, u, source, "alphabet") for u in setup.alphabet]
        except wire.TrieFormatError as error:
            raise FederatedFormatError(source, error.problem) from error
        for unit in units:
            problem = encoder.prefix_problem((unit,))
            if problem:
                raise FederatedFormatError(source, f"alphabet unit {unit!r} {problem}")
        slots = round_candidates(announcement.frontier, units, encoder.eos)
    if slots.length != setup.slots:
        raise FederatedFormatError(source, f"the round has {slots.length} slots, the setup says {setup.slots}")
    return slots


class SecureVoteSession:
    """One device's secure-aggregation run for one invitation.

    What a port implements (docs/federated_protocol.md, "Secure aggregation", has the wire
    format and the cryptography):

    1. On the **setup** request (the invitation inside it, its token the request's; a secure
       round sends no invitation outside a setup): compute the vote as
       ``DeviceClient`` does (steps 1-5 of its docstring), the round's slots (``vote_slots``:
       every frontier prefix extended by each alphabet unit and by the end marker, sorted
       unit by unit by their bytes, then ``other`` for a vote that is not a candidate, then
       ``abstain``; the estimate round's targets instead), refuse a setup whose slot count
       differs, and build the one-hot vector. Draw two X25519 key pairs and answer **keys**.
    2. On the **roster**: refuse it if it has fewer than t members, lacks this device's own
       keys, or repeats a key; draw a 32-byte self-mask seed; Shamir-share (t of the roster)
       the mask private key and the seed; encrypt each other member's two shares to it with
       AES-256-GCM under HKDF(X25519(cipher keys)); answer **shares**.
    3. On the **inbox**: decrypt every ciphertext (refuse one that does not authenticate or
       names another pair), refuse fewer than t - 1 senders, and answer **masked**: the vector
       plus the seed's AES-256-CTR stream plus, for each other sender, the pair's stream
       (added by the lower index, subtracted by the higher), modulo 2^32.
    4. On the **survivors**: refuse fewer than t or a list without this device; answer
       **unmask**: for every sender, its seed share if it survived, else its mask key share.

    A refused request ends the device's run (no later request is answered): the device then
    counts as a dropout, which the protocol tolerates.

    Args:
      client: the device's records.
      announcement: the round's announcement (a vote round's or the estimate round's).
      setup: the server's setup request to this device (its invitation inside).
      random_bytes: the source of every secret (``os.urandom``; a seeded one only in tests).

    Raises:
      FederatedFormatError: a request that is not a setup, an invitation inside it that does
        not parse, or slots that do not match the round.
      InvitationMismatchError: as ``DeviceClient.respond``, or an invitation whose token is not
        the setup's.
    """

    def __init__(self, client: DeviceClient, announcement: Union[RoundAnnouncement, EstimateAnnouncement],
                 setup: SecAggRequest, random_bytes: Callable[[int], bytes] = os.urandom):
        phase = setup.phase
        if not isinstance(phase, Setup):
            raise FederatedFormatError("<SecAggRequest>", f"a session starts with a setup, got {type(phase).__name__}")
        invitation = Invitation.from_bytes(phase.invitation, "the setup's invitation")
        if (invitation.job_id, invitation.round_index, invitation.token) != (setup.job_id, setup.round_index,
                                                                           setup.token):
            raise InvitationMismatchError("the setup's invitation is for another job, round or token")
        vote = client.respond(announcement, invitation).prefix  # the vote, with every check respond makes
        slots = vote_slots(announcement, phase)
        self._invitation = invitation
        context = CohortContext(invitation.job_id, invitation.round_index, phase.cohort)
        self._device = SecAggDevice(context, phase.index, phase.size, phase.threshold, slots.one_hot(vote),
                                    random_bytes)

    @property
    def invitation(self) -> Invitation:
        return self._invitation

    def _reply(self, phase) -> bytes:
        inv = self._invitation
        return SecAggReport(inv.job_id, inv.round_index, inv.token, phase).to_bytes()

    def keys(self) -> bytes:
        """The serialized answer to the setup: the device's two public keys."""
        return self._reply(Keys(*self._device.advertise()))

    def handle(self, request: SecAggRequest) -> bytes:
        """The serialized report answering a roster, inbox or survivors request.

        Raises:
          InvitationMismatchError: a request for another job, round or token.
          SecAggProtocolError: a request out of order (a second setup included) or that the
            protocol refuses.
        """
        inv = self._invitation
        if (request.job_id, request.round_index, request.token) != (inv.job_id, inv.round_index, inv.token):
            raise InvitationMismatchError("a secure-aggregation request for another job, round or invitation")
        phase = request.phase
        if isinstance(phase, Roster):
            return self._reply(Shares(tuple(self._device.share(phase.keys()).items())))
        if isinstance(phase, Inbox):
            return self._reply(Masked.of(self._device.mask(dict(phase.shares))))
        if isinstance(phase, Survivors):
            answer = self._device.unmask(phase.indices)
            return self._reply(Unmask(tuple((owner, kind, share) for owner, (kind, share) in answer.items())))
        raise SecAggProtocolError("a second setup for one invitation")

    def handle_bytes(self, request: bytes) -> bytes:
        """``handle`` on serialized bytes (``SecAggRequest.from_bytes``'s refusals too)."""
        return self.handle(SecAggRequest.from_bytes(request, "secagg request"))
