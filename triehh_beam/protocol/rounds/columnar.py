"""The vote and the count of a round over a batch of sampled users at once, in numpy: exactly
``vote.client_vote`` per user without per-user Python. A ``SequenceTable`` holds the batch (its
distinct sequences in canonical order, per user a CSR run of (code, count) rows);
``choose_codes`` draws each user's sequence from its uniform as ``vote.choose_sequence`` does
(exact integer running sums below 2**53, the reference beyond); ``count_votes`` turns the choices
into per-prefix counts, private, for a ``PrefixCounter`` whose ``extract_kept`` is their one way
out. A deny list masks the denied rows before the draw. The pipeline and the reference
simulations all vote through here.
"""

from __future__ import annotations

import dataclasses
from typing import Collection, Dict, Sequence, Tuple

import numpy as np

from triehh_beam.protocol.distinct import distinct as distinct_values
from triehh_beam.protocol.items.encoding import Units
from triehh_beam.protocol.ragged import gather
from triehh_beam.protocol.rounds.vote import choose_sequence

__all__ = ["RoundVotes", "SequenceTable", "choose_codes", "count_votes", "sequence_table", "without_sequences"]

# Totals at or above this (estimated in float64) are drawn by the reference: below 2**53 every
# cumulative count is an exact double; the margin covers the float estimate's rounding.
_EXACT_TOTAL = float(2**52)


@dataclasses.dataclass(frozen=True)
class SequenceTable:
    """Users' encoded items in columns: user ``i`` holds rows ``offsets[i]:offsets[i + 1]``.

    Attributes:
      sequences: the distinct sequences, sorted canonically; a row's code is a position here.
      offsets: int64, ``users + 1`` entries, from 0 (CSR).
      codes: int64 per row, strictly increasing within a user (its items, canonical order).
      counts: int64 per row, > 0 (the user's local count of that sequence).

    Build it with ``sequence_table``, which sorts, merges and checks.
    """

    sequences: Tuple[Units, ...]
    offsets: np.ndarray
    codes: np.ndarray
    counts: np.ndarray

    @property
    def users(self) -> int:
        return len(self.offsets) - 1

    def user_rows(self) -> np.ndarray:
        """The user (0-based position) of every row."""
        return np.repeat(np.arange(self.users, dtype=np.int64), np.diff(self.offsets))

    def subset(self, users: np.ndarray) -> "SequenceTable":
        """The table of ``users`` (positions here, in the order given), rows kept in order."""
        offsets, rows = gather(self.offsets, users)
        return SequenceTable(self.sequences, offsets, self.codes[rows], self.counts[rows])

    def weighted(self, user: int) -> Tuple[Tuple[Units, int], ...]:
        """User ``user``'s ``((sequence, count), ...)``: what ``client_vote`` takes (tests, fallback)."""
        rows = slice(int(self.offsets[user]), int(self.offsets[user + 1]))
        return tuple(
            (self.sequences[c], int(n)) for c, n in zip(self.codes[rows].tolist(), self.counts[rows].tolist())
        )


def sequence_table(
    distinct: Sequence[Units], offsets: np.ndarray, codes: np.ndarray, counts: np.ndarray
) -> SequenceTable:
    """A ``SequenceTable`` from rows in any order that name sequences by position in ``distinct``.

    Repeated (user, sequence) rows are summed and zero counts dropped, as ``client_vote`` does;
    ``distinct`` need not be sorted nor free of unused entries (they are kept, harmlessly).

    Args:
      distinct: distinct sequences (tuples of units); ``codes`` index it.
      offsets: per-user row offsets (``users + 1`` non-decreasing entries from 0).
      codes: per row, an index into ``distinct``.
      counts: per row, a non-negative integer count.

    Raises:
      ValueError: inconsistent lengths or offsets, a code out of range, a negative count, a
        repeated sequence in ``distinct``, or a user's count total that overflows int64.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    counts = np.asarray(counts)
    if counts.dtype.kind not in "iu" and len(counts):
        raise ValueError(f"counts must be integers, got {counts.dtype}")
    counts = counts.astype(np.int64, copy=False)
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing from 0")
    if len(codes) != len(counts) or int(offsets[-1]) != len(codes):
        raise ValueError(f"{len(codes)} codes, {len(counts)} counts and offsets ending at {offsets[-1]}")
    if len(codes) and (codes.min() < 0 or codes.max() >= len(distinct)):
        raise ValueError("a code is outside the distinct sequences")
    if len(counts) and counts.min() < 0:
        raise ValueError("counts must be non-negative integers")
    order = sorted(range(len(distinct)), key=distinct.__getitem__)
    sequences = tuple(distinct[i] for i in order)
    if any(a == b for a, b in zip(sequences, sequences[1:])):
        raise ValueError("the distinct sequences repeat a sequence")
    position = np.empty(len(distinct), dtype=np.int64)
    position[np.asarray(order, dtype=np.int64)] = np.arange(len(distinct), dtype=np.int64)
    users = len(offsets) - 1
    user = np.repeat(np.arange(users, dtype=np.int64), np.diff(offsets))
    code = position[codes]
    keep = counts > 0
    if not keep.all():
        user, code, counts = user[keep], code[keep], counts[keep]
    count = counts
    # Rows already in (user, code) order (a stored sample is) skip the sort.
    if len(code) > 1 and not np.all((user[1:] > user[:-1]) | (code[1:] > code[:-1])):
        # One int64 key (users * sequences stays far below 2**63 for any batch that fits in
        # memory); a stable sort of it is several times faster than a two-key lexsort.
        by = np.argsort(user * max(len(distinct), 1) + code, kind="stable")
        user, code, count = user[by], code[by], count[by]
    # Merge repeated (user, code) rows: the first of each run starts a group.
    first = np.ones(len(code), dtype=bool)
    first[1:] = (user[1:] != user[:-1]) | (code[1:] != code[:-1])
    starts = np.flatnonzero(first)
    if len(starts) < len(code):
        wide = np.add.reduceat(count.astype(np.float64), starts)
        if np.any(wide >= 2.0**62):
            raise ValueError("a user's count of one sequence overflows int64")
        count = np.add.reduceat(count, starts)
        user, code = user[starts], code[starts]
    new_offsets = np.zeros(users + 1, dtype=np.int64)
    np.cumsum(np.bincount(user, minlength=users), out=new_offsets[1:])
    return SequenceTable(sequences, new_offsets, code, count)


def without_sequences(table: SequenceTable, denied: Collection[Units]) -> SequenceTable:
    """``table`` without the rows of ``denied`` sequences (same users, same sequence codes): a
    user left with no row holds nothing. The table itself when nothing is denied."""
    if not denied or not len(table.codes):
        return table
    is_denied = np.fromiter((s in denied for s in table.sequences), dtype=bool, count=len(table.sequences))
    keep = ~is_denied[table.codes]
    if keep.all():
        return table
    kept_before = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(keep, out=kept_before[1:])
    return SequenceTable(table.sequences, kept_before[table.offsets], table.codes[keep], table.counts[keep])


def choose_codes(table: SequenceTable, uniforms: np.ndarray, denied: Collection[Units] = ()) -> np.ndarray:
    """Each user's chosen code (``-1``: it holds nothing), drawn as ``vote.choose_sequence``.

    Args:
      table: the users' items.
      uniforms: float64 per user in [0, 1), from ``RoundKeys.choice_uniforms_packed``.
      denied: sequences never chosen (``without_sequences``): the draw is among the others.

    Raises:
      ValueError: a uniform outside [0, 1), or not one per user.
    """
    table = without_sequences(table, denied)
    u = np.asarray(uniforms, dtype=np.float64)
    n = table.users
    if u.shape != (n,):
        raise ValueError(f"{len(u)} uniforms for {n} users")
    if n and not (np.all(u >= 0.0) and np.all(u < 1.0)):
        raise ValueError("uniforms must be in [0, 1)")
    chosen = np.full(n, -1, dtype=np.int64)
    sizes = np.diff(table.offsets)
    holders = np.flatnonzero(sizes > 0)
    if len(holders) == 0:
        return chosen
    user = table.user_rows()
    # Per-user totals estimated in float64 first: only users well below 2**53 take the exact
    # columnar path; any other (a practical impossibility) is drawn by the reference.
    estimate = np.bincount(user, weights=table.counts.astype(np.float64), minlength=n)
    huge = holders[estimate[holders] >= _EXACT_TOTAL]
    # Local cumulative counts: a global running sum in uint64 (wrapping is harmless) minus the
    # sum before the user's first row gives each user's own exact running sum.
    running = np.cumsum(table.counts.astype(np.uint64))
    before = np.zeros(n, dtype=np.uint64)
    starts = table.offsets[:-1]
    nonzero_start = starts > 0
    before[nonzero_start] = running[starts[nonzero_start] - 1]
    local = (running - before[user]).astype(np.int64)
    totals = np.zeros(n, dtype=np.int64)
    totals[holders] = local[table.offsets[holders + 1] - 1]
    if len(huge):
        totals[huge] = 0  # no float target is computed from a wrapped total
    target = u * totals.astype(np.float64)
    # The first row whose cumulative count exceeds the target: after the rows at or below it.
    at_or_below = local.astype(np.float64) <= target[user]
    skipped = np.bincount(user[at_or_below], minlength=n)
    normal = holders if not len(huge) else np.setdiff1d(holders, huge, assume_unique=True)
    chosen[normal] = table.codes[table.offsets[normal] + skipped[normal]]
    for i in huge.tolist():
        sequence = choose_sequence(table.weighted(i), float(u[i]))  # denied rows already gone
        chosen[i] = table.sequences.index(sequence)
    return chosen


@dataclasses.dataclass(frozen=True)
class RoundVotes:
    """A batch's votes of one round. ``counts`` are private: merge them with
    ``PrefixCounter.merge`` and let only ``PrefixCounter.extract_kept`` out.

    Attributes:
      counts: prefix -> votes in this batch (prefixes with at least one vote).
      users: users in the batch.
      users_without_items: users holding no sequence (they cast no vote).
      votes_cast: users whose chosen sequence voted.
      votes_filtered: users holding items whose choice did not extend the frontier (or was
        shorter than the round).
      users_only_denied: users holding items, every one of them on the deny list (they
        abstain; counted apart from ``users_without_items``).
    """

    counts: Dict[Units, int]
    users: int
    users_without_items: int
    votes_cast: int
    votes_filtered: int
    users_only_denied: int = 0


def count_votes(
    table: SequenceTable, uniforms: np.ndarray, frontier: Collection[Units], round_index: int,
    denied: Collection[Units] = (),
) -> RoundVotes:
    """The votes of round ``round_index`` of a batch of sampled users, counted per prefix.

    User ``i`` votes exactly ``client_vote(table.weighted(i), frontier, round_index,
    uniforms[i], denied)``: its chosen sequence's length-``round_index`` prefix when the
    sequence has that many units and its length-``round_index - 1`` prefix is on ``frontier``.

    Raises:
      ValueError: ``round_index < 1``, or bad uniforms (``choose_codes``).
    """
    if round_index < 1:
        raise ValueError(f"rounds are numbered from 1, got {round_index}")
    restricted = without_sequences(table, denied)
    holding = int(np.count_nonzero(np.diff(table.offsets)))
    chosen = choose_codes(restricted, uniforms)
    holders = chosen >= 0
    picked = chosen[holders]
    # Python once per distinct chosen sequence: its prefix, if it votes.
    distinct = distinct_values(picked)
    prefix_ids: Dict[Units, int] = {}
    prefix_of = np.full(len(distinct), -1, dtype=np.int64)
    cut = round_index - 1
    for j, code in enumerate(distinct.tolist()):
        sequence = table.sequences[code]
        if len(sequence) >= round_index and sequence[:cut] in frontier:
            prefix_of[j] = prefix_ids.setdefault(sequence[:round_index], len(prefix_ids))
    votes = prefix_of[np.searchsorted(distinct, picked)]
    cast = votes[votes >= 0]
    tally = np.bincount(cast, minlength=len(prefix_ids))
    counts = {prefix: int(tally[i]) for prefix, i in prefix_ids.items() if tally[i]}
    return RoundVotes(
        counts=counts,
        users=table.users,
        users_without_items=int(table.users - holding),
        votes_cast=int(len(cast)),
        votes_filtered=int(len(picked) - len(cast)),
        users_only_denied=int(holding - holders.sum()),
    )
