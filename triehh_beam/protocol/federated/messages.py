"""The messages of a federated round (docs/federated_protocol.md): the ``RoundAnnouncement``
every device receives, the ``Invitation`` a selected device receives and the ``VoteReport`` it
answers with, each a frozen dataclass checked when built, with deterministic ``to_bytes`` and a
``from_bytes`` that treats the bytes as untrusted and refuses them with ``FederatedFormatError``.
The estimate round's invitation and report are these marked ``estimate`` (schema version 2); its
announcement, and the checks below that both announcements share, are used by
:mod:`triehh_beam.protocol.federated.estimate`."""

from __future__ import annotations

import dataclasses
from typing import FrozenSet, List, Optional, Tuple, Type, TypeVar

from google.protobuf import message as _message

from triehh_beam.proto import federated_pb2, vote_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder, Units, is_terminated
from triehh_beam.protocol.items.front_coding import (FrontCoded, FrontCodingError, front_code,
                                                     front_decode)
from triehh_beam.protocol.items.user_items import LONG_ITEM_POLICIES
from triehh_beam.protocol.rounds import wire as messages

__all__ = [
    "ESTIMATE_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "TOKEN_BYTES",
    "FederatedFormatError",
    "Invitation",
    "RoundAnnouncement",
    "VoteReport",
]

#: The version every vote round's message writes.
SCHEMA_VERSION = 1
#: The version of the estimate round's messages (``--estimate-frequencies``): a reader of
#: version 1 only (a device built before estimates) refuses them, so it never answers the
#: estimate round as a vote round.
ESTIMATE_SCHEMA_VERSION = 2
#: The length of an invitation's token.
TOKEN_BYTES = 16

_M = TypeVar("_M", bound=_message.Message)
_UINT32 = 2**32
_LONG_ITEMS_TO_PROTO = {
    "drop": federated_pb2.RoundAnnouncement.DROP,
    "truncate": federated_pb2.RoundAnnouncement.TRUNCATE,
}
_LONG_ITEMS_FROM_PROTO = {value: name for name, value in _LONG_ITEMS_TO_PROTO.items()}


class FederatedFormatError(ValueError):
    """A federated message is malformed, of an unknown version or inconsistent (or a value
    given to build one is).

    Attributes:
      source: what the message came from (a topic, a device, a file), named in the text.
      problem: what is wrong, without the source.
    """

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


# ---------------------------------------------------------------------------------------------
# Checks shared by the constructors and the readers (and by federated_estimate's).


def check_header(source: str, job_id, round_index, upper: Optional[int] = None) -> None:
    """A non-empty job id and a round in [1, upper] that fits 32 bits; raises FederatedFormatError."""
    if not isinstance(job_id, str) or not job_id:
        raise FederatedFormatError(source, f"the job id must be a non-empty string, got {job_id!r}")
    if isinstance(round_index, bool) or not isinstance(round_index, int) or round_index < 1:
        raise FederatedFormatError(source, f"round_index {round_index!r}: rounds are numbered from 1")
    if upper is not None and round_index > upper:
        raise FederatedFormatError(source, f"round_index {round_index} exceeds max_length={upper}")
    if round_index >= _UINT32:
        raise FederatedFormatError(source, f"round_index {round_index} does not fit 32 bits")


def check_token(source: str, token) -> None:
    """A 16-byte token; raises FederatedFormatError."""
    if not isinstance(token, bytes) or len(token) != TOKEN_BYTES:
        shown = f"{len(token)} bytes" if isinstance(token, (bytes, bytearray)) else type(token).__name__
        raise FederatedFormatError(source, f"the token must be {TOKEN_BYTES} bytes, got {shown}")


def check_bounded(source: str, name: str, value, low: int, high: int) -> None:
    """An int (not a bool) in [low, high); raises FederatedFormatError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise FederatedFormatError(source, f"{name} must be an integer in [{low}, {high}), got {value!r}")


def _check_prefix(source: str, where: str, encoder: ItemEncoder, prefix: Units) -> None:
    problem = encoder.prefix_problem(prefix)
    if problem:
        raise FederatedFormatError(source, f"{where} {prefix!r} {problem}")


def check_version(source: str, version: int,
                  known: Tuple[int, ...] = (SCHEMA_VERSION, ESTIMATE_SCHEMA_VERSION)) -> None:
    """Refuses, with FederatedFormatError, a schema version not in ``known``."""
    if version not in known:
        found = "no schema_version" if version == 0 else f"schema_version {version}"
        understood = " and ".join(str(v) for v in known)
        raise FederatedFormatError(source, f"{found}; this reader understands schema_version {understood}")


def _version(estimate: bool) -> int:
    return ESTIMATE_SCHEMA_VERSION if estimate else SCHEMA_VERSION


def parse_message(message_type: Type[_M], data: bytes, source: str) -> _M:
    """``messages.parse_message`` with its refusal as a FederatedFormatError."""
    try:
        return messages.parse_message(message_type, data, source)
    except messages.TrieFormatError as error:
        raise FederatedFormatError(source, error.problem) from error


def _prefix_tuple(source: str, prefix) -> Units:
    try:
        return messages.as_prefix(prefix)
    except ValueError as error:
        raise FederatedFormatError(source, str(error)) from None


def serialize_message(message: _message.Message) -> bytes:
    """The message's deterministic serialization (equal messages, equal bytes)."""
    return message.SerializeToString(deterministic=True)


def build_checked(cls, source: str, *fields):
    """``cls(*fields)``, its checks' errors naming ``source``."""
    try:
        return cls(*fields)
    except FederatedFormatError as error:
        raise FederatedFormatError(source, error.problem) from None


def check_announcement(source: str, announcement) -> None:
    """The checks both announcements share: an ``ItemEncoder``, a deadline in [1, 2^63), a
    report goal in [0, 2^64) and a known long-item policy; raises FederatedFormatError."""
    if not isinstance(announcement.encoder, ItemEncoder):
        raise FederatedFormatError(
            source, f"encoder must be an ItemEncoder, got {type(announcement.encoder).__name__}")
    check_bounded(source, "deadline_millis", announcement.deadline_millis, 1, 2**63)
    check_bounded(source, "report_goal", announcement.report_goal, 0, 2**64)
    if announcement.too_long not in LONG_ITEM_POLICIES:
        raise FederatedFormatError(
            source, f"too_long must be one of {LONG_ITEM_POLICIES}, got {announcement.too_long!r}")


def announcement_fields(announcement) -> dict:
    """The protobuf fields both announcements share: encoding, long-item policy, deadline, goal."""
    return dict(encoding=messages.encoding_to_proto(announcement.encoder),
                long_items=_LONG_ITEMS_TO_PROTO[announcement.too_long],
                deadline_millis=announcement.deadline_millis, report_goal=announcement.report_goal)


def read_encoding(message, source: str) -> Tuple[ItemEncoder, str]:
    """An announcement message's encoder and long-item policy.

    Raises:
      FederatedFormatError: no encoding, an invalid one, or an unknown long-item policy.
    """
    if not message.HasField("encoding"):
        raise FederatedFormatError(source, "no encoding")
    try:
        encoder = messages.encoding_from_proto(message.encoding, source)
    except messages.TrieFormatError as error:
        raise FederatedFormatError(source, error.problem) from error
    if message.long_items not in _LONG_ITEMS_FROM_PROTO:
        raise FederatedFormatError(source, f"unknown or unspecified long_items {message.long_items}")
    return encoder, _LONG_ITEMS_FROM_PROTO[message.long_items]


# ---------------------------------------------------------------------------------------------
# The messages.


@dataclasses.dataclass(frozen=True)
class RoundAnnouncement:
    """What every device receives before round ``round_index``.

    Attributes:
      job_id: the job (non-empty).
      round_index: r, from 1 to ``encoder.max_length``.
      encoder: how a device encodes its items, exactly as the server does.
      frontier: the prefixes a vote may extend: at least one, each of ``r - 1`` units, none a
        complete item (in round 1, ``{()}``).
      deadline_millis: reports after this instant (Unix epoch milliseconds, > 0) do not count.
      report_goal: the reports that close the round early, or 0 when not announced (it
        reveals m, hence the population n: announced only where n is public).
      too_long: ``"drop"`` or ``"truncate"`` items longer than L units (``LONG_ITEM_POLICIES``).

    Raises:
      FederatedFormatError: any value out of its range (the message names ``<RoundAnnouncement>``).
    """

    job_id: str
    round_index: int
    encoder: ItemEncoder
    frontier: FrozenSet[Units]
    deadline_millis: int
    report_goal: int = 0
    too_long: str = "drop"

    def __post_init__(self):
        source = "<RoundAnnouncement>"
        object.__setattr__(self, "frontier", frozenset(_prefix_tuple(source, p) for p in self.frontier))
        check_announcement(source, self)
        check_header(source, self.job_id, self.round_index, self.encoder.max_length)
        if not self.frontier:
            raise FederatedFormatError(source, "an empty frontier (a round extends at least one prefix)")
        width = self.round_index - 1
        for prefix in self.frontier:
            if len(prefix) != width:
                raise FederatedFormatError(
                    source, f"frontier prefix {prefix!r} has {len(prefix)} units; round "
                    f"{self.round_index} extends prefixes of {width}")
            _check_prefix(source, "frontier prefix", self.encoder, prefix)
            if is_terminated(prefix):
                raise FederatedFormatError(source, f"frontier prefix {prefix!r} is a complete item")

    @property
    def truncate(self) -> bool:
        """True when items longer than L units are truncated (else dropped)."""
        return self.too_long == "truncate"

    def to_proto(self) -> federated_pb2.RoundAnnouncement:
        to_bytes = self.encoder.unit_to_bytes
        coded = front_code(tuple(to_bytes(u) for u in p) for p in self.frontier)
        return federated_pb2.RoundAnnouncement(
            schema_version=SCHEMA_VERSION, job_id=self.job_id, round_index=self.round_index,
            **announcement_fields(self),
            frontier_shared=coded.shared, frontier_unit_lengths=coded.unit_lengths,
            frontier_units=coded.units, frontier_unit_width=coded.unit_width, frontier_count=len(coded.shared))

    def to_bytes(self) -> bytes:
        """The serialized ``RoundAnnouncement`` (deterministic: equal announcements, equal bytes)."""
        return serialize_message(self.to_proto())

    @classmethod
    def from_proto(cls, message: federated_pb2.RoundAnnouncement,
                   source: str = "<RoundAnnouncement message>") -> "RoundAnnouncement":
        """Parses and checks an announcement.

        Raises:
          FederatedFormatError: an unknown version, a missing or invalid encoding or long-item
            policy, a round outside 1..L, no deadline, a frontier cut short (count), not
            canonically front-coded, empty, or holding a prefix of the wrong length, a unit that
            is not a unit of the encoding, or a complete item.
        """
        if message.schema_version == ESTIMATE_SCHEMA_VERSION:
            raise FederatedFormatError(source, "schema_version 2: an estimate round's announcement, not a vote "
                                       "round's (read it with federated_estimate.read_announcement)")
        check_version(source, message.schema_version, (SCHEMA_VERSION,))
        encoder, too_long = read_encoding(message, source)
        check_header(source, message.job_id, message.round_index, encoder.max_length)
        frontier = set()
        for i, raw in enumerate(_frontier_bytes(message, source)):
            try:
                units = tuple(messages.unit_from_bytes(encoder, u, source, f"frontier prefix {i}") for u in raw)
            except messages.TrieFormatError as error:
                raise FederatedFormatError(source, error.problem) from error
            frontier.add(units)
        return build_checked(cls, source, message.job_id, message.round_index, encoder, frontier,
                             message.deadline_millis, message.report_goal, too_long)

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<RoundAnnouncement bytes>") -> "RoundAnnouncement":
        """Parses serialized bytes; raises FederatedFormatError as ``from_proto`` (and for bytes
        that do not parse)."""
        return cls.from_proto(parse_message(federated_pb2.RoundAnnouncement, data, source), source)


@dataclasses.dataclass(frozen=True)
class Invitation:
    """What one selected device receives for round ``round_index`` (and no other device).

    Attributes:
      job_id, round_index: the announcement's.
      device_id: the device invited (its enrolled id bytes, non-empty).
      token: 16 bytes, fresh per (round, device); the report carries it back.
      choice_word: the device's item-choice draw, an integer in [0, 2^64)
        (``sampling.uniform_from_word`` turns it into the uniform the vote uses).
      estimate: an invitation to the estimate round (written with schema_version 2); its
        ``choice_word`` is the word behind the central estimate's uniform for the device.

    Raises:
      FederatedFormatError: any value out of its range.
    """

    job_id: str
    round_index: int
    device_id: bytes
    token: bytes = dataclasses.field(repr=False)
    choice_word: int = dataclasses.field(repr=False)
    estimate: bool = False

    def __post_init__(self):
        source = "<Invitation>"
        if not isinstance(self.estimate, bool):
            raise FederatedFormatError(source, f"estimate is a bool, got {self.estimate!r}")
        check_header(source, self.job_id, self.round_index)
        if not isinstance(self.device_id, bytes) or not self.device_id:
            raise FederatedFormatError(source, f"the device id must be non-empty bytes, got {self.device_id!r}")
        check_token(source, self.token)
        check_bounded(source, "choice_word", self.choice_word, 0, 2**64)

    def to_bytes(self) -> bytes:
        """The serialized ``Invitation``."""
        return serialize_message(federated_pb2.Invitation(
            schema_version=_version(self.estimate), job_id=self.job_id, round_index=self.round_index,
            device_id=self.device_id, token=self.token, choice_word=self.choice_word))

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<Invitation bytes>") -> "Invitation":
        """Parses and checks serialized bytes.

        Schema version 2 reads as an estimate round's invitation (``estimate``).

        Raises:
          FederatedFormatError: bytes that do not parse, an unknown version, no job id, round 0,
            no device id, a token that is not 16 bytes, or no choice word (cut short).
        """
        message = parse_message(federated_pb2.Invitation, data, source)
        check_version(source, message.schema_version)
        if not message.HasField("choice_word"):
            raise FederatedFormatError(source, "no choice_word (truncated or corrupt)")
        return build_checked(cls, source, message.job_id, message.round_index, message.device_id, message.token,
                             message.choice_word, message.schema_version == ESTIMATE_SCHEMA_VERSION)


@dataclasses.dataclass(frozen=True)
class VoteReport:
    """A device's answer to an invitation: one prefix, or ``None`` for an explicit abstention.

    Attributes:
      job_id, round_index, token: the invitation's.
      prefix: the length-``round_index`` prefix of the chosen item (a tuple of units), or None.
        In the estimate round: the target the device's records choose, of any length.
      estimate: a report of the estimate round (written with schema_version 2).

    Raises:
      FederatedFormatError: any value out of its range, or a prefix that is not
        ``round_index`` units (estimate: at least one unit) all of one unit type.
    """

    job_id: str
    round_index: int
    token: bytes = dataclasses.field(repr=False)
    prefix: Optional[Units]
    estimate: bool = False

    def __post_init__(self):
        source = "<VoteReport>"
        if not isinstance(self.estimate, bool):
            raise FederatedFormatError(source, f"estimate is a bool, got {self.estimate!r}")
        if self.prefix is not None:
            object.__setattr__(self, "prefix", _prefix_tuple(source, self.prefix))
        check_header(source, self.job_id, self.round_index)
        check_token(source, self.token)
        if self.prefix is not None:
            if self.estimate and not self.prefix:
                raise FederatedFormatError(source, "an estimate report's target has at least one unit")
            if not self.estimate and len(self.prefix) != self.round_index:
                raise FederatedFormatError(
                    source, f"prefix {self.prefix!r} has {len(self.prefix)} units, a round-"
                    f"{self.round_index} vote needs {self.round_index}")
            kinds = {type(u) for u in self.prefix}
            if not (kinds == {str} or kinds == {bytes}):
                raise FederatedFormatError(source, f"prefix {self.prefix!r}: units are all str or all bytes")

    @property
    def abstains(self) -> bool:
        return self.prefix is None

    def to_bytes(self) -> bytes:
        """The serialized ``VoteReport`` (text units as UTF-8)."""
        message = federated_pb2.VoteReport(
            schema_version=_version(self.estimate), job_id=self.job_id, round_index=self.round_index, token=self.token)
        if self.prefix is None:
            message.abstain.SetInParent()
        else:
            message.prefix.units.extend(u.encode("utf-8") if isinstance(u, str) else u for u in self.prefix)
        return serialize_message(message)

    @classmethod
    def from_bytes(cls, data: bytes, encoder: ItemEncoder, source: str = "<VoteReport bytes>") -> "VoteReport":
        """Parses and checks a device's report against the job's encoder.

        The server should drop (and count) the reports this refuses rather than fail the round:
        a device's message is untrusted input. Schema version 2 reads as an estimate round's
        report (``estimate``): its round is not bounded by L, its prefix by L only.

        Raises:
          FederatedFormatError: bytes that do not parse, an unknown version, no job id, round 0
            (a vote round's: or above L), a token that is not 16 bytes, neither a prefix nor an
            abstention, a vote's prefix whose length is not the round (an estimate's: empty),
            or units not valid for the encoding.
        """
        message = parse_message(federated_pb2.VoteReport, data, source)
        check_version(source, message.schema_version)
        estimate = message.schema_version == ESTIMATE_SCHEMA_VERSION
        check_header(source, message.job_id, message.round_index, None if estimate else encoder.max_length)
        check_token(source, message.token)
        answer = message.WhichOneof("answer")
        if answer is None:
            raise FederatedFormatError(source, "neither a prefix nor an abstention (truncated or corrupt)")
        prefix = None
        if answer == "prefix":
            prefix = _prefix_from_message(encoder, message.prefix, source)
            if estimate and not prefix:
                raise FederatedFormatError(source, "an empty target (an estimate report names one of at least "
                                           "one unit)")
            if not estimate and len(prefix) != message.round_index:
                raise FederatedFormatError(
                    source, f"prefix {prefix!r} has {len(prefix)} units, a round-{message.round_index} "
                    f"vote needs {message.round_index}")
        return build_checked(cls, source, message.job_id, message.round_index, message.token, prefix, estimate)


def _frontier_bytes(message: federated_pb2.RoundAnnouncement, source: str) -> List[Tuple[bytes, ...]]:
    """The announced frontier's prefixes as unit bytes: the count checked, then the front coding."""
    count = len(message.frontier_shared)
    if not message.HasField("frontier_count") or message.frontier_count != count:
        declared = message.frontier_count if message.HasField("frontier_count") else "no count"
        raise FederatedFormatError(
            source, f"{count} frontier prefixes but frontier_count {declared} (truncated or corrupt)")
    try:
        coded = FrontCoded(tuple(message.frontier_shared), message.frontier_unit_width,
                           tuple(message.frontier_unit_lengths), message.frontier_units)
        return front_decode(coded, message.round_index - 1)
    except FrontCodingError as error:
        raise FederatedFormatError(source, f"frontier: {error}") from error


def _prefix_from_message(encoder: ItemEncoder, message: vote_pb2.Prefix, source: str) -> Units:
    try:
        return messages.prefix_from_proto(encoder, message, source, "prefix")
    except messages.TrieFormatError as error:
        raise FederatedFormatError(source, error.problem) from error
