"""The whole TrieHH protocol in memory, rounds and all, on the round loop the driver runs
(``protocol.rounds.loop``): with ``sampling="keyed"`` the pipeline's oracle (its samples from
``Sampler``, its votes counted by ``columnar.count_votes``, so for one seed exactly the pipeline's
trie in exactly its rounds); with ``sampling="numpy"`` an independent re-implementation whose
statistics the keyed mode must agree with. TrieHH++ (``simulate_sample_threshold``) differs only
in the sample (each user with probability ``p_s``) and the threshold tau; a deny list never
changes a sample. Per-prefix counts never leave a round; round statistics are totals only.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Collection, Dict, FrozenSet, Hashable, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from triehh_beam.protocol.items.encoding import ItemEncoder, Units, is_terminated
from triehh_beam.protocol.randomness.sampling import Sampler, UserId
from triehh_beam.protocol.rounds import columnar, loop as rounds
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.keyed_runs import EncodedPopulation, encode_population
from triehh_beam.reference.metrics import UserItems

__all__ = [
    "EncodedPopulation",
    "RoundStats",
    "SimulationResult",
    "encode_population",
    "sampler_for_seed",
    "simulate",
    "simulate_many",
    "simulate_many_sample_threshold",
    "simulate_sample_threshold",
]

SAMPLING_MODES = ("keyed", "numpy")

Seed = Union[Sampler, bytes, int]


@dataclasses.dataclass(frozen=True)
class RoundStats:
    """Totals of one round (no per-prefix counts: see the module docstring).

    Attributes:
      round_index: the round, from 1.
      users_sampled: users in the round's sample, ``min(m, n)`` (TrieHH++: the Bernoulli
        sample's size).
      votes_cast: sampled users that sent a vote (the others' chosen item was not on the
        frontier, was too short, or they hold no encodable item).
      prefixes_kept: prefixes with at least ``theta`` votes, the size of the new level.
    """

    round_index: int
    users_sampled: int
    votes_cast: int
    prefixes_kept: int


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """The outcome of one simulated TrieHH run.

    Attributes:
      levels: ``levels[r - 1]`` is the set of length-``r`` prefixes kept in round ``r``; only
        non-empty levels are listed, so ``len(levels)`` is the depth of the trie.
      heavy_hitter_sequences: the discovered sequences (prefixes that end with the terminator).
      heavy_hitters: the same, decoded (terminator stripped, normalised form of the items).
      rounds_run: rounds executed, a final one that added nothing included (exactly the rounds
        the pipeline runs: ``protocol.rounds.loop`` is both loops).
      round_stats: one ``RoundStats`` per round run.
      stopped_because: the ``rounds.StopReason`` value: ``"empty_round"`` (a round kept
        nothing), ``"max_rounds"`` or ``"nothing_to_extend"`` (every deepest prefix is a
        complete item).
      stop: the same as a ``rounds.Stop`` (``stop.describe()`` is the driver's stop reason).
      n_users: size of the sampled population (users with at least one record).
      records_too_long: over-long records, dropped or truncated according to the policy.
      records_empty: empty items, dropped.
    """

    levels: Tuple[FrozenSet[Units], ...]
    heavy_hitter_sequences: FrozenSet[Units]
    heavy_hitters: FrozenSet[Hashable]
    rounds_run: int
    round_stats: Tuple[RoundStats, ...]
    stopped_because: str
    n_users: int
    records_too_long: int
    records_empty: int
    stop: Optional[rounds.Stop] = None

    @property
    def prefixes(self) -> FrozenSet[Units]:
        """Every prefix of the trie, all levels together."""
        return frozenset().union(*self.levels)

    @property
    def frequent_prefixes(self) -> FrozenSet[Units]:
        """The trie's leaves that do not end with the terminator (frequent prefixes that did not
        grow into a full item)."""
        leaves = set()
        for depth, level in enumerate(self.levels):
            children = self.levels[depth + 1] if depth + 1 < len(self.levels) else ()
            parents = {child[:-1] for child in children}
            leaves.update(p for p in level if not is_terminated(p) and p not in parents)
        return frozenset(leaves)


def sampler_for_seed(seed: Seed, identity: bytes = b"") -> Sampler:
    """The ``Sampler`` of a keyed simulation run.

    ``identity`` is the job identity the pipeline mixes into its keys
    (``DiscoveryConfig.sampling_identity()``, recorded in the job's state): with the same seed
    and identity the simulation draws exactly the pipeline's samples. A ``Sampler`` is used as
    is (it carries its own identity; giving another is an error) and ``bytes`` are the secret
    seed itself. A non-negative ``int``
    ``i`` stands for the secret seed ``i.to_bytes(32, "big")``: a convenience for simulations
    over many seeds (``seeds=range(100)``), reproducible by a pipeline given the same bytes. Such
    seeds are public, so never use them for a real release.

    Raises:
      TypeError, ValueError: for other types, a negative int, or bytes of invalid length.
    """
    if isinstance(seed, Sampler):
        if identity and identity != seed.identity:
            raise ValueError("a Sampler carries its own job identity: give the seed bytes instead")
        return seed
    if isinstance(seed, bytes):
        return Sampler(seed, identity)
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        if seed < 0:
            raise ValueError(f"integer seeds must be >= 0, got {seed}")
        return Sampler(int(seed).to_bytes(32, "big"), identity)
    raise TypeError(f"a seed is a Sampler, bytes or a non-negative int, not {type(seed).__name__}")


def _numpy_rng(seed: Seed) -> np.random.Generator:
    if isinstance(seed, Sampler):
        seed = seed.seed
    if isinstance(seed, bytes):
        seed = int.from_bytes(seed, "big")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(
            f"a seed is a Sampler, bytes or a non-negative int, not {type(seed).__name__}"
        )
    if seed < 0:
        raise ValueError(f"integer seeds must be >= 0, got {seed}")
    return np.random.default_rng(int(seed))


def _keyed_votes(
    population: EncodedPopulation, sampler: Sampler, round_index: int, m: int, frontier: FrozenSet[Units],
    probability: Optional[float] = None, denied: Collection[Units] = frozenset(),
) -> Tuple[int, Dict[Units, int]]:
    """(users sampled, votes per prefix) of one round, exactly as the production pipeline draws
    and counts them: the bottom-m sample, or with ``probability`` the keyed Bernoulli sample
    (TrieHH++), and ``columnar.count_votes`` (``vote.client_vote`` for every sampled user)."""
    if probability is None:
        sampled = sampler.sample(round_index, population.user_ids, m)
    else:
        sampled = sampler.bernoulli_sample(round_index, population.user_ids, probability)
    users = np.fromiter((population.index[u] for u in sampled), dtype=np.int64, count=len(sampled))
    uniforms = sampler.choice_uniforms(round_index, sampled)
    votes = columnar.count_votes(population.table.subset(users), uniforms, frontier, round_index, denied)
    return len(sampled), votes.counts


def _numpy_votes(
    population: EncodedPopulation,
    rng: np.random.Generator,
    round_index: int,
    m: int,
    frontier: FrozenSet[Units],
    probability: Optional[float] = None,
    denied: Collection[Units] = frozenset(),
) -> Tuple[int, Dict[Units, int]]:
    """(users sampled, votes per prefix) of one round, drawn independently with numpy (no keyed
    hash, no ``columnar``): the same protocol written a second time (a denied sequence is removed
    from the user's items before its draw)."""
    n = len(population.user_ids)
    if probability is None:
        chosen_users = rng.choice(n, size=min(m, n), replace=False)
    else:
        chosen_users = np.flatnonzero(rng.random(n) < probability)
    votes = []
    for i in chosen_users:
        weighted = population.weighted[i]
        if denied:
            weighted = tuple(pair for pair in weighted if pair[0] not in denied)
        if not weighted:
            continue
        if len(weighted) == 1:
            sequence = weighted[0][0]
        else:
            counts = np.array([c for _, c in weighted], dtype=float)
            sequence = weighted[rng.choice(len(weighted), p=counts / counts.sum())][0]
        if len(sequence) >= round_index and sequence[: round_index - 1] in frontier:
            votes.append(sequence[:round_index])
    return len(chosen_users), dict(collections.Counter(votes))


def _check_parameters(theta: int, m: int, max_rounds: Optional[int], sampling: str) -> None:
    if sampling not in SAMPLING_MODES:
        raise ValueError(f"sampling must be one of {SAMPLING_MODES}, got {sampling!r}")
    if isinstance(theta, bool) or not isinstance(theta, (int, np.integer)) or theta < 1:
        raise ValueError(f"theta must be an integer >= 1, got {theta!r}")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
        raise ValueError(f"the batch size m must be an integer >= 0, got {m!r}")
    if max_rounds is not None and (
        isinstance(max_rounds, bool)
        or not isinstance(max_rounds, (int, np.integer))
        or max_rounds < 1
    ):
        raise ValueError(f"max_rounds must be an integer >= 1, got {max_rounds!r}")


def _run(
    population: EncodedPopulation,
    encoder: ItemEncoder,
    theta: int,
    m: int,
    seed: Seed,
    sampling: str,
    max_rounds: int,
    identity: bytes = b"",
    probability: Optional[float] = None,
    denied: Collection[Units] = frozenset(),
) -> SimulationResult:
    # Each mode's source of randomness, fixed for the whole run.
    randomness = sampler_for_seed(seed, identity) if sampling == "keyed" else _numpy_rng(seed)
    draw = _keyed_votes if sampling == "keyed" else _numpy_votes

    trie = Trie.empty(encoder)
    stats: List[RoundStats] = []
    step = rounds.next_round(trie, max_rounds)
    while isinstance(step, rounds.NextRound):
        # prefix -> votes; local to the round and discarded after thresholding.
        users_sampled, tally = draw(population, randomness, step.index, m, step.frontier, probability, denied)
        kept = frozenset(prefix for prefix, count in tally.items() if count >= theta)
        votes_cast = sum(tally.values())
        del tally
        stats.append(RoundStats(step.index, users_sampled, votes_cast, len(kept)))
        trie, step = rounds.apply_round(trie, step, kept, max_rounds)

    levels = trie.levels
    sequences = frozenset(p for level in levels for p in level if is_terminated(p))
    return SimulationResult(
        levels=tuple(levels),
        heavy_hitter_sequences=sequences,
        heavy_hitters=frozenset(encoder.decode(s) for s in sequences),
        rounds_run=len(stats),
        round_stats=tuple(stats),
        stopped_because=step.reason.value,
        stop=step,
        n_users=len(population.user_ids),
        records_too_long=population.records_too_long,
        records_empty=population.records_empty,
    )


def simulate(
    users: Mapping[UserId, UserItems],
    encoder: ItemEncoder,
    theta: int,
    m: int,
    seed: Seed,
    *,
    sampling: str = "keyed",
    max_rounds: Optional[int] = None,
    too_long: str = "drop",
    identity: bytes = b"",
    denied: Collection[Units] = frozenset(),
) -> SimulationResult:
    """Runs TrieHH (Algorithm 1, or 3 for users with several items) on an in-memory population.

    Conventions shared with the pipeline (an exact comparison relies on them): the sampled
    population is every user with at least one record, whatever happens to its records
    afterwards (a user whose items are all too long is still sampled, and sends nothing); ids
    that ``sampling.user_id_bytes`` maps to the same bytes are one user. Items are normalised
    and encoded with the ``ItemEncoder``; an item longer than ``L`` units is dropped
    (``too_long="drop"``) or truncated to its first ``L`` units (``"truncate"``: it can then
    only show up as a frequent prefix); empty items are dropped. The rounds are
    ``protocol.rounds.loop``'s: a round that keeps nothing is run and counted (as in the paper's
    worked example, "the algorithm terminates in the sixth round"), no round is run once every
    deepest prefix is a complete item, and at most ``max_rounds`` run.

    Args:
      users: user id -> items: a list of records (items may repeat) or a mapping item -> count.
        Not modified.
      encoder: how items become unit sequences (its ``max_length`` is ``L``).
      theta: the vote threshold θ >= 1.
      m: users sampled per round (fewer if the population is smaller).
      seed: ``"keyed"``: a ``Sampler``, the secret seed bytes, or an int (``sampler_for_seed``);
        ``"numpy"``: an int, bytes or a ``Sampler`` whose seed is read as an integer for
        ``numpy.random.default_rng``.
      sampling: ``"keyed"`` (exactly the production draws) or ``"numpy"`` (independent draws).
      max_rounds: the most rounds to run; default ``encoder.max_length``.
      too_long: ``"drop"`` (default) or ``"truncate"`` items longer than ``L`` units.
      identity: ``"keyed"``: the job identity mixed into the keys, as the pipeline's
        (``DiscoveryConfig.sampling_identity()``; a job's state records it as
        ``sampling_identity``). Default: none, the seed alone.
      denied: encoded sequences on a deny list (``job.settings.deny_lists``): the samples are the same,
        a sampled user draws among its other sequences and abstains if it holds none.

    Returns:
      The ``SimulationResult``.

    Raises:
      ValueError, TypeError: for invalid parameters, seeds, user ids or items.
      EncodingError: an item has the wrong type for the encoder.
    """
    results = simulate_many(
        users, encoder, theta, m, [seed], sampling=sampling, max_rounds=max_rounds,
        too_long=too_long, identity=identity, denied=denied,
    )
    return results[0]


def simulate_many(
    users: Mapping[UserId, UserItems],
    encoder: ItemEncoder,
    theta: int,
    m: int,
    seeds: Iterable[Seed],
    *,
    sampling: str = "keyed",
    max_rounds: Optional[int] = None,
    too_long: str = "drop",
    identity: bytes = b"",
    denied: Collection[Units] = frozenset(),
    _probability: Optional[float] = None,
) -> Tuple[SimulationResult, ...]:
    """One independent run per seed, the population encoded once (arguments as ``simulate``).

    Returns:
      The results in the order of ``seeds``.
    """
    _check_parameters(theta, m, max_rounds, sampling)
    population = encode_population(users, encoder, too_long)
    limit = encoder.max_length if max_rounds is None else int(max_rounds)
    return tuple(
        _run(population, encoder, int(theta), int(m), seed, sampling, limit, identity, _probability,
             frozenset(denied))
        for seed in seeds
    )


def simulate_sample_threshold(
    users: Mapping[UserId, UserItems],
    encoder: ItemEncoder,
    tau: int,
    sample_probability: float,
    seed: Seed,
    **kwargs,
) -> SimulationResult:
    """Runs TrieHH++ (sample-and-threshold rounds) on an in-memory population.

    Each round samples every user independently with probability ``sample_probability``
    (``"keyed"``: ``Sampler.bernoulli_sample``, rank below ``floor(p_s 2^64)``; ``"numpy"``: an
    independent uniform per user), each sampled user votes as in ``simulate`` (same item choice,
    same ``client_vote``), and prefixes with at least ``tau`` votes are kept. Keyword arguments
    and conventions as ``simulate``; ``RoundStats.users_sampled`` is the Bernoulli sample's size.

    Raises:
      ValueError, TypeError: as ``simulate``, and for a probability outside [0, 1].
    """
    return simulate_many_sample_threshold(users, encoder, tau, sample_probability, [seed], **kwargs)[0]


def simulate_many_sample_threshold(
    users: Mapping[UserId, UserItems],
    encoder: ItemEncoder,
    tau: int,
    sample_probability: float,
    seeds: Iterable[Seed],
    **kwargs,
) -> Tuple[SimulationResult, ...]:
    """``simulate_sample_threshold`` once per seed, the population encoded once."""
    if (isinstance(sample_probability, bool) or not isinstance(sample_probability, (int, float, np.floating))
            or not 0.0 <= float(sample_probability) <= 1.0):
        raise ValueError(f"sample_probability must be a number in [0, 1], got {sample_probability!r}")
    return simulate_many(users, encoder, tau, 0, seeds, _probability=float(sample_probability), **kwargs)
