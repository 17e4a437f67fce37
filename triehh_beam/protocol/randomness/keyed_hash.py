"""SipHash-2-4: the keyed hash behind every random decision (sampling and item choice are
functions of the secret seed, job identity, round and user id only, the same on every machine,
retry and resume; Python's salted ``hash()`` is never used). ``siphash24_batch`` hashes messages
in Arrow's layout (a data buffer and offsets) in one call per batch, without making Python
objects: compiled (the ``triehh_beam_siphash`` extension, built from ``native/siphash.c`` by
``pip install``) when it was built, else with numpy (``siphash24_batch_numpy``, the reference the
compiled code equals bit for bit); ``implementation()`` says which runs. ``siphash24`` hashes one
message with the same code."""

from __future__ import annotations

import hashlib
from typing import Iterable, Tuple

import numpy as np

__all__ = [
    "derive_key",
    "implementation",
    "message_words",
    "pack_messages",
    "siphash24",
    "siphash24_batch",
    "siphash24_batch_numpy",
    "siphash24_words",
]

try:
    # The compiled batch hash (setup.py's optional extension): absent when the machine that
    # installed the package had no C compiler, or when running from a checkout never installed.
    import triehh_beam_siphash as _compiled
except ImportError:
    _compiled = None

_U64 = np.uint64
_MASK64 = (1 << 64) - 1


def derive_key(seed: bytes, purpose: bytes, identity: bytes = b"") -> Tuple[int, int]:
    """A 128-bit SipHash key for one purpose of one job, derived from the secret seed with keyed
    BLAKE2b.

    Distinct purposes (e.g. ``b"sample/round=3"``) give independent keys from one seed, and so
    do distinct job identities (a canonical description of the job, ``DiscoveryConfig
    .sampling_identity``): two jobs that share a seed file still draw independent samples. The
    message is the purpose alone for the empty identity (jobs recorded before identities
    existed), else a zero byte (no purpose starts with one), the identity's length (8 bytes,
    big-endian), the identity and the purpose: an unambiguous encoding of the pair.

    Raises:
      ValueError: the seed is shorter than 16 bytes or longer than 64 (BLAKE2b's key limit).
    """
    if not 16 <= len(seed) <= 64:
        raise ValueError(f"the secret seed must be 16 to 64 bytes, got {len(seed)}")
    if identity:
        purpose = b"\x00" + len(identity).to_bytes(8, "big") + bytes(identity) + purpose
    digest = hashlib.blake2b(purpose, key=seed, digest_size=16, person=b"triehh-beam/v1").digest()
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")


def _rotate(x: np.ndarray, b: int, scratch: np.ndarray) -> None:
    """``x = x <<< b`` in place (``scratch``: an array of x's shape to work in)."""
    np.left_shift(x, _U64(b), out=scratch)
    np.right_shift(x, _U64(64 - b), out=x)
    np.bitwise_or(x, scratch, out=x)


def _sipround(v0, v1, v2, v3, scratch) -> None:
    # In place: a batch hash is a few dozen of these over whole arrays, and not allocating a
    # new array for each of their ~30 operations makes it about 1.5 times as fast.
    v0 += v1
    _rotate(v1, 13, scratch)
    v1 ^= v0
    _rotate(v0, 32, scratch)
    v2 += v3
    _rotate(v3, 16, scratch)
    v3 ^= v2
    v0 += v3
    _rotate(v3, 21, scratch)
    v3 ^= v0
    v2 += v1
    _rotate(v1, 17, scratch)
    v1 ^= v2
    _rotate(v2, 32, scratch)


def pack_messages(messages: Iterable[bytes]) -> Tuple[np.ndarray, np.ndarray]:
    """Arrow-style (data, offsets) buffers for a list of byte strings."""
    messages = list(messages)
    offsets = np.zeros(len(messages) + 1, dtype=np.int64)
    if messages:
        np.cumsum([len(m) for m in messages], out=offsets[1:])
    data = np.frombuffer(b"".join(messages), dtype=np.uint8)
    return data, offsets


def message_words(data: np.ndarray, offsets: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The messages of a batch as SipHash's 64-bit words, which do not depend on the key: hash
    the same messages under many keys with ``siphash24_words`` and pack them once.

    Args:
      data, offsets: the messages, as ``siphash24_batch`` takes them.

    Returns:
      ``(words, n_words)``: ``uint64`` of shape (n, most words), message ``i`` being
      ``words[i, :n_words[i]]`` (``len // 8`` full words, then one holding the tail bytes and
      the length in its top byte); ``n_words`` int64.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    data = np.asarray(data, dtype=np.uint8)
    n = len(offsets) - 1
    if n <= 0:
        return np.zeros((0, 1), dtype=np.uint64), np.zeros(0, dtype=np.int64)
    starts = offsets[:-1] - offsets[0]
    data = data[offsets[0] : offsets[-1]]
    lengths = offsets[1:] - offsets[:-1]
    n_words = lengths // 8 + 1
    max_words = int(n_words.max())
    width = max_words * 8
    positions = np.arange(width, dtype=np.int64)
    inside = positions[None, :] < lengths[:, None]
    index = np.where(inside, starts[:, None] + positions[None, :], 0)
    padded = np.where(inside, data[index] if len(data) else 0, 0).astype(np.uint8)
    padded[np.arange(n), (n_words - 1) * 8 + 7] = (lengths & 0xFF).astype(np.uint8)
    words = np.ascontiguousarray(padded).view("<u8").reshape(n, max_words).astype(np.uint64)
    return words, n_words


def siphash24_words(key: Tuple[int, int], words: np.ndarray, n_words: np.ndarray) -> np.ndarray:
    """SipHash-2-4 of messages packed by ``message_words``, as ``uint64``."""
    n = len(n_words)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    k0, k1 = _U64(key[0] & _MASK64), _U64(key[1] & _MASK64)
    v0 = np.full(n, k0 ^ _U64(0x736F6D6570736575), dtype=np.uint64)
    v1 = np.full(n, k1 ^ _U64(0x646F72616E646F6D), dtype=np.uint64)
    v2 = np.full(n, k0 ^ _U64(0x6C7967656E657261), dtype=np.uint64)
    v3 = np.full(n, k1 ^ _U64(0x7465646279746573), dtype=np.uint64)
    scratch = np.empty(n, dtype=np.uint64)
    for j in range(words.shape[1]):
        m = words[:, j]
        active = j < n_words
        every = bool(active.all())
        # Messages shorter than j + 1 words keep their state: work on copies, then merge.
        w0, w1, w2, w3 = (v0, v1, v2, v3) if every else (v0.copy(), v1.copy(), v2.copy(), v3.copy())
        w3 ^= m
        _sipround(w0, w1, w2, w3, scratch)
        _sipround(w0, w1, w2, w3, scratch)
        w0 ^= m
        if not every:
            for v, w in ((v0, w0), (v1, w1), (v2, w2), (v3, w3)):
                np.copyto(v, w, where=active)
    v2 ^= _U64(0xFF)
    for _ in range(4):
        _sipround(v0, v1, v2, v3, scratch)
    return v0 ^ v1 ^ v2 ^ v3


def implementation() -> str:
    """Which code ``siphash24_batch`` runs: ``"compiled"`` (the ``triehh_beam_siphash``
    extension) or ``"numpy"`` (it was not built: no C compiler at install time)."""
    return "numpy" if _compiled is None else "compiled"


def siphash24_batch(key: Tuple[int, int], data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """SipHash-2-4 of every message of a batch, as ``uint64``: message ``i`` is
    ``data[offsets[i]:offsets[i + 1]]`` (offsets need not start at 0: a slice of an Arrow array).
    One compiled call for the batch, or the numpy code when the extension was not built
    (``implementation()``); both give the same values.

    Args:
      key: the 128-bit key as two 64-bit integers (k0, k1), as ``derive_key`` returns.
      data: ``uint8`` buffer holding the messages back to back.
      offsets: ``n + 1`` integer offsets into ``data`` (int64 or int32 are used as they are).

    Returns:
      ``uint64`` array of length ``n``.

    Raises:
      ValueError: offsets that decrease or point outside ``data``.
    """
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offsets = np.asarray(offsets)
    if offsets.dtype != np.int32:
        offsets = offsets.astype(np.int64, copy=False)
    offsets = np.ascontiguousarray(offsets)
    if _compiled is None:
        _check_offsets(len(data), offsets)
        return siphash24_batch_numpy(key, data, offsets)
    out = np.empty(max(len(offsets) - 1, 0), dtype=np.uint64)
    _compiled.siphash24_batch(int(key[0]) & _MASK64, int(key[1]) & _MASK64, data, offsets, out)
    return out


def _check_offsets(data_length: int, offsets: np.ndarray) -> None:
    """Refuses offsets that decrease or leave ``[0, data_length]``, as the compiled code does."""
    if len(offsets) > 1 and (offsets[0] < 0 or offsets[-1] > data_length or np.any(offsets[1:] < offsets[:-1])):
        raise ValueError(f"offsets do not delimit messages of a {data_length}-byte buffer "
                         "(offsets must be non-decreasing and within the data)")


def siphash24_batch_numpy(key: Tuple[int, int], data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``siphash24_batch`` with numpy alone (about 30 whole-array operations per SipHash round):
    the reference the compiled code is tested against, and the fallback when it was not built.
    Offsets are not checked."""
    return siphash24_words(key, *message_words(data, offsets))


def siphash24(key: Tuple[int, int], message: bytes) -> int:
    """SipHash-2-4 of one message (the batch code on a batch of one)."""
    data, offsets = pack_messages([message])
    return int(siphash24_batch(key, data, offsets)[0])
