"""Deterministic user sampling and item-choice randomness, keyed by the secret seed and the job's
identity: round ``r`` samples the ``m`` users of smallest rank (bottom-m; TrieHH++: every user
whose rank is below ``bernoulli_threshold(p_s)``), where ``s(u) = SipHash-2-4_{K_user}(uid)`` once
per user and ``rank_r(u)`` is the first 8 bytes (little-endian) of ``AES-128_{A_r}(LE64(s) ||
LE64(r))``; the item-choice uniforms come from the same block under the round's choice key. Ties
are broken by the user id bytes, so a sample always has ``min(m, distinct users)`` members, and a
retried bundle, a re-run round or a resumed job draws the same users. User ids are str, int or
bytes, canonically bytes (``42``, ``"42"`` and ``b"42"`` are one user). docs/protocol.md states
the construction and why it is a PRF.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Iterable, List, Optional, Tuple, Union

import numpy as np

from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.bottom_m import SmallestRanks

__all__ = [
    "SCHEME_V2",
    "CensusKey",
    "PassKeys",
    "RoundKeys",
    "Sampler",
    "SmallestRanks",
    "WindowKeys",
    "bernoulli_threshold",
    "in_bernoulli_sample",
    "rank_prefilter_bound",
    "real_users_sampled",
    "users_required",
    "uniform_from_word",
    "user_id_bytes",
]

#: The one sampling scheme (the module docstring); the number its keys' derivation carries.
SCHEME_V2 = 2

UserId = Union[str, int, bytes]
_MASK64 = (1 << 64) - 1


def user_id_bytes(user_id: UserId) -> bytes:
    """The canonical bytes of a user id (see the module docstring).

    Raises:
      TypeError: for ids that are not str, int or bytes (``bool`` included: it is a bug).
      ValueError: for an empty id.
    """
    if isinstance(user_id, bool) or not isinstance(user_id, (str, int, bytes, np.integer)):
        raise TypeError(f"user ids are str, int or bytes, not {type(user_id).__name__}")
    if isinstance(user_id, str):
        raw = user_id.encode("utf-8")
    elif isinstance(user_id, bytes):
        raw = user_id
    else:
        raw = str(int(user_id)).encode("ascii")
    if not raw:
        raise ValueError("empty user id")
    return raw


@functools.lru_cache(maxsize=1024)
def _derived_key(seed: bytes, identity: bytes, purpose: str) -> Tuple[int, int]:
    return keyed_hash.derive_key(seed, purpose.encode(), identity)


def _aes128_low_words(key: Tuple[int, int], user_hashes: np.ndarray, round_index: int) -> np.ndarray:
    """The first 8 bytes, as little-endian ``uint64``, of ``AES-128_key(LE64(s) || LE64(r))`` for
    every ``s`` of ``user_hashes``: one OpenSSL call for the whole batch (``_AesBlocks``)."""
    if len(user_hashes) == 0:
        return np.zeros(0, dtype=np.uint64)
    return _AesBlocks(user_hashes).low_words(key, round_index).astype(np.uint64)


class _AesBlocks:
    """The AES blocks ``LE64(s) || LE64(r)`` of a batch's user hashes and the buffer they are
    encrypted into, kept across rounds: writing them anew for each round cost as much as the
    AES itself. The AES key is the 16 bytes of the derived pair (``k0`` then ``k1``,
    little-endian: the BLAKE2b digest ``derive_key`` made). ECB is the right mode here: each
    block is one query of the pseudo-random permutation, its output used on its own (never a
    ciphertext to decrypt)."""

    def __init__(self, user_hashes: np.ndarray):
        n = len(user_hashes)
        self._blocks = np.empty((n, 2), dtype="<u8")
        self._blocks[:, 0] = user_hashes
        # update_into wants block_size - 1 spare bytes; encrypting in place of this array is five
        # times as fast at 10^6 blocks as update()'s new bytes object, tobytes() and the join.
        self._out = np.empty(2 * n + 2, dtype="<u8")

    def low_words(self, key: Tuple[int, int], round_index: int) -> np.ndarray:
        """The first 8 bytes of every block's encryption under ``key`` with ``r = round_index``:
        a view of this object's buffer, overwritten by the next call (copy it to keep it)."""
        # Local: the import costs ~25 ms that users of the protocol's other parts do not pay.
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        n = len(self._blocks)
        self._blocks[:, 1] = int(round_index)
        aes_key = (key[0] & _MASK64).to_bytes(8, "little") + (key[1] & _MASK64).to_bytes(8, "little")
        encryptor = Cipher(algorithms.AES(aes_key), modes.ECB()).encryptor()
        encryptor.update_into(memoryview(self._blocks).cast("B"), memoryview(self._out).cast("B"))
        encryptor.finalize()
        return self._out[0 : 2 * n : 2]


# A choice uniform is a word's top 53 bits over 2^53: an exactly representable double in [0, 1).
_DROPPED_BITS, _UNIFORM_SCALE = 11, 2.0**-53


def uniform_from_word(word: int) -> float:
    """The item-choice uniform in [0, 1) of a 64-bit word, ``(word >> 11) / 2^53``: a federated
    device's from its ``choice_word``, as ``_uniforms`` does for the central path's batches.

    Raises:
      TypeError, ValueError: ``word`` is not an integer in [0, 2^64) (``bool`` included).
    """
    if isinstance(word, bool) or not isinstance(word, (int, np.integer)):
        raise TypeError(f"a choice word is an integer, got {type(word).__name__}")
    if not 0 <= int(word) <= _MASK64:
        raise ValueError(f"a choice word is in [0, 2^64), got {word}")
    return (int(word) >> _DROPPED_BITS) * _UNIFORM_SCALE


def _uniforms(words: np.ndarray) -> np.ndarray:
    """``uniform_from_word`` of every word of a uint64 array, in one numpy operation."""
    return (words >> np.uint64(_DROPPED_BITS)).astype(np.float64) * _UNIFORM_SCALE


@dataclasses.dataclass(frozen=True)
class Sampler:
    """Every random decision of a job, derived from its secret seed and its identity.

    Args:
      seed: the job's secret seed, 16 to 64 bytes. It is private state: never publish it.
      identity: the job's identity (``DiscoveryConfig.sampling_identity``: its input, output,
        target, encoding...), mixed into every derived key so that two jobs given one seed
        file sample independently, while the same job (a retry, a resume) draws the same.
        Empty: the seed alone.

    Raises:
      TypeError: a seed or identity that is not bytes.
      ValueError: a seed shorter than 16 or longer than 64 bytes.
    """

    seed: bytes = dataclasses.field(repr=False)
    identity: bytes = dataclasses.field(default=b"", repr=False)

    def __post_init__(self):
        if not isinstance(self.seed, bytes):
            raise TypeError("the seed must be bytes")
        if not isinstance(self.identity, bytes):
            raise TypeError("the job identity must be bytes")
        keyed_hash.derive_key(self.seed, b"check")  # validates the length

    def _key(self, purpose: str, round_index: int) -> Tuple[int, int]:
        if isinstance(round_index, bool) or not isinstance(round_index, (int, np.integer)):
            raise TypeError(f"rounds are integers, got {round_index!r}")
        if round_index < 1:
            raise ValueError(f"rounds are numbered from 1, got {round_index}")
        return _derived_key(self.seed, self.identity, f"{purpose}/round={int(round_index)}/v{SCHEME_V2}")

    def round_keys(self, round_index: int) -> RoundKeys:
        """The derived keys of one round (what that round's job graph carries)."""
        sample_key, choice_key = self._key("sample", round_index), self._key("choose", round_index)
        user_key = _derived_key(self.seed, self.identity, f"sample-user/v{SCHEME_V2}")
        return RoundKeys(int(round_index), sample_key, choice_key, user_key)

    def pass_keys(self, max_rounds: int) -> PassKeys:
        """The keys of rounds 1..``max_rounds``: what a pass drawing every round's sample at once
        carries (never the seed)."""
        if max_rounds < 1:
            raise ValueError(f"a pass draws at least one round, got {max_rounds}")
        return PassKeys(tuple(self.round_keys(r) for r in range(1, max_rounds + 1)))

    def census_key(self) -> CensusKey:
        return CensusKey(_derived_key(self.seed, self.identity, "census"))

    def round_uniform(self, purpose: str, round_index: int) -> float:
        """A keyed uniform in [0, 1) of round ``round_index`` for ``purpose`` (a decision of the
        round that is no user's, such as ``real_users_sampled``'s draw)."""
        return uniform_from_word(self._key(f"round-uniform/{purpose}", round_index)[0] & _MASK64)

    def window_keys(self) -> "WindowKeys":
        """The key every window of a windowed job derives its own ``Sampler`` from."""
        return WindowKeys(_key_bytes(_derived_key(self.seed, self.identity, "windows")), self.identity)

    def ranks_packed(self, round_index: int, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Sampling ranks of user ids given as Arrow-style buffers of their canonical bytes."""
        return self.round_keys(round_index).ranks_packed(data, offsets)

    def fingerprints_packed(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """64-bit keyed fingerprints of user ids (for counting distinct users), round-free."""
        return self.census_key().fingerprints_packed(data, offsets)

    def ranks(self, round_index: int, user_ids: Iterable[UserId]) -> np.ndarray:
        """Sampling ranks (``uint64``) of user ids in round ``round_index``; smaller is sampled."""
        data, offsets = keyed_hash.pack_messages(user_id_bytes(u) for u in user_ids)
        return self.ranks_packed(round_index, data, offsets)

    def rank(self, round_index: int, user_id: UserId) -> int:
        return int(self.ranks(round_index, [user_id])[0])

    def choice_uniform(self, round_index: int, user_id: UserId) -> float:
        """A uniform number in [0, 1) for the user's item choice in this round.

        Independent of the sampling rank (a different derived key), and deterministic.
        """
        return float(self.choice_uniforms(round_index, [user_id])[0])

    def choice_uniforms(self, round_index: int, user_ids: Iterable[UserId]) -> np.ndarray:
        """``choice_uniform`` for many users at once (one hash call for the batch)."""
        return self.round_keys(round_index).choice_uniforms(user_ids)

    def choice_word(self, round_index: int, user_id: UserId) -> int:
        """The 64-bit word behind ``choice_uniform`` (``uniform_from_word`` of it is the
        uniform): what a federated server sends the user's device in its invitation."""
        data, offsets = keyed_hash.pack_messages([user_id_bytes(user_id)])
        return int(self.round_keys(round_index).choice_words_packed(data, offsets)[0])

    def sample(self, round_index: int, user_ids: Iterable[UserId], m: int) -> List[bytes]:
        """Exactly ``min(m, distinct users)`` distinct users, as canonical id bytes.

        Duplicates in ``user_ids`` (several records of one user) count once.

        Raises:
          ValueError: for ``m < 0``.
        """
        if m < 0:
            raise ValueError(f"sample size must be >= 0, got {m}")
        distinct = sorted({user_id_bytes(u) for u in user_ids})
        data, offsets = keyed_hash.pack_messages(distinct)
        ranks = self.ranks_packed(round_index, data, offsets)
        smallest = SmallestRanks(m)
        smallest.add_batch(ranks, distinct)
        return [uid for _, uid in smallest.extract()]

    def bernoulli_sample(self, round_index: int, user_ids: Iterable[UserId], probability: float) -> List[bytes]:
        """TrieHH++'s sample: every distinct user whose rank is below ``bernoulli_threshold(p)``,
        as canonical id bytes in byte order (each user independently, with probability p).

        Raises:
          ValueError: for a probability outside [0, 1].
        """
        threshold = bernoulli_threshold(probability)
        distinct = sorted({user_id_bytes(u) for u in user_ids})
        data, offsets = keyed_hash.pack_messages(distinct)
        keep = in_bernoulli_sample(self.ranks_packed(round_index, data, offsets), threshold)
        return [distinct[i] for i in np.flatnonzero(keep)]


@dataclasses.dataclass(frozen=True)
class RoundKeys:
    """The keys of one round, derived from the seed: what a round's workers receive.

    Job graphs are pickled, and on a managed runner staged to storage: they carry these
    one-way-derived keys of their own round, never the secret seed (from which every round's
    keys, past and future, follow). The keys still reveal that round's sample to whoever holds
    them and the data, so staging locations must be as private as the state directory.

    ``user_key`` (the same in every round) is the SipHash key of ``s(u)``, and
    ``sample_key``/``choice_key`` are this round's AES-128 keys (``user_key`` alone reveals no
    round's sample: ``s`` is round-free).
    """

    round_index: int
    sample_key: Tuple[int, int] = dataclasses.field(repr=False)
    choice_key: Tuple[int, int] = dataclasses.field(repr=False)
    user_key: Tuple[int, int] = dataclasses.field(repr=False)

    def user_hashes_packed(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The round-free ``s(u) = SipHash-2-4_{K_user}(uid)`` of user ids given as Arrow-style
        buffers: what ``ranks_from_user_hashes`` and ``uniforms_from_user_hashes`` take."""
        return keyed_hash.siphash24_batch(self.user_key, data, offsets)

    def ranks_from_user_hashes(self, user_hashes: np.ndarray) -> np.ndarray:
        """This round's ranks from the users' ``s(u)`` (one AES call for the batch)."""
        return _aes128_low_words(self.sample_key, user_hashes, self.round_index)

    def uniforms_from_user_hashes(self, user_hashes: np.ndarray) -> np.ndarray:
        """This round's choice uniforms from the users' ``s(u)``."""
        return _uniforms(_aes128_low_words(self.choice_key, user_hashes, self.round_index))

    def ranks_packed(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Sampling ranks of user ids given as Arrow-style buffers of their canonical bytes."""
        return self.ranks_from_user_hashes(self.user_hashes_packed(data, offsets))

    def choice_uniforms(self, user_ids: Iterable[UserId]) -> np.ndarray:
        """Uniform numbers in [0, 1) for the users' item choices, one hash call for all."""
        return self.choice_uniforms_packed(*keyed_hash.pack_messages(user_id_bytes(u) for u in user_ids))

    def choice_uniforms_packed(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """``choice_uniforms`` of user ids given as Arrow-style buffers of their canonical bytes."""
        return _uniforms(self.choice_words_packed(data, offsets))

    def choice_words_packed(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The uint64 words behind ``choice_uniforms_packed`` (one call for the batch): what a
        federated server sends the selected devices (``uniform_from_word`` of each)."""
        return _aes128_low_words(self.choice_key, self.user_hashes_packed(data, offsets), self.round_index)


@dataclasses.dataclass(frozen=True)
class PassKeys:
    """The keys of rounds 1..L, for a pass that draws every round's sample at once.

    Samples depend only on (seed, identity, round, user), never on the trie, so one pass over
    the records can rank every user for every round; only the rounds' votes need the trie.
    The pass costs one SipHash per user (``s``) and one AES block per user per round.
    """

    rounds: Tuple[RoundKeys, ...]

    def __post_init__(self):
        if not self.rounds:
            raise ValueError("a pass draws at least one round")
        if [k.round_index for k in self.rounds] != list(range(1, len(self.rounds) + 1)):
            raise ValueError("a pass carries the keys of rounds 1..L in order")
        if any(k.user_key != self.rounds[0].user_key for k in self.rounds):
            raise ValueError("a pass's rounds share one user key")

    @property
    def max_rounds(self) -> int:
        return len(self.rounds)

    def round_keys(self, round_index: int) -> RoundKeys:
        if not 1 <= round_index <= len(self.rounds):
            raise ValueError(f"round {round_index} is outside 1..{len(self.rounds)}")
        return self.rounds[round_index - 1]

    def ranks_all(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Every round's ranks of user ids given as Arrow-style buffers: shape (L, users),
        row ``r - 1`` equal to ``round_keys(r).ranks_packed(data, offsets)``."""
        ranks = np.empty((len(self.rounds), max(len(offsets) - 1, 0)), dtype=np.uint64)
        if ranks.shape[1] == 0:
            return ranks
        # s(u) once for all rounds, and one set of AES blocks whose round field each round rewrites.
        blocks = _AesBlocks(self.rounds[0].user_hashes_packed(data, offsets))
        for row, keys in enumerate(self.rounds):
            ranks[row] = blocks.low_words(keys.sample_key, keys.round_index)
        return ranks


@dataclasses.dataclass(frozen=True)
class CensusKey:
    """The key of the census's user fingerprints (derived from the seed; no round's keys)."""

    key: Tuple[int, int] = dataclasses.field(repr=False)

    def fingerprints_packed(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """64-bit keyed fingerprints of user ids (for counting distinct users)."""
        return keyed_hash.siphash24_batch(self.key, data, offsets)


def _key_bytes(key: Tuple[int, int]) -> bytes:
    return key[0].to_bytes(8, "little") + key[1].to_bytes(8, "little")


@dataclasses.dataclass(frozen=True)
class WindowKeys:
    """The keys of a windowed job (one discovery per event-time window, each its own release):
    the release of window ``w`` with nonce ``v`` samples with ``Sampler(seed_wv, identity)``,
    ``seed_wv = derive_key(K_windows, "window/start_us=<w's start in microseconds>/release=<v,
    hex>")`` and ``K_windows = derive_key(seed, identity, "windows")``. The nonce is drawn when
    the window is first planned and committed to its state before anything of it is sampled
    (``job.windows.windowed``): a retried bundle or a restarted job that finds it draws the same users,
    while a window released again after its state was deleted is another release, with other
    keys. Two windows draw independently. A job graph carries this derived key, never the seed.
    """

    key: bytes = dataclasses.field(repr=False)
    identity: bytes = dataclasses.field(default=b"", repr=False)

    def sampler(self, window_start_micros: int, nonce: bytes) -> Sampler:
        """The ``Sampler`` of the release of the window that starts at ``window_start_micros``
        (UTC) whose nonce is ``nonce`` (non-empty bytes).

        Raises:
          TypeError: a start that is not integer microseconds; ValueError: an empty nonce.
        """
        if isinstance(window_start_micros, bool) or not isinstance(window_start_micros, (int, np.integer)):
            raise TypeError(f"a window start is integer microseconds, got {window_start_micros!r}")
        if not isinstance(nonce, bytes) or not nonce:
            raise ValueError("a window's release has a nonce (non-empty bytes)")
        purpose = f"window/start_us={int(window_start_micros)}/release={nonce.hex()}".encode("ascii")
        return Sampler(_key_bytes(keyed_hash.derive_key(self.key, purpose)), self.identity)


def users_required(sample_size: Optional[int], population: Optional[int], by_probability: bool = False
                   ) -> Optional[int]:
    """The users a round's sample must hold: TrieHH's bottom-m draws ``min(m, n)`` of ``n``
    users (fewer: the sample is short, and its round keeps nothing). None when sampling by
    probability (TrieHH++'s Bernoulli sample: its size is random, never short) or when n is
    unknown.

    Raises:
      ValueError: no sample size for a bottom-m sample of a known population.
    """
    if by_probability or population is None:
        return None
    if sample_size is None:
        raise ValueError("a bottom-m sample needs its sample size m")
    return min(sample_size, population)


def real_users_sampled(uniform: float, declared: int, population: int, sample_size: int) -> int:
    """How many of a window's ``population`` real users its round samples when its plan is for
    ``declared`` users: ``sample_size`` of ``declared`` ranks drawn uniformly, the
    ``declared - population`` phantoms (users holding nothing) among them abstaining. The count
    is ``K ~ Hypergeometric(declared, population, sample_size)``, drawn by inverting its CDF at
    ``uniform`` (a keyed uniform in [0, 1) of the round's keys); with ``population >= declared``
    there is no phantom and it is ``min(sample_size, population)``. Given K, the sampled real
    users are the K of smallest rank, so the real sample is exactly the real part of a bottom-m
    of ``declared`` ranks (docs/protocol.md, "Windows planned for a declared population").

    Raises:
      ValueError: a uniform outside [0, 1), or negative sizes.
    """
    if not 0.0 <= uniform < 1.0:
        raise ValueError(f"a uniform is in [0, 1), got {uniform!r}")
    if min(declared, population, sample_size) < 0:
        raise ValueError("sizes cannot be negative")
    if population >= declared:
        return users_required(sample_size, population)
    from scipy import stats  # local, as in rank_prefilter_bound

    draws = min(sample_size, declared)
    low, high = max(0, draws - (declared - population)), min(draws, population)
    support = np.arange(low, high + 1)
    cdf = stats.hypergeom.cdf(support, declared, population, draws)
    return int(support[min(int(np.searchsorted(cdf, uniform, side="right")), len(support) - 1)])


def bernoulli_threshold(probability: float) -> int:
    """``T = floor(p * 2^64)``, exactly: a user is in a round's Bernoulli(p) sample iff its rank in
    that round is below T. Ranks are uniform on [0, 2^64), so the sampling probability is
    ``T / 2^64``: at most p and within 2^-64 of it (never above: a smaller p_s only strengthens
    sample-and-threshold's guarantee). Deterministic, like bottom-m: a retry redraws the same
    users.

    Raises:
      ValueError: for a probability that is not a number in [0, 1].
    """
    if isinstance(probability, bool) or not isinstance(probability, (int, float, np.floating)):
        raise ValueError(f"a sampling probability is a number, got {probability!r}")
    if not 0.0 <= float(probability) <= 1.0:
        raise ValueError(f"a sampling probability must be in [0, 1], got {probability!r}")
    return math.floor(Fraction(float(probability)) * 2**64)


def in_bernoulli_sample(ranks: np.ndarray, threshold: int) -> np.ndarray:
    """The boolean mask of ``ranks`` below ``threshold`` (from ``bernoulli_threshold``)."""
    ranks = np.asarray(ranks, dtype=np.uint64)
    if threshold >= 2**64:
        return np.ones(len(ranks), dtype=bool)
    return ranks < np.uint64(threshold)


def rank_prefilter_bound(population: int, sample_size: int, miss_probability: float = 1e-12) -> int:
    """A rank that the ``sample_size``-th smallest of ``population`` ranks exceeds only rarely.

    Ranks are uniform on [0, 2^64), so the m-th smallest of n is 2^64 times a Beta(m, n - m + 1)
    variable. Keeping only records whose rank is at most this bound (one pass over the data)
    leaves every sampled user's records with probability ``1 - miss_probability``; a pipeline
    must still check that it kept at least ``sample_size`` distinct users and otherwise redo the
    round without the prefilter (the sample itself never depends on the bound).

    Returns:
      An integer bound in [0, 2^64 - 1]; 2^64 - 1 (no filtering) when m >= n.
    """
    # Local, and scipy.special rather than scipy.stats: stats.beta.isf is this same inverse of the
    # regularised incomplete beta (Boost's), and scipy.stats takes about a second to import.
    from scipy import special

    top = 2**64 - 1
    if sample_size >= population:
        return top
    if sample_size <= 0:
        return 0
    quantile = special.betainccinv(sample_size, population - sample_size + 1, miss_probability)
    return min(top, int(quantile * 2.0**64) + 1)
