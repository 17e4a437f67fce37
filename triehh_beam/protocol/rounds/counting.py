"""Vote counting and threshold pruning, the pure core of the rounds' prune combiner
(``beam.rounds.sampled_rounds.MergeAndPruneCombineFn``): ``PrefixCounter`` accumulates per-prefix vote
counts and ``extract_kept`` is the only way out, returning the prefixes with at least ``theta``
votes without their counts, so counts below the threshold never leave the combine step (not as
output, state, logs or metrics)."""

from __future__ import annotations

from typing import Dict, Iterable, List

from triehh_beam.protocol.items.encoding import Units

__all__ = ["PrefixCounter"]


class PrefixCounter:
    """create / add / merge / extract for vote counts, with a threshold on the way out.

    Args:
      theta: the threshold; prefixes with at least ``theta`` votes are kept.
    """

    def __init__(self, theta: int):
        if isinstance(theta, bool) or not isinstance(theta, int) or theta < 1:
            raise ValueError(f"theta must be an integer >= 1, got {theta!r}")
        self.theta = theta

    @staticmethod
    def create() -> Dict[Units, int]:
        return {}

    @staticmethod
    def add(counts: Dict[Units, int], prefix: Units) -> Dict[Units, int]:
        counts[prefix] = counts.get(prefix, 0) + 1
        return counts

    @staticmethod
    def merge(accumulators: Iterable[Dict[Units, int]]) -> Dict[Units, int]:
        accumulators = iter(accumulators)
        merged = dict(next(accumulators, {}))
        for counts in accumulators:
            for prefix, count in counts.items():
                merged[prefix] = merged.get(prefix, 0) + count
        return merged

    def extract_kept(self, counts: Dict[Units, int]) -> List[Units]:
        """The prefixes with at least ``theta`` votes, sorted; no counts."""
        return sorted(prefix for prefix, count in counts.items() if count >= self.theta)
