"""The estimate round of a federated job (docs/federated_protocol.md, *The estimate round*): the
``EstimateAnnouncement`` of the released trie's leaves, every enrolled device's invitation
(``estimate_invitations``) and ``read_announcement``, which reads either kind of announcement as
its schema version says. The estimate round's messages are written with schema version 2, so a
device that reads version 1 only refuses them."""

from __future__ import annotations

import dataclasses
from typing import Union

from triehh_beam.proto import federated_pb2, vote_pb2
from triehh_beam.protocol.estimates.frequency_estimates import EstimateKeys, EstimateTargets
from triehh_beam.protocol.federated.messages import (ESTIMATE_SCHEMA_VERSION, SCHEMA_VERSION,
                                                     FederatedFormatError, RoundAnnouncement,
                                                     announcement_fields, build_checked,
                                                     check_announcement, check_header, check_version,
                                                     parse_message, read_encoding, serialize_message)
from triehh_beam.protocol.federated.selection import Registry, RoundSelection, keyed_tokens
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds import wire as messages

__all__ = ["EstimateAnnouncement", "EstimateInvitations", "estimate_invitations", "read_announcement"]

_TOKEN_LABEL = "federated-token/estimate"


@dataclasses.dataclass(frozen=True)
class EstimateAnnouncement:
    """What every enrolled device receives for the estimate round.

    Attributes:
      job_id: the job (non-empty).
      round_index: the estimate round's index: the number of vote rounds run, plus 1 (not
        bounded by ``max_length``: the vote rounds may have run to L).
      encoder, too_long: how a device encodes its items (as in a ``RoundAnnouncement``).
      targets: the released trie's leaves, at least one, each a prefix the encoding can make.
      deadline_millis: reports after this instant (Unix epoch milliseconds, > 0) do not count.
      report_goal: the reports that close the round early, or 0 when not announced (it
        reveals n: announced only where n is public).

    Raises:
      FederatedFormatError: any value out of its range (the text names ``<EstimateAnnouncement>``).
    """

    job_id: str
    round_index: int
    encoder: ItemEncoder
    targets: EstimateTargets
    deadline_millis: int
    report_goal: int = 0
    too_long: str = "drop"

    def __post_init__(self):
        source = "<EstimateAnnouncement>"
        check_announcement(source, self)
        if not isinstance(self.targets, EstimateTargets):
            raise FederatedFormatError(source, f"targets must be EstimateTargets, got {type(self.targets).__name__}")
        check_header(source, self.job_id, self.round_index)
        if not len(self.targets):
            raise FederatedFormatError(source, "no target (a trie without leaves has no estimate round)")
        for target in self.targets.sequences:
            problem = self.encoder.prefix_problem(target)
            if problem:
                raise FederatedFormatError(source, f"target {target!r} {problem}")

    @property
    def truncate(self) -> bool:
        """True when items longer than L units are truncated (else dropped)."""
        return self.too_long == "truncate"

    def to_bytes(self) -> bytes:
        """The serialized ``EstimateAnnouncement`` (deterministic; targets in canonical order)."""
        to_bytes = self.encoder.unit_to_bytes
        return serialize_message(federated_pb2.EstimateAnnouncement(
            schema_version=ESTIMATE_SCHEMA_VERSION, job_id=self.job_id, round_index=self.round_index,
            **announcement_fields(self),
            targets=[vote_pb2.Prefix(units=[to_bytes(u) for u in t]) for t in self.targets.sequences],
            target_count=len(self.targets)))

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<EstimateAnnouncement bytes>") -> "EstimateAnnouncement":
        """Parses and checks an estimate announcement.

        Raises:
          FederatedFormatError: bytes that do not parse, a version other than 2, a missing or
            invalid encoding or long-item policy, no deadline, targets cut short (count), out
            of canonical order, repeated, one a prefix of another, none, or holding a unit the
            encoding cannot make.
        """
        message = parse_message(federated_pb2.EstimateAnnouncement, data, source)
        check_version(source, message.schema_version, (ESTIMATE_SCHEMA_VERSION,))
        encoder, too_long = read_encoding(message, source)
        if not message.HasField("target_count") or message.target_count != len(message.targets):
            declared = message.target_count if message.HasField("target_count") else "no count"
            raise FederatedFormatError(
                source, f"{len(message.targets)} targets but target_count {declared} (truncated or corrupt)")
        raw = [tuple(p.units) for p in message.targets]
        if raw != sorted(set(raw)):
            raise FederatedFormatError(source, "targets out of canonical order, or repeated")
        targets = []
        for i, prefix in enumerate(message.targets):
            try:
                targets.append(messages.prefix_from_proto(encoder, prefix, source, f"target {i}"))
            except messages.TrieFormatError as error:
                raise FederatedFormatError(source, error.problem) from error
        try:
            estimate_targets = EstimateTargets(tuple(targets))
        except ValueError as error:
            raise FederatedFormatError(source, f"targets: {error}") from None
        return build_checked(cls, source, message.job_id, message.round_index, encoder, estimate_targets,
                             message.deadline_millis, message.report_goal, too_long)


def read_announcement(data: bytes, source: str = "<announcement bytes>"
                      ) -> Union[RoundAnnouncement, EstimateAnnouncement]:
    """A vote round's ``RoundAnnouncement`` (schema_version 1) or the estimate round's
    ``EstimateAnnouncement`` (2), as the message's version says.

    Raises:
      FederatedFormatError: bytes that do not parse, another version, or what either reader
        refuses.
    """
    header = parse_message(federated_pb2.RoundAnnouncement, data, source)  # field 1 is the version in both
    if header.schema_version == ESTIMATE_SCHEMA_VERSION:
        return EstimateAnnouncement.from_bytes(data, source)
    check_version(source, header.schema_version, (SCHEMA_VERSION,))
    return RoundAnnouncement.from_proto(header, source)


#: What the estimate round sends every enrolled device: a vote round's ``RoundSelection`` shape
#: (``tokens[i]`` and ``choice_words[i]`` belong to ``device_ids[i]``, the registry's order).
EstimateInvitations = RoundSelection


def estimate_invitations(sampler: Sampler, registry: Registry, round_index: int) -> EstimateInvitations:
    """Every enrolled device's estimate-round token and choice word (one hash call each for
    the whole registry).

    The token is ``SipHash-2-4_{E_0}(id) || SipHash-2-4_{E_1}(id)``, ``E_i`` derived from the
    seed and identity for purpose ``federated-token/estimate/i``: independent of every vote
    round's. The choice word is ``EstimateKeys.derive(seed, identity)``'s hash of the id, whose
    ``sampling.uniform_from_word`` is exactly the central estimate's uniform for that user.
    """
    data, offsets = registry.data, registry.offsets
    words = EstimateKeys.derive(sampler.seed, sampler.identity).choice_words_packed(data, offsets)
    return EstimateInvitations(int(round_index), list(registry.ids),
                               keyed_tokens(sampler, _TOKEN_LABEL, data, offsets), words)
