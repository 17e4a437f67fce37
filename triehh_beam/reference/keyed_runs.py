"""Many keyed TrieHH runs on one population, vectorised: the keyed simulation
(``simulation.simulate``, ``sampling="keyed"``) with each round's sample, item choices, votes
and count computed in numpy over the whole population, so that the thousands of runs of an
audit cost milliseconds each instead of a Python call per sampled user. The population is
encoded once (``encode_population``): users in the order of their canonical id bytes, their
encoded items as a ``columnar.SequenceTable``, and every prefix of every sequence numbered, so
that a trie is a boolean mask over prefix numbers. A run (``run_keyed``) samples a subset of
the encoded users (``Members``: neighbouring populations share one encoding) and draws exactly
``simulate``'s samples (the bottom ``m`` of the ranks, ties broken by the id bytes)
and votes (``columnar.choose_codes``, exactly ``vote.client_vote``), so for one seed it grows
exactly the simulation's trie, and so the pipeline's (the tests compare them). Vote counts stay
inside a round, as in the simulation; a run returns the trie only.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from triehh_beam.evaluation.metrics import UserItems, user_records
from triehh_beam.protocol import keyed_hash
from triehh_beam.protocol.columnar import SequenceTable, choose_codes, sequence_table
from triehh_beam.protocol.encoding import EmptyItemError, ItemEncoder, ItemTooLongError, Units, is_terminated
from triehh_beam.protocol.sampling import Sampler, UserId, bottom_m, user_id_bytes

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
      prefix_of: int64, one row per sequence of ``table.sequences``: column ``r - 1`` is the
        number of its length-``r`` prefix, -1 when it has fewer than ``r`` units.
      terminated: per prefix, whether it ends with the terminator (a complete item).
      only_code: per user, the code of its one sequence; -1: it holds none; -2: several (a
        draw decides).
      single_items: no user holds several sequences (no item choice to draw: Algorithm 1).
      max_length: L of the encoder.
      records_too_long, records_empty: records dropped (or truncated) as ``simulate`` does.
    """

    user_ids: Tuple[bytes, ...]
    table: SequenceTable
    prefixes: Tuple[Units, ...]
    prefix_of: np.ndarray
    terminated: np.ndarray
    only_code: np.ndarray
    single_items: bool
    max_length: int
    records_too_long: int
    records_empty: int
    _prefix_number: Mapping[Units, int] = dataclasses.field(repr=False, compare=False)
    _user_number: Mapping[bytes, int] = dataclasses.field(repr=False, compare=False)

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
            positions = np.unique(np.fromiter((self._user_number[user_id_bytes(u)] for u in user_ids),
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
    prefix_of = np.full((len(table.sequences), encoder.max_length), -1, dtype=np.int64)
    for code, sequence in enumerate(table.sequences):
        for r in range(1, len(sequence) + 1):
            prefix_of[code, r - 1] = numbers.setdefault(sequence[:r], len(numbers))
    prefixes = tuple(numbers)
    sizes = np.diff(table.offsets)
    only_code = np.where(sizes == 0, _NOTHING, _SEVERAL).astype(np.int64)
    single = np.flatnonzero(sizes == 1)
    only_code[single] = table.codes[table.offsets[single]]
    return EncodedPopulation(
        user_ids=user_ids, table=table, prefixes=prefixes, prefix_of=prefix_of,
        terminated=np.fromiter((is_terminated(p) for p in prefixes), dtype=bool, count=len(prefixes)),
        only_code=only_code, single_items=not np.any(only_code == _SEVERAL), max_length=encoder.max_length, records_too_long=too_long_records,
        records_empty=empty_records, _prefix_number=numbers,
        _user_number={u: i for i, u in enumerate(user_ids)},
    )


def _rows_of(table: SequenceTable, users: np.ndarray) -> SequenceTable:
    """The sub-table of ``users`` (positions in ``table``), rows kept in order."""
    starts = table.offsets[users]
    sizes = table.offsets[users + 1] - starts
    offsets = np.zeros(len(users) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    rows = np.repeat(starts - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)
    return SequenceTable(table.sequences, offsets, table.codes[rows], table.counts[rows])


def run_keyed(population: EncodedPopulation, members: Members, theta: int, m: int, sampler: Sampler,
              max_rounds: Optional[int] = None) -> np.ndarray:
    """One keyed TrieHH run over ``members``: ``simulate(..., sampling="keyed")``'s trie.

    Rounds follow ``protocol.rounds``: round ``r`` samples the bottom ``m`` ranks, each sampled
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
        codes = population.only_code[users]
        several = np.flatnonzero(codes == _SEVERAL)
        if len(several):
            uniforms = keys.uniforms_from_user_hashes(user_hashes[chosen[several]])
            codes[several] = choose_codes(_rows_of(population.table, users[several]), uniforms)
        codes = codes[codes >= 0]
        votes = population.prefix_of[codes, r - 1]
        extends = votes >= 0
        if r > 1:
            extends[extends] = trie[population.prefix_of[codes[extends], r - 2]]
        # votes per prefix number, this round only.
        tally = np.bincount(votes[extends], minlength=len(population.prefixes))
        kept = np.flatnonzero(tally >= theta)
        del tally
        if not len(kept):
            break
        trie[kept] = True
        if population.terminated[kept].all():
            break
    return trie
