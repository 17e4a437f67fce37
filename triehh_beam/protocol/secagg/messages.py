"""The secure-aggregation messages (``protos/.../secagg.proto``): the server's ``SecAggRequest``
(setup, roster, inbox, survivors) and the device's ``SecAggReport`` (keys, shares, masked,
unmask), each a frozen dataclass around one phase's payload, checked when built, with
deterministic ``to_bytes`` and a ``from_bytes`` that treats the bytes as untrusted and refuses
them with ``FederatedFormatError``."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional, Tuple, Union

import numpy as np

from triehh_beam.proto import secagg_pb2
from triehh_beam.protocol.federated.messages import (FederatedFormatError, build_checked, check_bounded,
                                                     check_header, check_token, check_version,
                                                     parse_message, serialize_message)
from triehh_beam.protocol.secagg import shamir
from triehh_beam.protocol.secagg.crypto import KEY_BYTES
from triehh_beam.protocol.secagg.device import SHARE_PLAINTEXT_BYTES, ShareKind

__all__ = ["CIPHERTEXT_BYTES", "SCHEMA_VERSION", "Inbox", "Keys", "Masked", "Roster", "SecAggReport",
           "SecAggRequest", "Setup", "Shares", "Survivors", "Unmask"]

#: The version both messages write.
SCHEMA_VERSION = 1
#: An encrypted pair of shares: the plaintext and GCM's 16-byte tag.
CIPHERTEXT_BYTES = SHARE_PLAINTEXT_BYTES + 16
_SHARE = shamir.share_bytes(KEY_BYTES)
_U32 = 2**32


def _fail(problem: str):
    raise FederatedFormatError("<SecAgg>", problem)


def _indices(values, what: str) -> Tuple[int, ...]:
    values = tuple(values)
    for v in values:
        check_bounded("<SecAgg>", what, v, 1, _U32)
    if len(set(values)) != len(values):
        _fail(f"repeated {what}")
    return values


def _key(value, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != KEY_BYTES:
        _fail(f"{what} must be {KEY_BYTES} bytes")
    return value


def _ciphertexts(pairs) -> Tuple[Tuple[int, bytes], ...]:
    pairs = tuple((p, c) for p, c in pairs)
    _indices((p for p, _ in pairs), "peer index")
    for _, c in pairs:
        if not isinstance(c, bytes) or len(c) != CIPHERTEXT_BYTES:
            _fail(f"a ciphertext must be {CIPHERTEXT_BYTES} bytes")
    return pairs


@dataclasses.dataclass(frozen=True)
class Setup:
    """A device's place in its cohort and the vote vector's shape (``secagg.proto``)."""

    cohort: int
    index: int
    size: int
    threshold: int
    alphabet: Tuple[bytes, ...]
    slots: int
    invitation: bytes = dataclasses.field(repr=False)

    def __post_init__(self):
        if not isinstance(self.invitation, bytes) or not self.invitation:
            _fail("a setup carries the device's invitation")
        check_bounded("<SecAgg>", "cohort", self.cohort, 0, _U32)
        check_bounded("<SecAgg>", "size", self.size, 2, _U32)
        check_bounded("<SecAgg>", "index", self.index, 1, self.size + 1)
        check_bounded("<SecAgg>", "threshold", self.threshold, 2, self.size + 1)
        check_bounded("<SecAgg>", "slots", self.slots, 3, _U32)
        object.__setattr__(self, "alphabet", tuple(self.alphabet))
        if any(not isinstance(u, bytes) or not u for u in self.alphabet) or len(set(self.alphabet)) != len(self.alphabet):
            _fail("the alphabet's units are distinct non-empty bytes")


@dataclasses.dataclass(frozen=True)
class Roster:
    """Every advertised device: ``(index, cipher public key, mask public key)``, by index."""

    members: Tuple[Tuple[int, bytes, bytes], ...]

    def __post_init__(self):
        members = tuple(sorted((i, c, m) for i, c, m in self.members))
        _indices((i for i, _, _ in members), "member index")
        for _, c, m in members:
            _key(c, "a cipher public key"), _key(m, "a mask public key")
        object.__setattr__(self, "members", members)

    def keys(self) -> dict:
        return {i: (c, m) for i, c, m in self.members}


@dataclasses.dataclass(frozen=True)
class Inbox:
    """The ciphertexts addressed to the device: ``(sender, ciphertext)``."""

    shares: Tuple[Tuple[int, bytes], ...]

    def __post_init__(self):
        object.__setattr__(self, "shares", tuple(sorted(_ciphertexts(self.shares))))


@dataclasses.dataclass(frozen=True)
class Survivors:
    """The devices whose masked vectors reached the server."""

    indices: Tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(sorted(_indices(self.indices, "survivor index"))))


@dataclasses.dataclass(frozen=True)
class Keys:
    """A device's two public keys."""

    cipher_public_key: bytes
    mask_public_key: bytes

    def __post_init__(self):
        _key(self.cipher_public_key, "the cipher public key"), _key(self.mask_public_key, "the mask public key")


@dataclasses.dataclass(frozen=True)
class Shares:
    """A device's ciphertexts, ``(receiver, ciphertext)``."""

    shares: Tuple[Tuple[int, bytes], ...]

    def __post_init__(self):
        object.__setattr__(self, "shares", tuple(sorted(_ciphertexts(self.shares))))


@dataclasses.dataclass(frozen=True)
class Masked:
    """A masked vector: 4 bytes per slot, little-endian (``values`` as uint32)."""

    vector: bytes = dataclasses.field(repr=False)

    def __post_init__(self):
        if not isinstance(self.vector, bytes) or not self.vector or len(self.vector) % 4:
            _fail("a masked vector is a non-empty multiple of 4 bytes")

    @classmethod
    def of(cls, values: np.ndarray) -> "Masked":
        return cls(np.asarray(values, dtype="<u4").tobytes())

    @property
    def values(self) -> np.ndarray:
        return np.frombuffer(self.vector, dtype="<u4").astype(np.uint32)


@dataclasses.dataclass(frozen=True)
class Unmask:
    """A survivor's unmasking shares: ``(owner, ShareKind, share)``."""

    shares: Tuple[Tuple[int, ShareKind, bytes], ...]

    def __post_init__(self):
        shares = tuple(sorted((o, ShareKind(k), s) for o, k, s in self.shares))
        _indices((o for o, _, _ in shares), "share owner")
        if any(not isinstance(s, bytes) or len(s) != _SHARE for _, _, s in shares):
            _fail(f"an unmasking share must be {_SHARE} bytes")
        object.__setattr__(self, "shares", shares)


RequestPhase = Union[Setup, Roster, Inbox, Survivors]
ReportPhase = Union[Keys, Shares, Masked, Unmask]


@dataclasses.dataclass(frozen=True)
class _SecAggMessage:
    """What both messages share: the header (job, round, token), one phase, the version, and
    the parse with its refusals; a subclass names its phases and writes and reads them."""

    job_id: str
    round_index: int
    token: bytes = dataclasses.field(repr=False)
    phase: object

    _PHASES: ClassVar[tuple] = ()
    _PROTO: ClassVar[type] = type(None)

    def __post_init__(self):
        source = f"<{type(self).__name__}>"
        check_header(source, self.job_id, self.round_index)
        check_token(source, self.token)
        if not isinstance(self.phase, self._PHASES):
            raise FederatedFormatError(source, f"a phase of {', '.join(k.__name__ for k in self._PHASES)}, got "
                                       f"{type(self.phase).__name__}")

    def to_bytes(self) -> bytes:
        """The serialized message (deterministic: equal messages, equal bytes)."""
        message = self._PROTO(schema_version=SCHEMA_VERSION, job_id=self.job_id, round_index=self.round_index,
                              token=self.token)
        self._write_phase(message)
        return serialize_message(message)

    def _write_phase(self, message) -> None:
        raise NotImplementedError

    @classmethod
    def _read_phase(cls, message, which: str, source: str):
        raise NotImplementedError

    @classmethod
    def from_bytes(cls, data: bytes, source: Optional[str] = None):
        """Parses and checks serialized bytes (untrusted: the server drops and counts a device's
        report this refuses).

        Raises:
          FederatedFormatError: bytes that do not parse, another schema version, no phase, or
            any value the phase's checks refuse (the message names ``source``).
        """
        source = source or f"<{cls.__name__} bytes>"
        message = parse_message(cls._PROTO, data, source)
        check_version(source, message.schema_version, (SCHEMA_VERSION,))
        which = message.WhichOneof("phase")
        if which is None:
            raise FederatedFormatError(source, "no phase (truncated or corrupt)")
        try:
            phase = cls._read_phase(message, which, source)
        except FederatedFormatError as error:
            raise FederatedFormatError(source, error.problem) from None
        return build_checked(cls, source, message.job_id, message.round_index, message.token, phase)


@dataclasses.dataclass(frozen=True)
class SecAggRequest(_SecAggMessage):
    """Server -> one device: one phase of the device's run, tied to its invitation's token."""

    _PHASES: ClassVar[tuple] = (Setup, Roster, Inbox, Survivors)
    _PROTO: ClassVar[type] = secagg_pb2.SecAggRequest

    def _write_phase(self, message) -> None:
        p = self.phase
        if isinstance(p, Setup):
            message.setup.CopyFrom(secagg_pb2.SecAggRequest.Setup(
                cohort=p.cohort, index=p.index, size=p.size, threshold=p.threshold, alphabet=p.alphabet, slots=p.slots,
                invitation=p.invitation))
        elif isinstance(p, Roster):
            message.roster.members.extend(secagg_pb2.SecAggMember(index=i, cipher_public_key=c, mask_public_key=m)
                                          for i, c, m in p.members)
            message.roster.SetInParent()
        elif isinstance(p, Inbox):
            message.inbox.shares.extend(secagg_pb2.SecAggCiphertext(peer=s, ciphertext=c) for s, c in p.shares)
            message.inbox.SetInParent()
        else:
            message.survivors.indices.extend(p.indices)
            message.survivors.SetInParent()

    @classmethod
    def _read_phase(cls, message, which: str, source: str) -> RequestPhase:
        if which == "setup":
            s = message.setup
            return Setup(s.cohort, s.index, s.size, s.threshold, tuple(s.alphabet), s.slots, s.invitation)
        if which == "roster":
            return Roster(tuple((m.index, m.cipher_public_key, m.mask_public_key) for m in message.roster.members))
        if which == "inbox":
            return Inbox(tuple((c.peer, c.ciphertext) for c in message.inbox.shares))
        return Survivors(tuple(message.survivors.indices))


@dataclasses.dataclass(frozen=True)
class SecAggReport(_SecAggMessage):
    """Device -> server: the device's answer to one request."""

    _PHASES: ClassVar[tuple] = (Keys, Shares, Masked, Unmask)
    _PROTO: ClassVar[type] = secagg_pb2.SecAggReport

    def _write_phase(self, message) -> None:
        p = self.phase
        if isinstance(p, Keys):
            message.keys.CopyFrom(secagg_pb2.SecAggReport.Keys(cipher_public_key=p.cipher_public_key,
                                                               mask_public_key=p.mask_public_key))
        elif isinstance(p, Shares):
            message.shares.shares.extend(secagg_pb2.SecAggCiphertext(peer=r, ciphertext=c) for r, c in p.shares)
            message.shares.SetInParent()
        elif isinstance(p, Masked):
            message.masked.vector = p.vector
        else:
            message.unmask.shares.extend(secagg_pb2.SecAggUnmaskShare(owner=o, kind=int(k), share=s)
                                         for o, k, s in p.shares)
            message.unmask.SetInParent()

    @classmethod
    def _read_phase(cls, message, which: str, source: str) -> ReportPhase:
        if which == "keys":
            return Keys(message.keys.cipher_public_key, message.keys.mask_public_key)
        if which == "shares":
            return Shares(tuple((c.peer, c.ciphertext) for c in message.shares.shares))
        if which == "masked":
            return Masked(message.masked.vector)
        if any(s.kind not in (ShareKind.SELF_MASK, ShareKind.MASK_KEY) for s in message.unmask.shares):
            raise FederatedFormatError(source, "an unmasking share of unknown kind")
        return Unmask(tuple((s.owner, s.kind, s.share) for s in message.unmask.shares))
