"""Many keyed TrieHH runs on one population, fast: the population encoded once
(``encode_population``: users in id byte order, their items as a ``columnar.SequenceTable``, every
prefix numbered so a trie is a boolean mask), and each run (``run_keyed``) drawing
``simulation.simulate``'s keyed samples (``sampling.bottom_m``) and votes
(``columnar.count_votes``, the pipeline's own) over a subset of the users, so that for one seed it
grows exactly the simulation's trie; the thousands of runs of an audit cost milliseconds each.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from triehh_beam.protocol.items.encoding import (EmptyItemError, ItemEncoder, ItemTooLongError, Units,
                                                 is_terminated)
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.bottom_m import bottom_m
from triehh_beam.protocol.randomness.sampling import Sampler, UserId, user_id_bytes
from triehh_beam.protocol.rounds.columnar import SequenceTable, count_votes, sequence_table
from triehh_beam.reference.metrics import UserItems, user_records

__all__ = ["EncodedPopulation", "Members", "encode_population", "run_keyed"]

# only_code's markers: a user holding no encodable item, and one holding several.
_NOTHING, _SEVERAL = -1, -2


@dataclasses.dataclass(frozen=True)
class EncodedPopulation:
    """Users and their encoded items in columns, every prefix numbered.

    Attributes:
      user_ids: canonical id bytes, sorted (a user's position is its number).
      table: user ``i``'s encoded sequences and local counts (rows in canonical order).
      prefixes: every prefix (1 unit or more) of every sequence; a prefix's number is its
        position here.
      terminated: per prefix, whether it ends with the terminator (a complete item).
      only_code: per user, the code of its one sequence; -1: it holds none; -2: several (a
        draw decides).
      single_items: no user holds several sequences (no item choice to draw: Algorithm 1).
      max_length: L of the encoder.
      records_too_long, records_empty: records dropped (or truncated) as ``simulate`` does.
      index: canonical user id -> its position in ``user_ids``.
    """

    user_ids: Tuple[bytes, ...]
    table: SequenceTable
    prefixes: Tuple[Units, ...]
    terminated: np.ndarray
    only_code: np.ndarray
    single_items: bool
    max_length: int
    records_too_long: int
    records_empty: int
    _prefix_number: Mapping[Units, int] = dataclasses.field(repr=False, compare=False)
    index: Mapping[bytes, int] = dataclasses.field(repr=False, compare=False)

    @functools.cached_property
    def weighted(self) -> Tuple[Tuple[Tuple[Units, int], ...], ...]:
        """Per user, ``((sequence, local count), ...)`` in canonical order: what ``client_vote``
        takes."""
        return tuple(self.table.weighted(i) for i in range(self.table.users))

    def prefix_number(self, prefix: Units) -> int:
        """The number of ``prefix``, or -1 when no sequence of the population starts with it."""
        return self._prefix_number.get(tuple(prefix), -1)

    def members(self, user_ids: Optional[Iterable[UserId]] = None) -> "Members":
        """A population to sample: ``user_ids`` (default: every encoded user).

        Raises:
          KeyError: a user id that was not encoded.
        """
        if user_ids is None:
            positions = np.arange(len(self.user_ids), dtype=np.int64)
        else:
            positions = np.unique(np.fromiter((self.index[user_id_bytes(u)] for u in user_ids),
                                              dtype=np.int64))
        words, n_words = keyed_hash.message_words(
            *keyed_hash.pack_messages(self.user_ids[i] for i in positions.tolist()))
        return Members(positions, tuple(self.user_ids[i] for i in positions.tolist()), words, n_words)

    def levels(self, trie: np.ndarray) -> Tuple[frozenset, ...]:
        """A trie mask as ``SimulationResult.levels``: the kept prefixes by length, non-empty."""
        kept = [self.prefixes[i] for i in np.flatnonzero(trie).tolist()]
        depth = max((len(p) for p in kept), default=0)
        return tuple(frozenset(p for p in kept if len(p) == r) for r in range(1, depth + 1))


@dataclasses.dataclass(frozen=True)
class Members:
    """The users a run samples: their positions in the encoding (ascending, hence in id byte
    order), their id bytes, and those as SipHash's words (``keyed_hash.message_words``: packed
    once, hashed under each run's key)."""

    positions: np.ndarray
    user_ids: Tuple[bytes, ...]
    words: np.ndarray
    n_words: np.ndarray

    def __len__(self) -> int:
        return len(self.positions)


def encode_population(users: Mapping[UserId, UserItems], encoder: ItemEncoder,
                      too_long: str = "drop") -> EncodedPopulation:
    """Encodes a population once for any number of runs, with ``simulate``'s conventions.

    Args:
      users: user id -> items (records, or item -> count); ids ``sampling.user_id_bytes``
        maps to the same bytes are one user, users without records are left out.
      encoder: the item encoding (its ``max_length`` is L).
      too_long: ``"drop"`` or ``"truncate"`` items longer than L units.

    Raises:
      ValueError, TypeError: invalid ids, items or policy; EncodingError: an item of the wrong
        type.
    """
    if too_long not in ("drop", "truncate"):
        raise ValueError(f"too_long must be 'drop' or 'truncate', got {too_long!r}")
    if not isinstance(encoder, ItemEncoder):
        raise TypeError(f"encoder must be an ItemEncoder, got {type(encoder).__name__}")
    records = user_records(users)
    user_ids = tuple(sorted(records))
    distinct: Dict[Units, int] = {}
    offsets = [0]
    codes: List[int] = []
    counts: List[int] = []
    too_long_records = empty_records = 0
    for user_id in user_ids:
        held: Dict[Units, int] = {}
        for item, count in records[user_id].items():
            try:
                sequence = encoder.encode(item)
            except EmptyItemError:
                empty_records += count
                continue
            except ItemTooLongError:
                too_long_records += count
                if too_long == "drop":
                    continue
                sequence = encoder.encode_truncated(item)
            held[sequence] = held.get(sequence, 0) + count
        for sequence, count in held.items():
            codes.append(distinct.setdefault(sequence, len(distinct)))
            counts.append(count)
        offsets.append(len(codes))
    table = sequence_table(tuple(distinct), np.asarray(offsets, dtype=np.int64),
                           np.asarray(codes, dtype=np.int64), np.asarray(counts, dtype=np.int64))
    numbers: Dict[Units, int] = {}
    for sequence in table.sequences:
        for r in range(1, len(sequence) + 1):
            numbers.setdefault(sequence[:r], len(numbers))
    prefixes = tuple(numbers)
    sizes = np.diff(table.offsets)
    only_code = np.where(sizes == 0, _NOTHING, _SEVERAL).astype(np.int64)
    single = np.flatnonzero(sizes == 1)
    only_code[single] = table.codes[table.offsets[single]]
    return EncodedPopulation(
        user_ids=user_ids, table=table, prefixes=prefixes,
        terminated=np.fromiter((is_terminated(p) for p in prefixes), dtype=bool, count=len(prefixes)),
        only_code=only_code, single_items=not np.any(only_code == _SEVERAL), max_length=encoder.max_length, records_too_long=too_long_records,
        records_empty=empty_records, _prefix_number=numbers,
        index={u: i for i, u in enumerate(user_ids)},
    )


def run_keyed(population: EncodedPopulation, members: Members, theta: int, m: int, sampler: Sampler,
              max_rounds: Optional[int] = None) -> np.ndarray:
    """One keyed TrieHH run over ``members``: ``simulate(..., sampling="keyed")``'s trie.

    Rounds follow ``protocol.rounds.loop``: round ``r`` samples the bottom ``m`` ranks, each sampled
    user votes for the length-``r`` prefix of its chosen sequence when its length-``r - 1``
    prefix is in the trie, prefixes with at least ``theta`` votes are kept; the run ends after a
    round that keeps nothing or only complete items, or after ``max_rounds`` (default, and at
    most, L). A run cut short by ``max_rounds`` holds the first ``max_rounds`` levels of the
    full run's trie (samples never depend on the trie).

    Args:
      population: the encoding.
      members: the users sampled from (``population.members``).
      theta: the threshold, >= 1 (any value: an audit may run parameters no plan would).
      m: users sampled per round, >= 0 (all of them when m >= their number).
      sampler: the run's keys.
      max_rounds: the most rounds to run.

    Returns:
      The trie, a boolean mask over ``population.prefixes``.

    Raises:
      ValueError: theta < 1, m < 0 or max_rounds < 1.
    """
    if theta < 1 or m < 0:
        raise ValueError(f"theta must be >= 1 and m >= 0, got theta={theta}, m={m}")
    limit = population.max_length if max_rounds is None else min(int(max_rounds), population.max_length)
    if limit < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
    trie = np.zeros(len(population.prefixes), dtype=bool)
    if len(members) == 0 or m == 0:
        return trie
    everyone = m >= len(members)
    frontier: FrozenSet[Units] = frozenset({()})
    user_hashes: Optional[np.ndarray] = None
    for r in range(1, limit + 1):
        keys = sampler.round_keys(r)
        if user_hashes is None and not (everyone and population.single_items):
            # the round-free s(u) = SipHash(K_user, uid), as RoundKeys.user_hashes_packed
            # computes it; not needed when everyone is sampled and nobody draws an item.
            user_hashes = keyed_hash.siphash24_words(keys.user_key, members.words, members.n_words)
        chosen = (np.arange(len(members)) if everyone
                  else bottom_m(keys.ranks_from_user_hashes(user_hashes), members.user_ids, m))
        users = members.positions[chosen]
        # Only users holding several sequences draw; the others' uniform is never read.
        uniforms = np.zeros(len(users))
        several = np.flatnonzero(population.only_code[users] == _SEVERAL)
        if len(several):
            uniforms[several] = keys.uniforms_from_user_hashes(user_hashes[chosen[several]])
        votes = count_votes(population.table.subset(users), uniforms, frontier, r)  # private to the round
        kept = np.array(sorted(population.prefix_number(p) for p, c in votes.counts.items() if c >= theta),
                        dtype=np.int64)
        del votes
        if not len(kept):
            break
        trie[kept] = True
        if population.terminated[kept].all():
            break
        frontier = frozenset(population.prefixes[i] for i in kept.tolist() if not population.terminated[i])
    return trie
