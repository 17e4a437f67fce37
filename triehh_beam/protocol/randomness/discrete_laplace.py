"""The two-sided geometric mechanism (discrete Laplace), the noise of the frequency estimates
(docs/protocol.md §5): ``TwoSidedGeometric`` samples ``P(Z = z) = (1 - a) / (1 + a) * a^|z|``,
``a = e^-epsilon``, exactly, in integer arithmetic on the exact rational epsilon (Canonne, Kamath
and Steinke's algorithms), from ``KeyedBits``, a BLAKE2b counter-mode stream keyed from the job's
seed, so the same key and label always give the same noise."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from fractions import Fraction
from typing import Tuple

__all__ = ["KeyedBits", "TwoSidedGeometric", "bernoulli_exp", "discrete_laplace"]

_BLOCK_BYTES = 64  # one BLAKE2b-512 output per block of the stream
_PERSON = b"triehh-noise/v1"


class KeyedBits:
    """A deterministic stream of uniform bits: block ``i`` is keyed BLAKE2b-512 of (label length,
    label, i). A PRF in counter mode: unpredictable without the key, identical on every run.

    Args:
      key: a 128-bit key as two 64-bit integers (``keyed_hash.derive_key``).
      label: what the stream is for (the target an estimate's noise belongs to): distinct
        labels give independent streams.
    """

    def __init__(self, key: Tuple[int, int], label: bytes):
        self._key = key[0].to_bytes(8, "little") + key[1].to_bytes(8, "little")
        self._prefix = len(label).to_bytes(8, "big") + bytes(label)
        self._block = 0
        self._pool = 0  # unused bits, as an integer of ``self._bits`` bits
        self._bits = 0

    def _refill(self) -> None:
        digest = hashlib.blake2b(self._prefix + self._block.to_bytes(8, "big"), key=self._key,
                                 digest_size=_BLOCK_BYTES, person=_PERSON).digest()
        self._block += 1
        self._pool = (self._pool << (8 * _BLOCK_BYTES)) | int.from_bytes(digest, "big")
        self._bits += 8 * _BLOCK_BYTES

    def bits(self, count: int) -> int:
        """``count`` fresh uniform bits, as an integer in [0, 2^count)."""
        while self._bits < count:
            self._refill()
        self._bits -= count
        value = self._pool >> self._bits
        self._pool &= (1 << self._bits) - 1
        return value

    def below(self, n: int) -> int:
        """A uniform integer in [0, n), by rejection (exact for any n >= 1)."""
        if n < 1:
            raise ValueError(f"a uniform integer below {n} does not exist")
        width = (n - 1).bit_length()
        while True:
            value = self.bits(width)
            if value < n:
                return value

    def bernoulli(self, p: Fraction) -> bool:
        """True with probability exactly ``p`` (a rational in [0, 1])."""
        return self.below(p.denominator) < p.numerator


def bernoulli_exp(gamma: Fraction, bits: KeyedBits) -> bool:
    """True with probability exactly ``exp(-gamma)`` for a rational ``gamma >= 0`` (Canonne,
    Kamath & Steinke 2020, Algorithm 1)."""
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    if gamma <= 1:
        k = 1
        while bits.bernoulli(gamma / k):
            k += 1
        return k % 2 == 1
    whole = math.floor(gamma)
    for _ in range(whole):
        if not bernoulli_exp(Fraction(1), bits):
            return False
    return bernoulli_exp(gamma - whole, bits)


def discrete_laplace(scale: Fraction, bits: KeyedBits) -> int:
    """One draw of ``Z`` with ``P(Z = z)`` proportional to ``exp(-|z| / scale)``, for a rational
    ``scale = t / s > 0`` (Canonne, Kamath & Steinke 2020, Algorithm 2)."""
    if scale <= 0:
        raise ValueError(f"the scale must be > 0, got {scale}")
    t, s = scale.numerator, scale.denominator
    while True:
        u = bits.below(t)
        if not bernoulli_exp(Fraction(u, t), bits):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), bits):
            v += 1
        y = (u + t * v) // s
        negative = bits.bits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


@dataclasses.dataclass(frozen=True)
class TwoSidedGeometric:
    """The two-sided geometric distribution of parameter ``a = e^-epsilon``: the noise that makes
    an integer count of L1 sensitivity 1 epsilon-DP.

    Args:
      epsilon: > 0 and finite; used as the exact rational value of the float.

    Raises:
      ValueError: epsilon not a positive finite number.
    """

    epsilon: float

    def __post_init__(self):
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)):
            raise ValueError(f"epsilon must be a number, got {self.epsilon!r}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError(f"epsilon must be a positive finite number, got {self.epsilon!r}")

    @property
    def alpha(self) -> float:
        return math.exp(-self.epsilon)

    def pmf(self, z: int) -> float:
        """``P(Z = z)``."""
        a = self.alpha
        return (1 - a) / (1 + a) * a ** abs(z)

    def tail(self, k: int) -> float:
        """``P(|Z| > k)`` for ``k >= 0``: ``2 a^(k+1) / (1 + a)``."""
        a = self.alpha
        return 2 * math.exp(-self.epsilon * (k + 1)) / (1 + a)

    @property
    def variance(self) -> float:
        """``2a / (1 - a)^2`` (mean 0): a little below Laplace's ``2 / epsilon^2``."""
        a = self.alpha
        return 2 * a / (1 - a) ** 2

    def half_width(self, level: float = 0.95) -> int:
        """The smallest ``k`` with ``P(|Z| <= k) >= level``: ``[x - k, x + k]`` covers the true
        count ``x`` of a noisy ``x + Z`` with probability ``coverage(k)``, at least ``level``.

        Raises:
          ValueError: a level outside (0, 1).
        """
        if not 0 < level < 1:
            raise ValueError(f"the level must be in (0, 1), got {level}")
        # a^(k+1) <= (1 - level) (1 + a) / 2, in logs; then checked exactly both ways.
        k = max(0, math.ceil(math.log(2 / ((1 - level) * (1 + self.alpha))) / self.epsilon) - 1)
        while k > 0 and 1 - self.tail(k - 1) >= level:
            k -= 1
        while 1 - self.tail(k) < level:
            k += 1
        return k

    def coverage(self, k: int) -> float:
        """``P(|Z| <= k)``: the exact probability that ``[x - k, x + k]`` holds ``x``."""
        return 1 - self.tail(k)

    def sample(self, bits: KeyedBits) -> int:
        """One exact draw, from ``bits``."""
        return discrete_laplace(1 / Fraction(self.epsilon), bits)
