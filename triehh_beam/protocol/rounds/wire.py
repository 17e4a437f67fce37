"""The protocol's wire formats as protobuf (docs/protocol.md §1, steps 2-3): the ``Encoding``,
the ``FrontierBroadcast`` a server sends before a round and the ``Vote`` a sampled device
answers with. Writers are deterministic; readers treat every message as untrusted and refuse a
bad one with ``TrieFormatError`` naming its source. The reading checks here (``check_version``,
``parse_message``, ``unit_from_bytes``, ``prefix_from_proto``) are shared by the trie's and the
federated messages' readers."""

from __future__ import annotations

import dataclasses
from typing import FrozenSet, Sequence, Type, TypeVar

from google.protobuf import message as _message

from triehh_beam.proto import trie_pb2, vote_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind, Unit, Units, is_terminated
from triehh_beam.protocol.items.tokenize import TOKENIZER_ID

__all__ = [
    "SCHEMA_VERSION",
    "FrontierBroadcast",
    "TrieFormatError",
    "Vote",
    "as_prefix",
    "check_version",
    "encoding_from_proto",
    "encoding_to_proto",
    "frontier_from_bytes",
    "frontier_from_proto",
    "parse_message",
    "prefix_from_proto",
    "unit_from_bytes",
    "vote_from_bytes",
    "vote_from_proto",
    "vote_to_proto",
]

# The version written into every Trie, FrontierBroadcast and Vote message; readers refuse any
# other. Bump it when a change to the messages means an old reader would misread a new message.
SCHEMA_VERSION = 1

_M = TypeVar("_M", bound=_message.Message)

_KIND_TO_PROTO = {
    ItemKind.TEXT: trie_pb2.Encoding.TEXT,
    ItemKind.BYTES: trie_pb2.Encoding.BYTES,
    ItemKind.INT: trie_pb2.Encoding.INT,
}
_KIND_FROM_PROTO = {value: kind for kind, value in _KIND_TO_PROTO.items()}


class TrieFormatError(ValueError):
    """A Trie, FrontierBroadcast or Vote message is unreadable, of an unknown version or
    inconsistent.

    Attributes:
      source: what the message was read from (a file name, a device endpoint), named in the
        text.
    """

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


def as_prefix(prefix) -> Units:
    """A caller's prefix as a tuple (rejecting a bare str/bytes, which would split silently)."""
    if isinstance(prefix, (str, bytes, bytearray)):
        raise ValueError(f"a prefix is a tuple of units, got {type(prefix).__name__} {prefix!r}")
    return tuple(prefix)


# ---------------------------------------------------------------------------------------------
# Encoding, frontier and vote messages.


def encoding_to_proto(encoder: ItemEncoder) -> trie_pb2.Encoding:
    """The ``triehh_beam.Encoding`` message for ``encoder``."""
    return trie_pb2.Encoding(
        kind=_KIND_TO_PROTO[encoder.kind],
        unit_size=encoder.unit_size,
        max_length=encoder.max_length,
        case_fold=encoder.case_fold,
        int_bits=encoder.int_bits or 0,
        tokenizer=encoder.tokenizer_id or "",
    )


def encoding_from_proto(
    message: trie_pb2.Encoding, source: str = "<Encoding message>"
) -> ItemEncoder:
    """The encoder an ``Encoding`` message describes.

    Raises:
      TrieFormatError: an unspecified or unknown kind, or parameters ItemEncoder refuses.
    """
    if message.kind not in _KIND_FROM_PROTO:
        raise TrieFormatError(source, f"unknown or unspecified encoding kind {message.kind}")
    if message.tokenizer not in ("", TOKENIZER_ID):
        raise TrieFormatError(source, f"unknown tokenizer {message.tokenizer!r}")
    try:
        return ItemEncoder(
            kind=_KIND_FROM_PROTO[message.kind],
            unit_size=message.unit_size,
            max_length=message.max_length,
            case_fold=message.case_fold,
            int_bits=message.int_bits or None,
            tokenize=message.tokenizer == TOKENIZER_ID,
        )
    except ValueError as error:
        raise TrieFormatError(source, f"invalid encoding: {error}") from error


@dataclasses.dataclass(frozen=True)
class FrontierBroadcast:
    """A parsed ``FrontierBroadcast``: what a device needs to vote in round ``round_index``.

    Attributes:
      round_index: the round, from 1.
      encoder: how the device must encode its items.
      prefixes: the length-``round_index - 1`` prefixes a vote may extend (``{()}`` in round 1).
    """

    round_index: int
    encoder: ItemEncoder
    prefixes: FrozenSet[Units]


def frontier_from_proto(
    message: vote_pb2.FrontierBroadcast, source: str = "<FrontierBroadcast message>"
) -> FrontierBroadcast:
    """Parses and checks a ``FrontierBroadcast`` message.

    Raises:
      TrieFormatError: unknown schema version, round 0, a missing or invalid encoding, a
        prefix count that does not match (truncated), a prefix of the wrong length, terminated
        or not valid for the encoding, or a duplicate prefix.
    """
    check_version(message.schema_version, source)
    round_index = message.round_index
    if round_index < 1:
        raise TrieFormatError(source, "round_index 0 (rounds are numbered from 1)")
    if not message.HasField("encoding"):
        raise TrieFormatError(source, "no encoding")
    encoder = encoding_from_proto(message.encoding, source)
    if round_index > encoder.max_length:
        raise TrieFormatError(
            source, f"round_index {round_index} exceeds max_length={encoder.max_length}"
        )
    if not message.HasField("prefix_count") or message.prefix_count != len(message.prefixes):
        declared = message.prefix_count if message.HasField("prefix_count") else "no count"
        raise TrieFormatError(
            source,
            f"{len(message.prefixes)} prefixes but prefix_count {declared} (truncated or corrupt)",
        )
    prefixes = set()
    for i, raw in enumerate(message.prefixes):
        where = f"prefix {i}"
        prefix = prefix_from_proto(encoder, raw, source, where)
        if len(prefix) != round_index - 1:
            raise TrieFormatError(
                source,
                f"{where} {prefix!r} has {len(prefix)} units, round {round_index} extends "
                f"prefixes of {round_index - 1}",
            )
        if is_terminated(prefix):
            raise TrieFormatError(source, f"{where} {prefix!r} is terminated")
        if prefix in prefixes:
            raise TrieFormatError(source, f"{where}: duplicate prefix {prefix!r}")
        prefixes.add(prefix)
    return FrontierBroadcast(round_index, encoder, frozenset(prefixes))


def frontier_from_bytes(
    data: bytes, source: str = "<FrontierBroadcast bytes>"
) -> FrontierBroadcast:
    """Parses a serialized ``FrontierBroadcast``; raises TrieFormatError as frontier_from_proto."""
    return frontier_from_proto(parse_message(vote_pb2.FrontierBroadcast, data, source), source)


@dataclasses.dataclass(frozen=True)
class Vote:
    """A parsed ``Vote``: the length-``round_index`` prefix one device voted for."""

    round_index: int
    prefix: Units


def vote_to_proto(prefix: Sequence[Unit], round_index: int, encoder: ItemEncoder) -> vote_pb2.Vote:
    """The ``Vote`` message a device sends for ``prefix`` in round ``round_index``.

    Raises:
      ValueError: the prefix does not have ``round_index`` units or cannot come from
        ``encoder``.
    """
    prefix = as_prefix(prefix)
    if round_index < 1 or len(prefix) != round_index:
        raise ValueError(f"a round-{round_index} vote needs {round_index} units, got {prefix!r}")
    problem = encoder.prefix_problem(prefix)
    if problem:
        raise ValueError(f"prefix {prefix!r} {problem}")
    return vote_pb2.Vote(
        schema_version=SCHEMA_VERSION,
        round_index=round_index,
        prefix=vote_pb2.Prefix(units=[encoder.unit_to_bytes(u) for u in prefix]),
    )


def vote_from_proto(
    message: vote_pb2.Vote, encoder: ItemEncoder, source: str = "<Vote message>"
) -> Vote:
    """Parses and checks a ``Vote`` against the job's encoder.

    The server should drop (and count) votes this refuses, rather than fail the round: a
    device's message is untrusted input.

    Raises:
      TrieFormatError: unknown schema version, round 0, a prefix whose length is not the round
        index, or units not valid for the encoding.
    """
    check_version(message.schema_version, source)
    if message.round_index < 1:
        raise TrieFormatError(source, "round_index 0 (rounds are numbered from 1)")
    prefix = prefix_from_proto(encoder, message.prefix, source, "prefix")
    if len(prefix) != message.round_index:
        raise TrieFormatError(
            source,
            f"prefix {prefix!r} has {len(prefix)} units, a round-{message.round_index} vote "
            f"needs {message.round_index}",
        )
    return Vote(message.round_index, prefix)


def vote_from_bytes(data: bytes, encoder: ItemEncoder, source: str = "<Vote bytes>") -> Vote:
    """Parses a serialized ``Vote``; raises TrieFormatError as vote_from_proto."""
    return vote_from_proto(parse_message(vote_pb2.Vote, data, source), encoder, source)


# ---------------------------------------------------------------------------------------------
# Reading helpers.


def check_version(version: int, source: str) -> None:
    """Refuses, with ``TrieFormatError``, any schema version but ``SCHEMA_VERSION``."""
    if version != SCHEMA_VERSION:
        found = "no schema_version" if version == 0 else f"schema_version {version}"
        raise TrieFormatError(
            source, f"{found}; this reader understands schema_version {SCHEMA_VERSION}"
        )


def parse_message(message_type: Type[_M], data: bytes, source: str) -> _M:
    """Parses ``data`` as a ``message_type``; refuses what does not parse, naming ``source``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    message = message_type()
    try:
        message.ParseFromString(bytes(data))
    except _message.DecodeError as error:
        raise TrieFormatError(
            source, f"not a {message_type.DESCRIPTOR.full_name} message ({error})"
        ) from error
    return message


def unit_from_bytes(encoder: ItemEncoder, raw: bytes, source: str, where: str) -> Unit:
    """One unit read from its bytes; raises TrieFormatError (naming ``where``) for text units
    that are not UTF-8."""
    try:
        return encoder.unit_from_bytes(raw)
    except UnicodeDecodeError as error:
        raise TrieFormatError(
            source, f"{where}: unit {raw!r} is not UTF-8 ({error.reason})"
        ) from error


def prefix_from_proto(
    encoder: ItemEncoder, message: vote_pb2.Prefix, source: str, where: str
) -> Units:
    """A ``Prefix`` message's units; raises TrieFormatError for units the encoder cannot make."""
    prefix = tuple(unit_from_bytes(encoder, raw, source, where) for raw in message.units)
    problem = encoder.prefix_problem(prefix)
    if problem:
        raise TrieFormatError(source, f"{where} {prefix!r} {problem}")
    return prefix
