"""The cryptography of one cohort's secure aggregation, all from PyCA ``cryptography``: X25519 key
pairs, key agreement turned into a 32-byte key by HKDF-SHA256 (salt: the cohort's context, info:
what the key is for), the mask generator (AES-256-CTR keystream from a zero counter, read as
little-endian 32-bit words, so arithmetic is modulo 2^32), and AES-256-GCM for the shares a
device sends another through the server (nonce: sender and receiver indices, AAD: the context)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Callable

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = [
    "KEY_BYTES",
    "MASK_PURPOSE",
    "SHARE_PURPOSE",
    "CohortContext",
    "KeyPair",
    "SecAggCryptoError",
    "agree",
    "expand_mask",
    "open_shares",
    "public_of",
    "seal_shares",
]

#: The length of a private key, a public key, a seed and a derived key.
KEY_BYTES = 32
#: HKDF info of a pairwise mask seed.
MASK_PURPOSE = b"triehh-secagg-v1 pairwise mask"
#: HKDF info of the key that encrypts the shares one device sends another.
SHARE_PURPOSE = b"triehh-secagg-v1 share encryption"

RandomBytes = Callable[[int], bytes]


class SecAggCryptoError(ValueError):
    """A key that is not a usable X25519 key, or a ciphertext that does not authenticate."""


@dataclasses.dataclass(frozen=True)
class CohortContext:
    """What every key and ciphertext of one cohort's run is bound to, so nothing derived in one
    round, job or cohort is valid in another.

    Attributes:
      job_id: the job (non-empty).
      round_index: the round (>= 1; the estimate round's too).
      cohort: the cohort's index in the round (>= 0).
    """

    job_id: str
    round_index: int
    cohort: int

    def __post_init__(self):
        if not isinstance(self.job_id, str) or not self.job_id:
            raise ValueError(f"the job id is a non-empty string, got {self.job_id!r}")
        for name, low in (("round_index", 1), ("cohort", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**32:
                raise ValueError(f"{name} must be an integer in [{low}, 2^32), got {value!r}")

    def to_bytes(self) -> bytes:
        """``b"triehh-secagg-v1"``, the job id's UTF-8 length (4 bytes, big-endian) and bytes,
        the round and the cohort (4 bytes each, big-endian): the HKDF salt and the GCM AAD."""
        job = self.job_id.encode("utf-8")
        return b"triehh-secagg-v1" + struct.pack(">I", len(job)) + job + struct.pack(">II", self.round_index, self.cohort)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """An X25519 key pair as raw bytes (32 each)."""

    private: bytes = dataclasses.field(repr=False)
    public: bytes

    @classmethod
    def generate(cls, random_bytes: RandomBytes) -> "KeyPair":
        """A key pair whose private key is 32 bytes of ``random_bytes`` (X25519 clamps it)."""
        private = random_bytes(KEY_BYTES)
        return cls(private, public_of(private))


def public_of(private: bytes) -> bytes:
    """The X25519 public key of a 32-byte private key.

    Raises:
      SecAggCryptoError: not 32 bytes.
    """
    if not isinstance(private, bytes) or len(private) != KEY_BYTES:
        raise SecAggCryptoError(f"an X25519 private key is {KEY_BYTES} bytes")
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes_raw()


def agree(private: bytes, peer_public: bytes, context: CohortContext, purpose: bytes) -> bytes:
    """HKDF-SHA256(X25519(private, peer_public), salt=context, info=purpose), 32 bytes; equal on
    both sides of a pair.

    Raises:
      SecAggCryptoError: a key of the wrong length, or a peer key of small order (the shared
        secret would be all zeros).
    """
    if not isinstance(peer_public, bytes) or len(peer_public) != KEY_BYTES:
        raise SecAggCryptoError(f"an X25519 public key is {KEY_BYTES} bytes")
    if not isinstance(private, bytes) or len(private) != KEY_BYTES:
        raise SecAggCryptoError(f"an X25519 private key is {KEY_BYTES} bytes")
    try:
        shared = X25519PrivateKey.from_private_bytes(private).exchange(X25519PublicKey.from_public_bytes(peer_public))
    except ValueError as error:
        raise SecAggCryptoError(f"an unusable peer key ({error})") from None
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=context.to_bytes(), info=purpose).derive(shared)


def expand_mask(seed: bytes, length: int) -> np.ndarray:
    """``length`` pseudorandom words modulo 2^32 from a 32-byte seed: the AES-256-CTR keystream
    under key ``seed`` from an all-zero counter block, read as little-endian uint32."""
    if not isinstance(seed, bytes) or len(seed) != KEY_BYTES:
        raise SecAggCryptoError(f"a mask seed is {KEY_BYTES} bytes")
    encryptor = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor()
    stream = encryptor.update(bytes(4 * length)) + encryptor.finalize()
    return np.frombuffer(stream, dtype="<u4")


def _nonce(sender: int, receiver: int) -> bytes:
    return struct.pack(">III", sender, receiver, 0)


def seal_shares(key: bytes, context: CohortContext, sender: int, receiver: int, plaintext: bytes) -> bytes:
    """AES-256-GCM of ``plaintext`` from ``sender`` to ``receiver`` (cohort indices): the nonce
    is (sender, receiver, 0) as three big-endian 32-bit words, used once per key and direction."""
    return AESGCM(key).encrypt(_nonce(sender, receiver), plaintext, context.to_bytes())


def open_shares(key: bytes, context: CohortContext, sender: int, receiver: int, ciphertext: bytes) -> bytes:
    """The plaintext of ``seal_shares``.

    Raises:
      SecAggCryptoError: the ciphertext does not authenticate (altered, or for another pair,
        cohort, round or job).
    """
    try:
        return AESGCM(key).decrypt(_nonce(sender, receiver), ciphertext, context.to_bytes())
    except InvalidTag:
        raise SecAggCryptoError(f"shares from {sender} to {receiver} do not authenticate") from None
