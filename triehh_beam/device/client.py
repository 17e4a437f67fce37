"""``DeviceClient``: a device's records in, its ``VoteReport`` for a federated round out, the vote
exactly the one the central job computes for that user (the same encoding rule and the same draw
from the invitation's choice word); in the estimate round its report names the target its records
choose. Its class docstring is the specification a port to another platform implements."""

from __future__ import annotations

import numbers
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

from triehh_beam.protocol.estimates.frequency_estimates import user_choice
from triehh_beam.protocol.federated.estimate import EstimateAnnouncement, read_announcement
from triehh_beam.protocol.federated.messages import Invitation, RoundAnnouncement, VoteReport
from triehh_beam.protocol.items.encoding import Item, ItemEncoder, Units
from triehh_beam.protocol.items.user_items import weighted_sequences
from triehh_beam.protocol.randomness.sampling import uniform_from_word
from triehh_beam.protocol.rounds.vote import client_vote

__all__ = ["DeviceClient", "InvitationMismatchError"]

Records = Union[Mapping[Item, int], Iterable[Tuple[Item, int]]]
Weighted = Tuple[Tuple[Units, int], ...]


class InvitationMismatchError(ValueError):
    """An invitation does not belong with the announcement (another job or round) or was
    addressed to another device: the device must not answer it."""


class DeviceClient:
    """One device's records, and its answer to each round it is invited to.

    What a port implements, in order (docs/federated_protocol.md has the wire format):

    1. **Keep the records** as (item, local count) pairs: text, bytes or integers, as the
       central job's input would hold them; counts are non-negative integers (0 is ignored).
    2. **Read the announcement** of the round (``RoundAnnouncement``: refuse it whole if any
       check fails) and, if this device received one, **its invitation** (``Invitation``). A
       device without an invitation for the round does nothing. Refuse an invitation whose
       job or round differs from the announcement's, or whose device id is not this device's.
    3. **Encode the records** under the announced encoding and long-item policy, and cache
       the result per (encoding, policy): per record value, its items (with a tokenising
       encoding, its ``words-v1`` tokens; else the value itself); each item normalised (text:
       NFC, then case folding if the encoding says so; integers: offset binary of
       ``int_bits`` digits) and cut into units of ``unit_size`` characters, bytes or bits,
       followed by the empty terminator unit; an item with more than ``max_length`` units,
       terminator included, dropped or (``truncate``) cut to its first ``max_length`` units
       without terminator; values and items that cannot be encoded dropped. Sum the counts
       per sequence; drop sequences whose total is 0.
    4. **Draw one sequence**: sort the sequences (unit by unit: text by code point, bytes by
       byte), take ``u = (choice_word >> 11) / 2^53`` and ``target = u * total`` in IEEE
       double precision, and choose the first sequence whose running count total exceeds
       ``target`` (``vote.choose_sequence``). With no sequence at all, abstain.
    5. **Vote**: if the chosen sequence has at least ``r`` units and its first ``r - 1``
       units are a frontier prefix, the report's prefix is its first ``r`` units; otherwise
       the report abstains explicitly. Never try another item: one draw, one answer.
    6. **Report** ``VoteReport(job_id, round, token, prefix or abstain)`` before the deadline,
       and resend the same bytes if unsure it arrived (the answer is a function of the
       records and the invitation, so a resent report is identical; the server counts one).

    **The estimate round** (an ``EstimateAnnouncement`` and an invitation marked ``estimate``,
    both schema_version 2; every enrolled device is invited): after step 3, keep the sequences
    that start with a target (no target is a prefix of another, so each starts with at most
    one), and weigh each target by the summed counts of its sequences. Sort the targets held,
    draw ``u`` from the invitation's ``choice_word`` as in step 4 and choose the first target
    whose running weight exceeds ``u * total`` (``vote.choose_sequence``). Report that target
    whole (``VoteReport`` marked ``estimate``, the prefix being the target, whatever its
    length), or abstain if no sequence starts with a target. A vote round's invitation with an
    estimate announcement, or the reverse, is refused.

    Args:
      records: item -> local count, or (item, count) pairs (an item may repeat). Copied.
      device_id: this device's id; when given, an invitation for another id is refused.

    Raises:
      TypeError: ``records`` is a single str or bytes (a slip for ``{item: 1}``).
      ValueError: a count that is not a non-negative integer.
    """

    def __init__(self, records: Records, device_id: Optional[bytes] = None):
        if isinstance(records, (str, bytes, bytearray)):
            raise TypeError(f"records are a mapping item -> count or (item, count) pairs, not one "
                            f"{type(records).__name__}")
        pairs = records.items() if isinstance(records, Mapping) else records
        self._records: Tuple[Tuple[Item, int], ...] = tuple((item, _count(count)) for item, count in pairs)
        if device_id is not None and (not isinstance(device_id, bytes) or not device_id):
            raise ValueError(f"a device id is non-empty bytes, got {device_id!r}")
        self._device_id = device_id
        self._encoded: Dict[Tuple[ItemEncoder, bool], Weighted] = {}

    @property
    def device_id(self) -> Optional[bytes]:
        return self._device_id

    def weighted_sequences(self, encoder: ItemEncoder, truncate: bool = False) -> Weighted:
        """The device's ``((sequence, count), ...)`` under ``encoder``, sorted (step 3), cached
        per (encoder, policy)."""
        key = (encoder, bool(truncate))
        cached = self._encoded.get(key)
        if cached is None:
            cached = tuple(sorted(weighted_sequences(encoder, self._records, bool(truncate)).items()))
            self._encoded[key] = cached
        return cached

    def vote(self, announcement: RoundAnnouncement, choice_word: int) -> Optional[Units]:
        """The prefix this device votes for in the announced round with this draw, or None
        (steps 3 to 5).

        Raises:
          TypeError, ValueError: ``choice_word`` is not an integer in [0, 2^64).
        """
        u = uniform_from_word(choice_word)
        weighted = self.weighted_sequences(announcement.encoder, announcement.truncate)
        if not weighted:
            return None
        return client_vote(weighted, announcement.frontier, announcement.round_index, u)

    def estimate_choice(self, announcement: EstimateAnnouncement, choice_word: int) -> Optional[Units]:
        """The target this device reports in the estimate round with this draw, or None when it
        holds none (the estimate round's rule, in the class docstring).

        Raises:
          TypeError, ValueError: ``choice_word`` is not an integer in [0, 2^64).
        """
        u = uniform_from_word(choice_word)
        targets = announcement.targets
        chosen = user_choice(self.weighted_sequences(announcement.encoder, announcement.truncate), targets, u)
        return None if chosen is None else targets.sequences[chosen]

    def respond(self, announcement: Union[RoundAnnouncement, EstimateAnnouncement],
                invitation: Invitation) -> VoteReport:
        """The report answering ``invitation`` in ``announcement``'s round (a vote round, or
        the estimate round).

        Raises:
          TypeError: arguments that are not an announcement and an ``Invitation``.
          InvitationMismatchError: the invitation is for another job or round than the
            announcement, for another device than this one, or for a vote round where the
            announcement is the estimate round's (or the reverse).
        """
        estimate = isinstance(announcement, EstimateAnnouncement)
        if not (estimate or isinstance(announcement, RoundAnnouncement)) or not isinstance(invitation, Invitation):
            raise TypeError("respond takes a RoundAnnouncement (or EstimateAnnouncement) and an Invitation")
        if invitation.estimate != estimate:
            raise InvitationMismatchError(
                f"an invitation to {'the estimate' if invitation.estimate else 'a vote'} round with the "
                f"announcement of {'the estimate' if estimate else 'a vote'} round")
        if invitation.job_id != announcement.job_id or invitation.round_index != announcement.round_index:
            raise InvitationMismatchError(
                f"the invitation is for job {invitation.job_id!r} round {invitation.round_index}, the "
                f"announcement for job {announcement.job_id!r} round {announcement.round_index}")
        if self._device_id is not None and invitation.device_id != self._device_id:
            raise InvitationMismatchError(
                f"the invitation is for device {invitation.device_id!r}, this is {self._device_id!r}")
        if estimate:
            target = self.estimate_choice(announcement, invitation.choice_word)
            return VoteReport(invitation.job_id, invitation.round_index, invitation.token, target, estimate=True)
        prefix = self.vote(announcement, invitation.choice_word)
        return VoteReport(invitation.job_id, invitation.round_index, invitation.token, prefix)

    def respond_bytes(self, announcement: bytes, invitation: bytes) -> bytes:
        """``respond`` on serialized messages, the serialized report out.

        Raises:
          FederatedFormatError: either message is malformed (``from_bytes``).
          InvitationMismatchError: as ``respond``.
        """
        return self.respond(
            read_announcement(announcement, "announcement"),
            Invitation.from_bytes(invitation, "invitation"),
        ).to_bytes()


def _count(count) -> int:
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
        raise ValueError(f"counts must be non-negative integers, got {count!r}")
    return int(count)
