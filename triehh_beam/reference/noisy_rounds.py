"""Noisy prefix rounds in memory (docs/protocol.md §8), on the round loop every protocol runs
(``protocol.rounds.loop``) and the same vote: every user (no sample) votes in every round with
``columnar.count_votes`` and its keyed choice uniform of (seed, release, round, user), exactly as
the sampled protocols' users do; ``noisy_release.release_round`` keeps the candidates whose
noisy count reaches the round's threshold. A vote whose last unit is outside the declared
alphabet is not a candidate and counts nowhere. Per-prefix vote counts never leave a round;
what is returned is the release (kept prefixes and their noisy counts) and totals."""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, Hashable, Mapping, Optional, Tuple

from triehh_beam.protocol.central.noisy_release import (NoisyRoundKeys, candidate_units, release_round,
                                                        round_candidates)
from triehh_beam.protocol.central.noisy_rounds import NoisyRoundsPlan
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind, Units, is_terminated
from triehh_beam.protocol.rounds import columnar, loop as rounds
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.keyed_runs import EncodedPopulation
from triehh_beam.reference.simulation import Seed, sampler_for_seed

__all__ = ["NoisyRoundsResult", "simulate_noisy_rounds"]


@dataclasses.dataclass(frozen=True)
class NoisyRoundsResult:
    """One noisy-rounds release.

    Attributes:
      levels: ``levels[r - 1]``: the length-r prefixes kept in round r (non-empty levels only).
      released: every kept prefix with its noisy count (each >= its round's threshold).
      heavy_hitters: the decoded complete items (kept prefixes ending with the end marker) with
        their noisy counts: the estimates of the leaves (users whose chosen item it is, plus
        noise).
      thresholds: each round's threshold, public (a function of the frontier's size).
      stop: why no further round ran.
    """

    levels: Tuple[FrozenSet[Units], ...]
    released: Mapping[Units, int]
    heavy_hitters: Mapping[Hashable, int]
    thresholds: Tuple[int, ...]
    stop: rounds.Stop


def simulate_noisy_rounds(population: EncodedPopulation, encoder: ItemEncoder, seed: Seed,
                          plan: NoisyRoundsPlan, alphabet: str, identity: bytes = b"",
                          keys: Optional[NoisyRoundKeys] = None) -> NoisyRoundsResult:
    """Runs noisy prefix rounds over ``population`` (at most ``plan.rounds`` rounds).

    Args:
      seed, identity: the release's secret seed and keyed identity (``sampler_for_seed``): the
        votes' choices and, unless ``keys`` is given, the noise keys derive from them.
      alphabet: the characters of the candidates' units (``candidate_units``).
      keys: the noise keys (a test plants other keys here).

    Raises:
      ValueError: an encoder whose units are not text, or a bad alphabet.
    """
    if encoder.kind is not ItemKind.TEXT:
        raise ValueError("noisy prefix rounds need text items (their candidates extend by an alphabet)")
    sampler = sampler_for_seed(seed, identity)
    keys = keys or NoisyRoundKeys.derive(sampler.seed, sampler.identity)
    units = candidate_units(alphabet, encoder.unit_size, encoder.eos)
    allowed = frozenset(units)
    trie = Trie.empty(encoder)
    released: Dict[Units, int] = {}
    thresholds = []
    step = rounds.next_round(trie, plan.rounds)
    while isinstance(step, rounds.NextRound):
        uniforms = sampler.choice_uniforms(  # every user votes: no sample
            step.index, population.user_ids)
        tally = columnar.count_votes(population.table, uniforms, step.frontier, step.index).counts
        votes = {prefix: count for prefix, count in tally.items() if prefix[-1] in allowed}
        del tally
        thresholds.append(plan.threshold(round_candidates(step.frontier, units)))
        kept = release_round(votes, sorted(step.frontier), units, step.index, plan, keys)
        del votes
        released.update(kept)
        trie, step = rounds.apply_round(trie, step, frozenset(kept), plan.rounds)
    complete = {prefix: count for prefix, count in released.items() if is_terminated(prefix)}
    return NoisyRoundsResult(levels=tuple(trie.levels), released=released,
                             heavy_hitters={encoder.decode(p): c for p, c in complete.items()},
                             thresholds=tuple(thresholds), stop=step)
