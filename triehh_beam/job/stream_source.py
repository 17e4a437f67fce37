"""Which Pub/Sub read a stream uses and what it is told of the windows (docs/stream_input.md):
Dataflow's native ``ReadFromPubSub``; Beam's in-process streaming DirectRunner, the same
native read (that runner cannot advance a splittable DoFn's watermark); every other runner
(Prism, Flink, a portable job service), the product's ``ReadPubsubMessages``, whose messages are
acknowledged once their window's operator report is committed, and whose status (lag, messages
held) is kept in the state directory for the driver to show."""

from __future__ import annotations

from typing import Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from triehh_beam.beam import runners
from triehh_beam.job import outputs

__all__ = [
    "STATUS_NAME",
    "SourceStatus",
    "WindowSettled",
    "check_subscription",
    "read_messages",
    "read_status",
    "status_path",
    "uses_own_read",
]

STATUS_NAME = "source_status.json"


def uses_own_read(options: PipelineOptions) -> bool:
    """Whether a stream on these options reads with ``ReadPubsubMessages`` (every runner but
    Dataflow and the in-process DirectRunner)."""
    runner = options.view_as(StandardOptions).runner or ""
    if runners.uses_in_process_runner(options) or runner in ("BundleBasedDirectRunner", "SwitchingDirectRunner"):
        return False
    return "Dataflow" not in runner


class WindowSettled:
    """``settled(start)``: True once the window starting at ``start`` (microseconds) has its
    operator report (released, empty or withheld: its result committed), or is outside the
    declared range (its records are dropped). Picklable."""

    def __init__(self, job):
        self._job = job

    def __call__(self, start: int) -> bool:
        return not self._job.declares(start) or FileSystems.exists(self._job.report_path(start))


class SourceStatus:
    """Writes the source's status (message counts and lag, private) to ``path``. Picklable."""

    def __init__(self, path: str):
        self._path = path

    def __call__(self, status: dict) -> None:
        outputs.write_json(self._path, status, private=True)


def status_path(job) -> str:
    return FileSystems.join(job.config.resolved_state_dir, STATUS_NAME)


def read_status(job) -> Optional[dict]:
    """The source's last status, or None (none written: the native read, or not yet)."""
    return outputs.read_json(status_path(job))


def check_subscription(subscription: str) -> beam.PTransform:
    """Beam's native read of ``subscription``; raises ValueError (Beam's check of the names)."""
    from apache_beam.io.gcp.pubsub import ReadFromPubSub

    return ReadFromPubSub(subscription=subscription, with_attributes=True)


def read_messages(options: PipelineOptions, job, subscription: str,
                  timestamp_attribute: Optional[str]) -> beam.PTransform:
    """The read of ``subscription`` for the runner ``options`` name (see the module)."""
    from triehh_beam.beam.pubsub_source import ReadPubsubMessages

    if not uses_own_read(options):
        return check_subscription(subscription)
    return ReadPubsubMessages(subscription, job.windows, tuple(job.config.windows), timestamp_attribute,
                              WindowSettled(job), SourceStatus(status_path(job)))
