"""What the ways of running a discovery share around their Beam jobs (``discover --window`` and
``stream``, ``federated serve``; ``discover``'s driver checks its locations the same way): the
locations checked before anything is made or charged (``check_locations``), the job's secret seed
(``job_seed``), the streaming pipeline (``stream_pipeline``) and cancelling a running job
(``cancel_job``)."""

from __future__ import annotations

import os
import threading
from typing import Callable, Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from triehh_beam.beam import runners
from triehh_beam.job.release import lifecycle as release
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.settings.paths import canonical_path
from triehh_beam.job.state import cas

__all__ = ["cancel_job", "check_locations", "job_seed", "stream_pipeline"]


def check_locations(config: DiscoveryConfig, options: Optional[PipelineOptions] = None) -> None:
    """``release.check_locations`` of the job's output (canonical, as it is published) and state
    directory, given the options of the jobs that write there (None: not checked against a
    runner). Raises LocationError (one line), before anything is made or charged."""
    release.check_locations(canonical_path(config.output_dir), config.resolved_state_dir, options)


def job_seed(config: DiscoveryConfig, name: str) -> bytes:
    """The job's secret seed: ``--seed-file``'s, else one drawn on the job's first run and kept,
    private, in its state directory (``name``, created once by compare-and-swap), so a
    restarted job draws the same samples and finds its earlier charges, as a batch job does."""
    if config.seed is not None:
        return config.seed
    root = config.resolved_state_dir
    if cas.is_local(root):
        cas.make_private_dir(root)
    return cas.read_or_create(cas.cas_store_for(root), name, lambda: os.urandom(32))


def stream_pipeline(options: PipelineOptions, log_dir: Optional[str] = None) -> beam.Pipeline:
    """A streaming pipeline: Beam's streaming DirectRunner in process by default (never the
    Prism download), else the runner the options name (Prism: the local binary, its own log
    lines in ``log_dir``, the state directory: ``runners.make_pipeline``)."""
    options.view_as(StandardOptions).streaming = True
    if runners.uses_in_process_runner(options):
        from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

        return beam.Pipeline(runner=BundleBasedDirectRunner(), options=options)
    return runners.make_pipeline(options, log_dir)


def cancel_job(result, wait_seconds: float, nudge: Optional[Callable[[], None]] = None) -> str:
    """Cancels a running job and waits at most ``wait_seconds`` for it; returns ``"CANCELLED"``.

    The streaming DirectRunner's cancel waits for its current Pub/Sub pull (up to 30 s on a
    quiet subscription), so it runs in a daemon thread. ``nudge``, called once the cancel is under
    way, may end that pull at once (a message the job ignores); a nudge that fails is ignored: the
    wait is bounded without it."""
    canceller = threading.Thread(target=result.cancel, daemon=True, name="triehh-cancel")
    canceller.start()
    if nudge is not None:
        try:
            nudge()
        except Exception:  # the job's result does not depend on the nudge
            pass
    canceller.join(wait_seconds)
    return "CANCELLED"
