"""PEM with the OLH frequency oracle (docs/protocol.md §3, docs/evaluation.md "PEM"): the local-DP
rival of TrieHH, in memory with numpy, deterministic given a seed. Each user reports one OLH
bucket of a prefix of its item's bits (``OLH``: ``d' = ceil(e^ε + 1)`` buckets, the true one with
probability ``p = e^ε / (e^ε + d' - 1)``, unbiased estimate ``(I_v - n q') / (p - q')`` with
``q' = 1/d'``, ``OLH.variance`` its exact variance); users are split into groups, group ``i``
reporting the first ``min(γ + iη, m_bits)`` bits, and the aggregator keeps the top ``c``
candidates of each group and extends them by ``η`` bits (``run_pem``), so the whole protocol is
ε-LDP. ``numpy.random.default_rng(seed)`` draws each user's group, hash seed and perturbation in
that order; the item of a user holding several is drawn from a separate stream of the same seed,
weighted by local count. Public seeds: this simulates devices, for evaluation only.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Hashable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    "OLH",
    "OLHReports",
    "PEMConfig",
    "PEMResult",
    "decode_value",
    "encode_values",
    "olh_hash",
    "run_pem",
    "run_pem_on_values",
]

Item = Union[str, bytes]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S27, _S30, _S31, _S32 = (np.uint64(v) for v in (27, 30, 31, 32))
# Users per block when counting support: keeps the (users x candidates) block in cache.
_BLOCK_USERS = 64


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place on a uint64 array (a bijection with full avalanche)."""
    np.bitwise_xor(z, z >> _S30, out=z)
    np.multiply(z, _M1, out=z)
    np.bitwise_xor(z, z >> _S27, out=z)
    np.multiply(z, _M2, out=z)
    np.bitwise_xor(z, z >> _S31, out=z)
    return z


def _to_buckets(z: np.ndarray, buckets: int) -> np.ndarray:
    """Maps uint64 hashes to [0, buckets) in place (Lemire's multiply-shift on the top 32 bits)."""
    np.right_shift(z, _S32, out=z)
    np.multiply(z, np.uint64(buckets), out=z)
    np.right_shift(z, _S32, out=z)
    return z


def olh_hash(seeds: np.ndarray, fingerprints: np.ndarray, buckets: int) -> np.ndarray:
    """``H_s(v)`` for paired (broadcastable) uint64 seeds and value fingerprints, in [0, d').

    Args:
      seeds: the users' hash seeds (uint64).
      fingerprints: 64-bit fingerprints of the values (``_fingerprints``), broadcastable
        against ``seeds``.
      buckets: d' (at most 2^32).

    Returns:
      uint64 buckets, of the broadcast shape.
    """
    z = np.bitwise_xor(np.asarray(seeds, np.uint64), np.asarray(fingerprints, np.uint64))
    return _to_buckets(_mix64(z), buckets)


@dataclasses.dataclass(frozen=True)
class OLHReports:
    """What the users of one group send: their hash seed and their reported bucket."""

    seeds: np.ndarray  # uint64, one per user
    buckets: np.ndarray  # uint64 in [0, d'), one per user

    def __len__(self) -> int:
        return len(self.seeds)


@dataclasses.dataclass(frozen=True)
class OLH:
    """The OLH frequency oracle at privacy ``epsilon`` (module docstring for the formulas).

    Raises:
      ValueError: epsilon not a finite number > 0, or so large that d' exceeds 2^32.
    """

    epsilon: float

    def __post_init__(self):
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)):
            raise ValueError(f"epsilon must be a number, got {eps!r}")
        if not math.isfinite(eps) or eps <= 0:
            raise ValueError(f"epsilon must be finite and > 0, got {eps!r}")
        if eps > 22:  # e^22 + 1 > 2^31: more buckets than the multiply-shift can address
            raise ValueError(f"epsilon = {eps} is too large for OLH here (at most 22)")
        object.__setattr__(self, "epsilon", float(eps))

    @property
    def buckets(self) -> int:
        """d' = ceil(e^ε + 1)."""
        return math.ceil(math.exp(self.epsilon) + 1.0)

    @property
    def p(self) -> float:
        """Probability of reporting the true bucket, ``e^ε / (e^ε + d' - 1)``."""
        e = math.exp(self.epsilon)
        return e / (e + self.buckets - 1)

    @property
    def q(self) -> float:
        """``q' = 1/d'``: the probability that a non-holder's report supports a value."""
        return 1.0 / self.buckets

    def perturb(
        self, fingerprints: np.ndarray, rng: np.random.Generator, seeds: Optional[np.ndarray] = None
    ) -> OLHReports:
        """The users' reports for their values' fingerprints (vectorised over users).

        Args:
          fingerprints: one uint64 fingerprint per user (``_fingerprints`` of its value).
          rng: the source of the hash seeds (unless given) and of the perturbation.
          seeds: optional fixed hash seeds, one per user (tests).
        """
        fingerprints = np.asarray(fingerprints, np.uint64)
        n = len(fingerprints)
        if seeds is None:
            seeds = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
        x = olh_hash(seeds, fingerprints, self.buckets)
        keep = rng.random(n) < self.p
        # Uniform over the d' - 1 other buckets: draw in [0, d'-1) and skip x.
        other = rng.integers(0, self.buckets - 1, size=n, dtype=np.uint64)
        other += other >= x
        return OLHReports(seeds=np.asarray(seeds, np.uint64), buckets=np.where(keep, x, other))

    def support(self, reports: OLHReports, candidate_fingerprints: np.ndarray) -> np.ndarray:
        """``I_v`` for each candidate: the reports whose hash of the candidate is their bucket."""
        candidates = np.asarray(candidate_fingerprints, np.uint64)
        counts = np.zeros(len(candidates), dtype=np.int64)
        if len(candidates) == 0:
            return counts
        for start in range(0, len(reports), _BLOCK_USERS):
            seeds = reports.seeds[start : start + _BLOCK_USERS, None]
            block = olh_hash(seeds, candidates[None, :], self.buckets)
            counts += np.count_nonzero(block == reports.buckets[start : start + _BLOCK_USERS, None], axis=0)
        return counts

    def estimate(self, reports: OLHReports, candidate_fingerprints: np.ndarray) -> np.ndarray:
        """Unbiased estimates of how many of the reporters hold each candidate."""
        support = self.support(reports, candidate_fingerprints)
        n = len(reports)
        return (support - n * self.q) / (self.p - self.q)

    def variance(self, n: int, f: float = 0.0) -> float:
        """Var[est] for ``n`` reporters of whom ``f`` hold the value (``f = 0``: the paper's)."""
        p, q = self.p, self.q
        return (f * p * (1 - p) + (n - f) * q * (1 - q)) / (p - q) ** 2


# --------------------------------------------------------------------------------------------
# Values as bit strings.


def _words(values: np.ndarray) -> np.ndarray:
    """(n, n_bytes) uint8 -> (n, ceil(n_bytes/8)) big-endian uint64 words (zero-padded)."""
    n, n_bytes = values.shape
    width = -(-n_bytes // 8) * 8
    padded = np.zeros((n, width), dtype=np.uint8)
    padded[:, :n_bytes] = values
    return padded.view(">u8").astype(np.uint64)


def _fingerprints(values: np.ndarray, bits: int) -> np.ndarray:
    """64-bit fingerprints of the first ``bits`` bits of each row of ``values`` (uint8, (n, B)).

    The bits beyond ``bits`` are cleared first, and ``bits`` is mixed in, so a prefix has one
    fingerprint whatever follows it and prefixes of different lengths never share one.
    """
    values = np.asarray(values, dtype=np.uint8)
    n, n_bytes = values.shape
    masked = values.copy()
    full, rest = divmod(bits, 8)
    if full < n_bytes:
        masked[:, full] &= np.uint8((0xFF << (8 - rest)) & 0xFF)
        masked[:, full + 1 :] = 0
    words = _words(masked)
    h = np.full(n, np.uint64((bits * int(_GOLDEN)) & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    for column in range(words.shape[1]):
        h = _mix64(np.bitwise_xor(h + _GOLDEN, words[:, column]))
    return h


def encode_values(items: Sequence[Optional[Item]], n_bytes: int) -> Tuple[np.ndarray, int]:
    """Items as (n, n_bytes) uint8 rows: UTF-8 (text) or raw bytes, zero-padded on the right.

    Items that are None, empty, longer than ``n_bytes`` bytes, or that end with a zero byte
    (they could not be told apart from padding) become the all-zero row ("no item").

    Returns:
      ``(rows, n_unusable)``.

    Raises:
      ValueError: n_bytes < 1.
    """
    if n_bytes < 1:
        raise ValueError(f"n_bytes must be >= 1, got {n_bytes}")
    rows = np.zeros((len(items), n_bytes), dtype=np.uint8)
    unusable = 0
    for i, item in enumerate(items):
        raw = item.encode("utf-8") if isinstance(item, str) else (bytes(item) if item is not None else b"")
        if not raw or len(raw) > n_bytes or raw[-1] == 0:
            unusable += 1
            continue
        rows[i, : len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return rows, unusable


def decode_value(value: int, n_bytes: int, text: bool = True) -> Item:
    """The item a full-length value (an int of ``8·n_bytes`` bits) spells, padding stripped.

    Text that is not valid UTF-8 is decoded with backslash escapes, so it is returned (it is
    part of PEM's answer) but can never equal a real item.
    """
    raw = int(value).to_bytes(n_bytes, "big").rstrip(b"\x00")
    return raw.decode("utf-8", errors="backslashreplace") if text else raw


def _int_rows(values: Sequence[int], bits: int, n_bytes: int) -> np.ndarray:
    """Prefixes given as ints of ``bits`` bits -> left-aligned (len, n_bytes) uint8 rows."""
    shift = 8 * n_bytes - bits
    data = b"".join((int(v) << shift).to_bytes(n_bytes, "big") for v in values)
    return np.frombuffer(data, dtype=np.uint8).reshape(len(values), n_bytes)


# --------------------------------------------------------------------------------------------
# PEM.


@dataclasses.dataclass(frozen=True)
class PEMConfig:
    """One PEM run's parameters.

    Args:
      epsilon: the LDP parameter of every user's (single) report.
      k: the number of heavy hitters wanted (the last group's top k), >= 1.
      n_bytes: bytes per value (m_bits = 8·n_bytes).
      gamma: the head start in bits (group i reports gamma + i·eta bits); default
        ``ceil(log2 candidates)`` (at least 1).
      eta: bits added per group; default ``max_domain_bits - gamma`` (at least 1).
      max_domain_bits: bounds gamma + eta when eta is defaulted (cost ~ n·2^(gamma+eta)).
      candidates: prefixes kept after each group but the last (|C_i|), >= k; default k.

    Raises:
      ValueError: for parameters out of range (gamma + eta > 20 is refused: the first group
        would test over a million candidates per user).
    """

    epsilon: float
    k: int
    n_bytes: int
    gamma: Optional[int] = None
    eta: Optional[int] = None
    max_domain_bits: int = 12
    candidates: Optional[int] = None

    def __post_init__(self):
        OLH(self.epsilon)  # validates epsilon
        if self.candidates is None:
            object.__setattr__(self, "candidates", self.k)
        for name in ("k", "n_bytes", "max_domain_bits", "candidates"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.candidates < self.k:
            raise ValueError(f"candidates must be >= k, got {self.candidates} < {self.k}")
        gamma = self.gamma if self.gamma is not None else max(1, math.ceil(math.log2(self.candidates)))
        eta = self.eta if self.eta is not None else max(1, self.max_domain_bits - gamma)
        if gamma < 0 or eta < 1:
            raise ValueError(f"gamma must be >= 0 and eta >= 1, got gamma={gamma}, eta={eta}")
        gamma = min(gamma, self.m_bits - 1)
        if gamma + eta > 20:
            raise ValueError(f"gamma + eta = {gamma + eta} > 20: too many candidates per group")
        object.__setattr__(self, "gamma", int(gamma))
        object.__setattr__(self, "eta", int(eta))

    @property
    def m_bits(self) -> int:
        return 8 * self.n_bytes

    @property
    def groups(self) -> int:
        """g = ceil((m_bits - γ)/η)."""
        return max(1, math.ceil((self.m_bits - self.gamma) / self.eta))

    def prefix_bits(self, group: int) -> int:
        """Bits reported by group ``group`` (1..g): ``min(γ + group·η, m_bits)``."""
        return min(self.gamma + group * self.eta, self.m_bits)

    def to_dict(self) -> dict:
        return {
            "epsilon": self.epsilon,
            "k": self.k,
            "candidates": self.candidates,
            "n_bytes": self.n_bytes,
            "m_bits": self.m_bits,
            "gamma": self.gamma,
            "eta": self.eta,
            "groups": self.groups,
            "olh_buckets": OLH(self.epsilon).buckets,
            "olh_p": OLH(self.epsilon).p,
        }


@dataclasses.dataclass(frozen=True)
class PEMResult:
    """A PEM run's answer.

    Attributes:
      heavy_hitters: up to k decoded items, best estimate first.
      estimates: the estimated number of holders in the whole population (the last group's
        estimate scaled by n / group size), in the same order.
      group_sizes: users per group.
      unusable: users who reported the "no item" value (nothing, empty, too long).
    """

    heavy_hitters: Tuple[Item, ...]
    estimates: Tuple[float, ...]
    group_sizes: Tuple[int, ...]
    unusable: int


def _top(estimates: np.ndarray, values: List[int], k: int) -> List[int]:
    """The k values with the largest estimates, ties broken by the smaller value."""
    order = sorted(range(len(values)), key=lambda i: (-estimates[i], values[i]))
    return [values[i] for i in order[:k]]


def run_pem_on_values(
    values: np.ndarray, config: PEMConfig, seed: int, *, text: bool = True
) -> PEMResult:
    """PEM over users' values given as (n, n_bytes) uint8 rows (``encode_values``).

    Args:
      values: one row per user; all-zero rows are "no item".
      config: the parameters (its ``n_bytes`` must match the rows).
      seed: the run's seed (numpy ``default_rng``).
      text: decode results as UTF-8 text (else bytes).

    Raises:
      ValueError: the rows do not have ``config.n_bytes`` columns.
    """
    values = np.asarray(values, dtype=np.uint8)
    if values.ndim != 2 or values.shape[1] != config.n_bytes:
        raise ValueError(f"values must be (n, {config.n_bytes}) uint8 rows, got shape {values.shape}")
    rng = np.random.default_rng(seed)
    oracle = OLH(config.epsilon)
    n = len(values)
    g = config.groups
    # Random, near-equal groups: a permutation cut in g slices.
    order = rng.permutation(n)
    slices = np.array_split(order, g)
    # Every user's hash seed and perturbation are drawn up front (one stream, fixed order).
    hash_seeds = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)

    candidates: List[int] = []
    bits_before = 0
    final_estimates = np.zeros(0)
    for group in range(1, g + 1):
        bits = config.prefix_bits(group)
        members = slices[group - 1]
        if group == 1:
            candidates = list(range(1, 2**bits))  # value 0 is the "no item" prefix
        else:
            step = bits - bits_before
            candidates = [(c << step) | s for c in candidates for s in range(2**step)]
            candidates = [c for c in candidates if c != 0]
        reports = oracle.perturb(
            _fingerprints(values[members], bits), rng, seeds=hash_seeds[members]
        )
        estimates = oracle.estimate(
            reports, _fingerprints(_int_rows(candidates, bits, config.n_bytes), bits)
        )
        kept = _top(estimates, candidates, config.k if group == g else config.candidates)
        if group == g:
            position = {c: i for i, c in enumerate(candidates)}
            final_estimates = np.array([estimates[position[c]] for c in kept])
            scale = n / max(len(members), 1)
            final_estimates = final_estimates * scale
        candidates = kept
        bits_before = bits
    heavy = tuple(decode_value(c, config.n_bytes, text) for c in candidates)
    unusable = int(np.count_nonzero(~values.any(axis=1)))
    return PEMResult(
        heavy_hitters=heavy,
        estimates=tuple(float(e) for e in final_estimates),
        group_sizes=tuple(len(s) for s in slices),
        unusable=unusable,
    )


def run_pem(
    users: Mapping[Hashable, Mapping[Item, int]],
    config: PEMConfig,
    seed: int,
) -> PEMResult:
    """PEM over a population: user -> {item: local count} (e.g. ``metrics.user_records``).

    A user with several items reports one, drawn with probability proportional to its local
    count (as TrieHH's Algorithm 3); users are taken in sorted order of their ids, so the run
    depends only on the population and the seed.
    """
    rng = np.random.default_rng([seed, 0x50454D])  # the item draws: a stream apart from the run's
    chosen: List[Optional[Item]] = []
    text = True
    for user in sorted(users):
        counts = users[user]
        items = sorted((i for i, c in counts.items() if c > 0), key=_sort_key)
        if not items:
            chosen.append(None)
            continue
        if len(items) == 1:
            chosen.append(items[0])
        else:
            weights = np.array([counts[i] for i in items], dtype=float)
            chosen.append(items[rng.choice(len(items), p=weights / weights.sum())])
        if isinstance(chosen[-1], bytes):
            text = False
    rows, _ = encode_values(chosen, config.n_bytes)
    return run_pem_on_values(rows, config, seed, text=text)


def _sort_key(item: Item):
    return (isinstance(item, bytes), item)
