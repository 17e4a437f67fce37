"""The one Beam metrics namespace of the product, ``triehh``: every counter and distribution a step
reports is declared in it, and a job reads back only what is there (``job.batch.jobs.job_counters``)."""

from __future__ import annotations

__all__ = ["METRICS_NAMESPACE"]

METRICS_NAMESPACE = "triehh"
