"""The central-DP rival of ``triehh evaluate --rivals pipelinedp``: PipelineDP's private partition
selection on the same records, at the same (ε, δ). Each user contributes one item, drawn among its
normalised items by local frequency with the run's keyed uniform (``vote.choose_sequence`` with
``Sampler.choice_uniforms`` of round 1, the draw of TrieHH's vote); PipelineDP's
``DPEngine.select_partitions`` on its ``LocalBackend`` (``max_partitions_contributed = 1``, the
truncated geometric strategy, the whole budget) keeps the items it selects, which are the rival's
discoveries. Its noise comes from python-dp's secure generator and cannot be seeded. PipelineDP
is an optional dependency (the ``rivals`` extra), imported only when this rival runs.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import operator
import time
from typing import Callable, Dict, FrozenSet, Hashable, Iterator, List, Mapping, Sequence, Tuple

from triehh_beam.protocol.accounting import privacy
from triehh_beam.protocol.items.encoding import EncodingError, ItemEncoder
from triehh_beam.protocol.rounds.vote import choose_sequence
from triehh_beam.reference.simulation import Seed, sampler_for_seed

__all__ = ["INSTALL", "NAME", "STRATEGY", "PartitionRun", "RivalUnavailableError", "holders_for_half",
           "keep_probability", "library_version", "normalised_users", "one_item_per_user", "privacy_block",
           "require_pipeline_dp", "run", "select_partitions"]

NAME = "pipelinedp"
INSTALL = 'pip install "triehh-beam[rivals]"'
STRATEGY = "truncated geometric"


class RivalUnavailableError(RuntimeError):
    """A rival's library is not installed."""


def require_pipeline_dp():
    """The ``pipeline_dp`` module.

    Raises:
      RivalUnavailableError: it is not installed (the message names the extra that brings it).
    """
    try:
        import pipeline_dp
    except ImportError as e:
        raise RivalUnavailableError(
            f"the {NAME} rival needs PipelineDP, which is not installed ({e}): {INSTALL}") from None
    return pipeline_dp


def library_version() -> str:
    """``pipeline-dp <version>`` as installed (``unknown`` when its metadata is missing)."""
    from importlib import metadata

    try:
        return f"pipeline-dp {metadata.version('pipeline-dp')}"
    except metadata.PackageNotFoundError:
        return "pipeline-dp unknown"


def _keep_probabilities(epsilon: float, delta: float) -> Iterator[float]:
    """π(1), π(2), ... of ``keep_probability`` (validates at once, not on the first draw)."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    grow, shrink = math.exp(epsilon), math.exp(-epsilon)

    def probabilities() -> Iterator[float]:
        p = 0.0
        while True:
            p = min(grow * p + delta, 1 + shrink * (p + delta - 1), 1.0)
            yield p

    return probabilities()


def keep_probability(users: int, epsilon: float, delta: float) -> float:
    """The probability that truncated geometric partition selection keeps an item of ``users``
    holders when each user contributes to one item: the optimal (ε, δ) selection of Desfontaines
    et al. ("Differentially private partition selection", PoPETs 2022), ``π(0) = 0`` and
    ``π(n) = min(e^ε π(n-1) + δ, 1 + e^-ε (π(n-1) + δ - 1), 1)``.

    Raises:
      ValueError: users < 0, epsilon <= 0 or delta outside (0, 1).
    """
    if users < 0:
        raise ValueError(f"users must be >= 0, got {users}")
    probabilities = _keep_probabilities(epsilon, delta)
    p = 0.0
    for _ in range(int(users)):
        p = next(probabilities)
        if p == 1.0:
            break
    return p


def holders_for_half(epsilon: float, delta: float) -> int:
    """The fewest holders whose item is kept with probability at least 1/2 (``keep_probability``).

    Raises:
      ValueError: epsilon <= 0 or delta outside (0, 1).
    """
    for users, p in enumerate(_keep_probabilities(epsilon, delta), start=1):
        if p >= 0.5:
            return users
    raise AssertionError("unreachable: the probabilities reach 1")


def normalised_users(users: Mapping[bytes, Mapping[Hashable, int]], encoder: ItemEncoder
                     ) -> Dict[bytes, Dict[str, int]]:
    """Each user's items in normalised form (``encoder.normalize``: NFC, case folding; the form of
    the truth), counts of items that meet summed; items the encoder refuses are left out."""
    out: Dict[bytes, Dict[str, int]] = {}
    for user, items in users.items():
        counts: Dict[str, int] = collections.Counter()
        for item, count in items.items():
            try:
                counts[encoder.normalize(item)] += count
            except EncodingError:
                continue
        out[user] = dict(counts)
    return out


def one_item_per_user(users: Mapping[bytes, Mapping[str, int]], seed: Seed) -> List[Tuple[bytes, str]]:
    """``(user, item)`` rows, one per user that holds an item: its item drawn with probability
    ``count / total`` using the run's keyed uniform (round 1's ``choice_uniforms``), as a user
    draws the item it votes for. ``users`` are canonical user id bytes -> {item: count}."""
    rows = []
    several = []  # a user with one item takes it: only the others need their uniform
    for user, items in users.items():
        held = [item for item, count in items.items() if count > 0]
        if len(held) == 1:
            rows.append((user, held[0]))
        elif held:
            several.append(user)
    if several:
        uniforms = sampler_for_seed(seed).choice_uniforms(1, several).tolist()
        rows += [(user, choose_sequence(users[user], u)) for user, u in zip(several, uniforms)]
    return rows


def select_partitions(rows: Sequence[Tuple[bytes, str]], epsilon: float, delta: float) -> FrozenSet[str]:
    """The items PipelineDP's private partition selection keeps from ``(user, item)`` rows, at
    (ε, δ), one partition per user (``max_partitions_contributed = 1``; PipelineDP bounds any
    user with several rows to one of them), with the truncated geometric strategy.

    Raises:
      RivalUnavailableError: PipelineDP is not installed.
    """
    pipeline_dp = require_pipeline_dp()
    if not rows:  # PipelineDP refuses an empty collection; no user, nothing to keep
        return frozenset()
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=epsilon, total_delta=delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.SelectPartitionsParams(
        max_partitions_contributed=1,
        partition_selection_strategy=pipeline_dp.PartitionSelectionStrategy.TRUNCATED_GEOMETRIC)
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=operator.itemgetter(0),
                                            partition_extractor=operator.itemgetter(1))
    selected = engine.select_partitions(rows, params, extractors)
    accountant.compute_budgets()  # the LocalBackend is lazy: the budget is set before iterating
    return frozenset(selected)


@dataclasses.dataclass(frozen=True)
class PartitionRun:
    """One release: the items kept (sorted), the users that contributed, its time."""

    heavy_hitters: Tuple[str, ...]
    contributors: int
    seconds: float


def run(users: Mapping[bytes, Mapping[str, int]], epsilon: float, delta: float, seeds: Sequence[Seed],
        on_run: Callable[[int], None]) -> List[PartitionRun]:
    """One partition selection per run seed on normalised ``users`` (``normalised_users``).

    Raises:
      RivalUnavailableError: PipelineDP is not installed.
    """
    runs = []
    for index, seed in enumerate(seeds):
        started = time.monotonic()
        rows = one_item_per_user(users, seed)
        kept = select_partitions(rows, epsilon, delta)
        runs.append(PartitionRun(tuple(sorted(kept)), len(rows), time.monotonic() - started))
        on_run(index)
    return runs


def privacy_block(epsilon: float, delta: float, runs: int) -> dict:
    """The ``privacy`` of a PipelineDP configuration in ``evaluation.json``."""
    total = privacy.compose([(epsilon, delta)] * runs)
    return {
        "model": "central",
        "guarantee": ("(epsilon, delta)-DP with user-level adjacency: PipelineDP private partition "
                      f"selection ({STRATEGY}), one item per user, on raw records the server reads"),
        "epsilon": epsilon,
        "delta": delta,
        "strategy": STRATEGY,
        "holders_for_half": holders_for_half(epsilon, delta),
        "all_runs_composed": {"epsilon": total.epsilon, "delta": total.delta,
                              "note": "R runs on the same users are R releases (basic composition): evaluate on "
                                      "data whose privacy is not at stake"},
    }
