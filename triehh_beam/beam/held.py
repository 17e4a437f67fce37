"""The per-worker memory budget of a job's bounded steps, in rows (records, candidates, sample
rows or fingerprints) one step holds at once (``DEFAULT_BUDGET``), and what each such step reports
of it: ``HeldRows``, a Beam distribution ``rows_held`` in the product's namespace whose maximum is
the most rows any DoFn instance held (a test or the operator report checks it against the budget).
"""

from __future__ import annotations

from apache_beam.metrics import Metrics

from triehh_beam.beam.transforms import METRICS_NAMESPACE

__all__ = ["DEFAULT_BUDGET", "HELD_METRIC", "HeldRows", "check_budget"]

# 4 Mi rows: a few hundred MB of candidate rows, 32 MiB of census fingerprints.
DEFAULT_BUDGET = 1 << 22
HELD_METRIC = "rows_held"


def check_budget(budget: int) -> int:
    """``budget`` if it is a usable budget (at least 2 rows: the steps split it in halves)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 2:
        raise ValueError(f"the worker budget must be an integer of at least 2 rows, got {budget!r}")
    return budget


class HeldRows:
    """Reports the rows a DoFn holds (create it in ``setup``); ``held(n)`` records one peak."""

    def __init__(self):
        self._distribution = Metrics.distribution(METRICS_NAMESPACE, HELD_METRIC)

    def held(self, rows: int) -> None:
        self._distribution.update(int(rows))
