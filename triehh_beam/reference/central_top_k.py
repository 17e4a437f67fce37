"""A PipelineDP-style central-DP top-K, the baseline the frequency estimates are compared with
(docs/evaluation.md, "Frequency estimates"): a trusted server counts every item over all users,
each user contributing to at most one item (``max_partitions_contributed = 1``,
``max_contributions_per_partition = 1``; the item drawn uniformly among the user's, as
PipelineDP's contribution bounding samples), keeps the items whose count passes private
partition selection by Laplace thresholding, and releases each kept item's count with Laplace
noise. The budget is split as PipelineDP's ``NaiveBudgetAccountant`` splits it between the two
mechanisms of a COUNT with private partitions: half of epsilon each, all of delta to the
selection. Laplace thresholding (PipelineDP's ``PartitionSelectionStrategy.LAPLACE_THRESHOLDING``,
from Google's differential-privacy library, ``LaplacePartitionSelection``; Wilson et al.,
"Differentially Private SQL with Bounded User Contribution", PoPETs 2020) keeps an item when
``users + Laplace(1 / epsilon_s) > 1 - ln(2 delta) / epsilon_s``, which is
(epsilon_s, delta)-DP. Noise is drawn with numpy's generator from a public evaluation seed: an
evaluation baseline, not a release mechanism, that runs without PipelineDP (an optional dependency,
which ``reference.pipelinedp_rival`` runs for ``triehh evaluate --rivals pipelinedp``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Hashable, List, Mapping, Tuple

import numpy as np

__all__ = ["CentralRelease", "central_top_k", "laplace_threshold"]


def laplace_threshold(epsilon: float, delta: float) -> float:
    """Laplace thresholding's threshold for one partition per user: ``1 - ln(2 delta) / epsilon``.

    Raises:
      ValueError: epsilon <= 0, or delta outside (0, 0.5].
    """
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    if not 0 < delta <= 0.5:
        raise ValueError(f"delta must be in (0, 0.5], got {delta}")
    return 1 - math.log(2 * delta) / epsilon


@dataclasses.dataclass(frozen=True)
class CentralRelease:
    """What the central top-K releases.

    Attributes:
      kept: every item that passed partition selection, with its noisy count, largest first.
      epsilon_selection, epsilon_count: the two halves of epsilon.
      threshold: the selection threshold (users).
      half_width: the 95% interval of a released count, ``ln(20) / epsilon_count`` (Laplace).
    """

    kept: Tuple[Tuple[Hashable, float], ...]
    epsilon_selection: float
    epsilon_count: float
    threshold: float
    half_width: float

    def top(self, k: int) -> List[Hashable]:
        return [item for item, _ in self.kept[:k]]


def central_top_k(users: Mapping[Hashable, Mapping[Hashable, int]], epsilon: float, delta: float,
                  rng: np.random.Generator, selection_share: float = 0.5) -> CentralRelease:
    """The central release for a population of user -> {item: count}, at (epsilon, delta).

    Args:
      users: each user's items (counts only decide which items it holds).
      epsilon, delta: the whole release's budget; ``selection_share`` of epsilon (and all of
        delta) selects partitions, the rest noises the counts.
      rng: the noise and the contribution-bounding draws.

    Raises:
      ValueError: bad budgets.
    """
    if not 0 < selection_share < 1:
        raise ValueError(f"selection_share must be in (0, 1), got {selection_share}")
    epsilon_selection, epsilon_count = epsilon * selection_share, epsilon * (1 - selection_share)
    threshold = laplace_threshold(epsilon_selection, delta)
    counts: dict = {}
    for held in users.values():
        items = sorted((item for item, count in held.items() if count > 0), key=repr)
        if items:
            item = items[int(rng.integers(len(items)))] if len(items) > 1 else items[0]
            counts[item] = counts.get(item, 0) + 1
    items = list(counts)
    exact = np.array([counts[item] for item in items], dtype=np.float64)
    selected = exact + rng.laplace(0.0, 1.0 / epsilon_selection, size=len(items)) > threshold
    noisy = exact + rng.laplace(0.0, 1.0 / epsilon_count, size=len(items))
    kept = sorted(((items[i], float(noisy[i])) for i in np.flatnonzero(selected)), key=lambda pair: -pair[1])
    return CentralRelease(tuple(kept), epsilon_selection, epsilon_count, threshold, math.log(20) / epsilon_count)
