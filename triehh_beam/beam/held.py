"""The per-worker memory budget of a job's bounded steps, in rows (records, candidates, sample
rows, fingerprints, or a group of a round's prefixes) one step holds at once (``DEFAULT_BUDGET``), and
what each such step reports of it: ``HeldRows``, a Beam distribution ``rows_held`` in the product's
namespace whose maximum is the most rows any DoFn instance held (a test or the operator report
checks it against the budget), and beside it the peak resident memory of the worker process it ran
in, one distribution per worker, ``worker_peak_rss_mb.<host>:<pid>`` (``worker_peak_mb``).
"""

from __future__ import annotations

import os
import socket
import sys

from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE

__all__ = ["DEFAULT_BUDGET", "HELD_METRIC", "HeldRows", "PEAK_METRIC", "check_budget", "worker_peak_mb"]

# 4 Mi rows: a few hundred MB of candidate rows, 32 MiB of census fingerprints.
DEFAULT_BUDGET = 1 << 22
HELD_METRIC = "rows_held"
# Followed by ".<host>:<pid>": one worker process's peak resident memory, in MB.
PEAK_METRIC = "worker_peak_rss_mb"


def worker_peak_mb() -> int:
    """This process's peak resident memory so far, in MB (``ru_maxrss``); 0 where the platform
    has no ``resource`` module."""
    try:
        import resource
    except ImportError:  # not a Unix
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return int(peak / (1 << 20 if sys.platform == "darwin" else 1 << 10))


def check_budget(budget: int) -> int:
    """``budget`` if it is a usable budget (at least 2 rows: the steps split it in halves)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 2:
        raise ValueError(f"the worker budget must be an integer of at least 2 rows, got {budget!r}")
    return budget


class HeldRows:
    """Reports the rows a DoFn of bounded step ``stage`` holds (create it in ``setup``, in the
    worker): ``held(n)`` records one peak as ``rows_held`` and ``rows_held.<stage>`` (which step
    held it: the operator report's ``largest_rows_held.<stage>``), and the worker process's peak
    memory so far."""

    def __init__(self, stage: str):
        if not stage or not stage.replace("_", "").isalnum():
            raise ValueError(f"a bounded step's name is letters, digits and underscores, got {stage!r}")
        self._distribution = Metrics.distribution(METRICS_NAMESPACE, HELD_METRIC)
        self._stage = Metrics.distribution(METRICS_NAMESPACE, f"{HELD_METRIC}.{stage}")
        worker = f"{socket.gethostname()}:{os.getpid()}"
        self._peak = Metrics.distribution(METRICS_NAMESPACE, f"{PEAK_METRIC}.{worker}")

    def held(self, rows: int) -> None:
        self._distribution.update(int(rows))
        self._stage.update(int(rows))
        self._peak.update(worker_peak_mb())
