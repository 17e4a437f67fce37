"""One device's side of a cohort's secure aggregation, as a state machine that answers the
server's four messages in order: advertise two X25519 public keys; share (t-of-n Shamir shares of
the mask key and of a fresh self-mask seed, each encrypted to its holder); mask (the input plus
the self-mask plus, for every other device that shared, the pair's mask with the sign the lower
index adds); unmask (for each device that shared: its self-mask share if it sent its masked
input, else its mask-key share, never both)."""

from __future__ import annotations

import enum
import struct
from typing import Callable, Collection, Dict, Mapping, Tuple

import numpy as np

from triehh_beam.protocol.secagg import shamir
from triehh_beam.protocol.secagg.crypto import (
    KEY_BYTES, MASK_PURPOSE, SHARE_PURPOSE, CohortContext, KeyPair, SecAggCryptoError, agree, expand_mask,
    open_shares, seal_shares)

__all__ = ["SHARE_PLAINTEXT_BYTES", "SecAggDevice", "SecAggProtocolError", "ShareKind", "pack_shares", "unpack_shares"]

#: sender, receiver (4 bytes each) and the two shares of 32-byte secrets.
SHARE_PLAINTEXT_BYTES = 8 + 2 * shamir.share_bytes(KEY_BYTES)

RandomBytes = Callable[[int], bytes]
PublicKeys = Tuple[bytes, bytes]  # (share-encryption public key, mask public key)


class SecAggProtocolError(ValueError):
    """A message the protocol does not allow at this point: out of order, too few devices (below
    the threshold), an index outside the cohort, keys or shares that do not check."""


class ShareKind(enum.IntEnum):
    """What an unmasking share recovers."""

    SELF_MASK = 1  # the seed of a survivor's self-mask
    MASK_KEY = 2   # the mask private key of a device that dropped after sharing


class _Phase(enum.IntEnum):
    KEYS = 0
    SHARE = 1
    MASK = 2
    UNMASK = 3
    DONE = 4


def pack_shares(sender: int, receiver: int, key_share: bytes, seed_share: bytes) -> bytes:
    """The plaintext one device encrypts for another: both indices, its mask key's share, its
    self-mask seed's share."""
    return struct.pack(">II", sender, receiver) + key_share + seed_share


def unpack_shares(plaintext: bytes, sender: int, receiver: int) -> Tuple[bytes, bytes]:
    """(mask key share, seed share) from a decrypted plaintext.

    Raises:
      SecAggProtocolError: the wrong length, or indices other than (sender, receiver).
    """
    if len(plaintext) != SHARE_PLAINTEXT_BYTES:
        raise SecAggProtocolError(f"shares from {sender} are {len(plaintext)} bytes, not {SHARE_PLAINTEXT_BYTES}")
    if struct.unpack(">II", plaintext[:8]) != (sender, receiver):
        raise SecAggProtocolError(f"shares from {sender} name another pair")
    half = shamir.share_bytes(KEY_BYTES)
    return plaintext[8:8 + half], plaintext[8 + half:]


def _agree(private: bytes, peer_public: bytes, context: CohortContext, purpose: bytes) -> bytes:
    """``agree``, a peer key it refuses (small order, wrong length) refused as a protocol error."""
    try:
        return agree(private, peer_public, context, purpose)
    except SecAggCryptoError as error:
        raise SecAggProtocolError(str(error)) from None


def pair_sign(own: int, other: int) -> int:
    """+1 when ``own`` adds the pair's mask (the lower index), -1 when it subtracts it."""
    return 1 if own < other else -1


class SecAggDevice:
    """Device ``index`` (1 to ``size``) of a cohort, masking ``vector``. A refused message ends
    the device's part in the run (every later call is refused too).

    Args:
      context: the cohort's context (job, round, cohort).
      index: this device's index in the cohort (its Shamir x-coordinate).
      size: the cohort's size n.
      threshold: t, the devices needed at every phase (at least 2, at most n).
      vector: the input, a uint32 vector (one-hot for a vote).
      random_bytes: the source of every secret this device draws (``os.urandom`` in
        production; a seeded source only in tests and vectors).

    Raises:
      SecAggProtocolError: an index outside [1, n] or a threshold outside [2, n].
    """

    def __init__(self, context: CohortContext, index: int, size: int, threshold: int, vector: np.ndarray,
                 random_bytes: RandomBytes):
        if not 2 <= threshold <= size:
            raise SecAggProtocolError(f"threshold {threshold} must be in [2, {size}]")
        if not 1 <= index <= size:
            raise SecAggProtocolError(f"index {index} must be in [1, {size}]")
        self.context, self.index, self.size, self.threshold = context, index, size, threshold
        self._vector = np.asarray(vector, dtype=np.uint32).copy()
        self._random = random_bytes
        self._cipher_keys = KeyPair.generate(random_bytes)
        self._mask_keys = KeyPair.generate(random_bytes)
        self._phase = _Phase.KEYS
        self._roster: Dict[int, PublicKeys] = {}
        self._held: Dict[int, Tuple[bytes, bytes]] = {}  # sender -> (mask key share, seed share)
        self._seed = b""
        self._sharers: Tuple[int, ...] = ()

    def _advance(self, expected: _Phase) -> None:
        if self._phase != expected:
            raise SecAggProtocolError(f"device {self.index}: a {expected.name.lower()} message in the "
                                      f"{self._phase.name.lower()} phase")
        self._phase = _Phase(expected + 1)

    def _check_members(self, members: Collection[int], what: str) -> None:
        if self.index not in members:
            raise SecAggProtocolError(f"device {self.index} is not among the {what}")
        if any(not 1 <= m <= self.size for m in members):
            raise SecAggProtocolError(f"the {what} name an index outside [1, {self.size}]")
        if len(members) < self.threshold:
            raise SecAggProtocolError(f"{len(members)} {what}, below the threshold {self.threshold}")

    def advertise(self) -> PublicKeys:
        """Phase 0: (share-encryption public key, mask public key)."""
        self._advance(_Phase.KEYS)
        return self._cipher_keys.public, self._mask_keys.public

    def share(self, roster: Mapping[int, PublicKeys]) -> Dict[int, bytes]:
        """Phase 1: given every advertised key (index -> keys, this device's included), the
        ciphertext for each other device of the roster.

        Raises:
          SecAggProtocolError: out of order, a roster below the threshold, without this device's
            own keys, with an index outside the cohort, or with repeated keys.
        """
        self._advance(_Phase.SHARE)
        self._check_members(roster, "advertised devices")
        if tuple(roster[self.index]) != (self._cipher_keys.public, self._mask_keys.public):
            raise SecAggProtocolError(f"device {self.index}: the roster holds other keys for this device")
        publics = [k for keys in roster.values() for k in keys]
        if len(set(publics)) != len(publics):
            raise SecAggProtocolError("the roster repeats a public key")
        self._roster = {i: tuple(keys) for i, keys in roster.items()}
        self._seed = self._random(KEY_BYTES)
        members = sorted(roster)
        key_shares = shamir.split(self._mask_keys.private, self.threshold, members, self._random)
        seed_shares = shamir.split(self._seed, self.threshold, members, self._random)
        self._held[self.index] = (key_shares[self.index], seed_shares[self.index])
        out = {}
        for other in members:
            if other == self.index:
                continue
            key = _agree(self._cipher_keys.private, roster[other][0], self.context, SHARE_PURPOSE)
            out[other] = seal_shares(key, self.context, self.index, other,
                                     pack_shares(self.index, other, key_shares[other], seed_shares[other]))
        return out

    def mask(self, received: Mapping[int, bytes]) -> np.ndarray:
        """Phase 2: given the ciphertexts addressed to this device (sender -> bytes) by the
        devices whose shares reached the server, the masked input.

        Raises:
          SecAggProtocolError: out of order, fewer than threshold - 1 senders, a sender not in
            the roster, or a ciphertext that does not authenticate or check.
        """
        self._advance(_Phase.MASK)
        sharers = set(received) | {self.index}
        self._check_members(sharers, "devices that shared")
        for sender, ciphertext in received.items():
            if sender == self.index or sender not in self._roster:
                raise SecAggProtocolError(f"shares from {sender}, who is not another advertised device")
            key = _agree(self._cipher_keys.private, self._roster[sender][0], self.context, SHARE_PURPOSE)
            try:
                plaintext = open_shares(key, self.context, sender, self.index, ciphertext)
            except SecAggCryptoError as error:
                raise SecAggProtocolError(str(error)) from None
            self._held[sender] = unpack_shares(plaintext, sender, self.index)
        self._sharers = tuple(sorted(sharers))
        masked = self._vector + expand_mask(self._seed, len(self._vector))
        for other in self._sharers:
            if other != self.index:
                seed = _agree(self._mask_keys.private, self._roster[other][1], self.context, MASK_PURPOSE)
                pairwise = expand_mask(seed, len(self._vector))
                masked = masked + pairwise if pair_sign(self.index, other) > 0 else masked - pairwise
        self._vector = np.zeros(0, dtype=np.uint32)  # the plaintext is not kept past masking
        return masked

    def unmask(self, survivors: Collection[int]) -> Dict[int, Tuple[ShareKind, bytes]]:
        """Phase 3: given the devices whose masked inputs reached the server, for every device
        that shared, the share that lets the server remove its masks: a survivor's self-mask
        seed share, a dropped device's mask key share.

        Raises:
          SecAggProtocolError: out of order, survivors below the threshold, without this device,
            or naming a device that did not share.
        """
        self._advance(_Phase.UNMASK)
        survivors = set(survivors)
        self._check_members(survivors, "survivors")
        if not survivors <= set(self._sharers):
            raise SecAggProtocolError("a survivor that did not share")
        out = {}
        for sharer in self._sharers:
            key_share, seed_share = self._held[sharer]
            out[sharer] = (ShareKind.SELF_MASK, seed_share) if sharer in survivors else (ShareKind.MASK_KEY, key_share)
        return out
