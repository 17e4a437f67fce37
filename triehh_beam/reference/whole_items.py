"""The keyed simulation of whole-item sample-and-threshold (``--protocol sample-threshold``,
docs/protocol.md §2), the pipeline's oracle: every user is kept when its round-1 rank is below
``floor(p_s 2^64)`` (``Sampler.bernoulli_sample``), each kept user reports the item
``vote.choose_sequence`` draws with its round-1 ``Sampler.choice_uniform`` (the vote's choice),
whole, and the items with at least tau reports are released with their counts. The population is
encoded as ``simulation.simulate``'s (``too_long="drop"``: the whole-item job drops long items),
so for one seed and job identity it releases exactly the pipeline's items and counts. The
per-item counts below tau never leave ``_run``.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Hashable, Iterable, Mapping, Tuple

import numpy as np

from triehh_beam.protocol.central.whole_items import WholeItemCounter, estimate, whole_item_report
from triehh_beam.protocol.items.encoding import ItemEncoder, Units
from triehh_beam.protocol.randomness.sampling import UserId
from triehh_beam.reference.metrics import UserItems
from triehh_beam.reference.simulation import Seed, EncodedPopulation, encode_population, sampler_for_seed

__all__ = ["WholeItemResult", "simulate_many_whole_items", "simulate_whole_items"]


@dataclasses.dataclass(frozen=True)
class WholeItemResult:
    """One simulated release.

    Attributes:
      released: ``(sequence, count)`` with ``count >= tau``, sorted by sequence.
      items: the released items decoded -> their counts.
      sample_probability: p_s.
      users_sampled: the Bernoulli sample's size.
      reports: kept users that reported an item (the others hold nothing encodable).
      n_users: users with at least one record.
    """

    released: Tuple[Tuple[Units, int], ...]
    items: Mapping[Hashable, int]
    sample_probability: float
    users_sampled: int
    reports: int
    n_users: int

    @property
    def heavy_hitters(self) -> frozenset:
        return frozenset(self.items)

    @property
    def estimates(self) -> Dict[Hashable, float]:
        """Each released item's ``count / p_s``."""
        return {item: estimate(count, self.sample_probability) for item, count in self.items.items()}


def _check(sample_probability, tau) -> Tuple[float, int]:
    if (isinstance(sample_probability, bool) or not isinstance(sample_probability, (int, float, np.floating))
            or not 0.0 < float(sample_probability) <= 1.0):
        raise ValueError(f"sample_probability must be a number in (0, 1], got {sample_probability!r}")
    WholeItemCounter(tau)  # validates tau
    return float(sample_probability), int(tau)


def _run(population: EncodedPopulation, encoder: ItemEncoder, sample_probability: float, tau: int, seed: Seed,
         identity: bytes) -> WholeItemResult:
    sampler = sampler_for_seed(seed, identity)
    kept = sampler.bernoulli_sample(1, population.user_ids, sample_probability)
    uniforms = sampler.choice_uniforms(1, kept) if kept else np.zeros(0)
    tally: Dict[Units, int] = {}  # local; only the released part leaves
    reports = 0
    for user_id, u in zip(kept, uniforms.tolist()):
        chosen = whole_item_report(population.weighted[population.index[user_id]], u)
        if chosen is not None:
            tally[chosen] = tally.get(chosen, 0) + 1
            reports += 1
    released = WholeItemCounter(tau).extract_released(tally)
    del tally
    return WholeItemResult(
        released=released,
        items={encoder.decode(s): count for s, count in released},
        sample_probability=sample_probability,
        users_sampled=len(kept),
        reports=reports,
        n_users=len(population.user_ids),
    )


def simulate_whole_items(users: Mapping[UserId, UserItems], encoder: ItemEncoder, sample_probability: float,
                         tau: int, seed: Seed, identity: bytes = b"") -> WholeItemResult:
    """One whole-item release of an in-memory population, keyed exactly as the pipeline.

    Args:
      users: user id -> items (a list of records, or a mapping item -> count). Not modified.
      encoder: how items become unit sequences; items longer than ``L - 1`` units are dropped.
      sample_probability: p_s, in (0, 1].
      tau: the threshold, an integer >= 1.
      seed: a ``Sampler``, the secret seed bytes or an int (``simulation.sampler_for_seed``).
      identity: the job identity the pipeline mixes into its keys (a job's state records it
        as ``sampling_identity``).

    Raises:
      ValueError, TypeError: for invalid parameters, seeds, user ids or items.
    """
    return simulate_many_whole_items(users, encoder, sample_probability, tau, [seed], identity)[0]


def simulate_many_whole_items(users: Mapping[UserId, UserItems], encoder: ItemEncoder, sample_probability: float,
                              tau: int, seeds: Iterable[Seed], identity: bytes = b"") -> Tuple[WholeItemResult, ...]:
    """``simulate_whole_items`` once per seed, the population encoded once."""
    sample_probability, tau = _check(sample_probability, tau)
    population = encode_population(users, encoder, "drop")
    return tuple(_run(population, encoder, sample_probability, tau, seed, identity) for seed in seeds)
