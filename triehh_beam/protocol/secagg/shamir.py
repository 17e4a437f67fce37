"""t-of-n Shamir secret sharing of byte strings over the prime field GF(2^31 - 1): a secret is cut
into 3-byte chunks, each chunk shared with its own random polynomial of degree t - 1, and a share
is one 31-bit value per chunk (4 bytes each, big-endian). The x-coordinates are the holders'
indices in their cohort (1 to n). Vectorised with numpy: every product of two field elements is
below 2^62, so int64 arithmetic is exact."""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Sequence

import numpy as np

__all__ = ["PRIME", "ShamirError", "chunk_count", "combine", "lagrange_at_zero", "share_bytes", "split"]

#: The field's prime, 2^31 - 1.
PRIME = 2**31 - 1
_CHUNK = 3

RandomBytes = Callable[[int], bytes]


class ShamirError(ValueError):
    """Shares that cannot be split or combined as asked (too few, inconsistent, out of range)."""


def chunk_count(secret_length: int) -> int:
    """The field elements one share of a ``secret_length``-byte secret holds."""
    return -(-secret_length // _CHUNK)


def share_bytes(secret_length: int) -> int:
    """The byte length of one share of a ``secret_length``-byte secret."""
    return 4 * chunk_count(secret_length)


def random_field(random_bytes: RandomBytes, count: int) -> np.ndarray:
    """``count`` uniform elements of GF(p) drawn from ``random_bytes``: 31-bit words, the one
    value equal to p redrawn (rejection keeps them exactly uniform)."""
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        need = count - filled
        words = np.frombuffer(random_bytes(4 * need), dtype=">u4").astype(np.int64) & 0x7FFFFFFF
        words = words[words != PRIME]
        out[filled:filled + len(words)] = words
        filled += len(words)
    return out


def split(secret: bytes, threshold: int, xs: Sequence[int], random_bytes: RandomBytes) -> Dict[int, bytes]:
    """Shares of ``secret``, one per x in ``xs``; any ``threshold`` of them recover it.

    The polynomials' coefficients are drawn from ``random_bytes``, chunk by chunk, coefficient 1
    to t - 1 (so a seeded source gives reproducible shares).

    Raises:
      ShamirError: an empty secret, a threshold outside [1, len(xs)], or an x outside [1, p)
        or repeated.
    """
    if not isinstance(secret, bytes) or not secret:
        raise ShamirError("the secret is non-empty bytes")
    xs = [_check_x(x) for x in xs]
    if len(set(xs)) != len(xs):
        raise ShamirError("repeated x-coordinates")
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= len(xs):
        raise ShamirError(f"threshold {threshold!r} must be in [1, {len(xs)}] (the number of holders)")
    chunks = _to_chunks(secret)
    coefficients = random_field(random_bytes, len(chunks) * (threshold - 1)).reshape(len(chunks), threshold - 1)
    points = np.array(xs, dtype=np.int64)
    # Horner from the highest coefficient down: values[c, i] is chunk c's polynomial at xs[i].
    values = np.zeros((len(chunks), len(xs)), dtype=np.int64)
    for degree in range(threshold - 2, -1, -1):
        values = (values * points + coefficients[:, degree:degree + 1]) % PRIME
    values = (values * points + chunks[:, None]) % PRIME
    return {x: values[:, i].astype(">u4").tobytes() for i, x in enumerate(xs)}


def lagrange_at_zero(xs: Sequence[int]) -> np.ndarray:
    """The Lagrange coefficients that evaluate at 0 the polynomial through the points ``xs``.

    Raises:
      ShamirError: an x outside [1, p) or repeated.
    """
    xs = [_check_x(x) for x in xs]
    if len(set(xs)) != len(xs):
        raise ShamirError("repeated x-coordinates")
    coefficients = []
    for i, xi in enumerate(xs):
        numerator, denominator = 1, 1
        for j, xj in enumerate(xs):
            if j != i:
                numerator = numerator * xj % PRIME
                denominator = denominator * (xj - xi) % PRIME
        coefficients.append(numerator * pow(denominator, PRIME - 2, PRIME) % PRIME)
    return np.array(coefficients, dtype=np.int64)


def combine(shares: Mapping[int, bytes], threshold: int, secret_length: int) -> bytes:
    """The secret behind ``threshold`` of ``shares`` (those of the smallest x).

    Shares are not authenticated: wrong shares give a wrong secret, which the caller checks
    (a secret key against its public key).

    Raises:
      ShamirError: fewer than ``threshold`` shares, a share of the wrong length, or a
        recovered chunk that does not fit its bytes.
    """
    if len(shares) < threshold:
        raise ShamirError(f"{len(shares)} shares, {threshold} needed")
    xs = sorted(shares)[:threshold]
    values = _share_matrix([shares[x] for x in xs], secret_length)
    return chunks_to_bytes(combine_values(values, lagrange_at_zero(xs)), secret_length)


def combine_values(values: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """Chunk values at 0 from ``values[holder, ..., chunk]`` and the holders' Lagrange
    coefficients: each product reduced before the sum, so the int64 sum cannot overflow for
    fewer than 2^31 holders."""
    weights = coefficients.reshape((-1,) + (1,) * (values.ndim - 1))
    return ((values * weights) % PRIME).sum(axis=0) % PRIME


def parse_share(share: bytes, secret_length: int) -> np.ndarray:
    """A share's field elements, checked.

    Raises:
      ShamirError: a share of the wrong length or holding a value not below p.
    """
    if not isinstance(share, bytes) or len(share) != share_bytes(secret_length):
        raise ShamirError(f"a share of a {secret_length}-byte secret is {share_bytes(secret_length)} bytes")
    values = np.frombuffer(share, dtype=">u4").astype(np.int64)
    if (values >= PRIME).any():
        raise ShamirError("a share value is not below the field's prime")
    return values


def _share_matrix(shares: Sequence[bytes], secret_length: int) -> np.ndarray:
    return np.stack([parse_share(s, secret_length) for s in shares])


def _to_chunks(secret: bytes) -> np.ndarray:
    padded = secret + bytes(-len(secret) % _CHUNK)
    raw = np.frombuffer(padded, dtype=np.uint8).reshape(-1, _CHUNK).astype(np.int64)
    return (raw[:, 0] << 16) | (raw[:, 1] << 8) | raw[:, 2]


def chunks_to_bytes(chunks: np.ndarray, secret_length: int) -> bytes:
    """The secret's bytes from its chunk values.

    Raises:
      ShamirError: a chunk not below 2^24 or nonzero padding (the shares were inconsistent).
    """
    if (chunks >= 1 << 24).any():
        raise ShamirError("the shares are inconsistent (a recovered chunk exceeds 3 bytes)")
    raw = np.stack([(chunks >> 16) & 0xFF, (chunks >> 8) & 0xFF, chunks & 0xFF], axis=1).astype(np.uint8)
    data = raw.tobytes()
    if any(data[secret_length:]):
        raise ShamirError("the shares are inconsistent (nonzero padding)")
    return data[:secret_length]


def _check_x(x) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 1 <= int(x) < PRIME:
        raise ShamirError(f"x-coordinate {x!r} must be an integer in [1, {PRIME})")
    return int(x)

