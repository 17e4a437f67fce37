"""Which Pub/Sub read a stream uses and what it is told of the windows (docs/stream_input.md):
Dataflow's native ``ReadFromPubSub``; Beam's in-process streaming DirectRunner, the same
native read (that runner cannot advance a splittable DoFn's watermark); every other runner
(Prism, Flink, a portable job service), the product's ``ReadPubsubMessages``, whose messages are
acknowledged once their window's operator report is committed, and whose status (lag, messages
held) is kept in the state directory for the driver to show. How many messages a stream read,
holds or left unread is a function of the private number of records: the console names them
only under ``--verbose``, marked private, and the state directory keeps them."""

from __future__ import annotations

import time
from typing import Callable, Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from triehh_beam.beam import runners
from triehh_beam.beam.windows.windows import rfc3339
from triehh_beam.job.release import outputs

__all__ = [
    "STATUS_NAME",
    "UNREAD_NAME",
    "LagWatch",
    "SourceStatus",
    "WindowSettled",
    "check_subscription",
    "describe_unread",
    "read_messages",
    "read_status",
    "status_path",
    "unread_path",
    "uses_own_read",
]

STATUS_NAME = "source_status.json"
#: What a stopped stream left in its subscription (private, in the state directory).
UNREAD_NAME = "unread_messages.json"


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
    from triehh_beam.beam.pubsub.source import ReadPubsubMessages

    if not uses_own_read(options):
        return check_subscription(subscription)
    return ReadPubsubMessages(subscription, job.windows, tuple(job.config.windows), timestamp_attribute,
                              WindowSettled(job), SourceStatus(status_path(job)))


class LagWatch:
    """Called at each poll of the driver: says (through ``progress``, at most once a minute) when
    the source's read of the subscription is behind the clock by more than a window and its
    allowed lateness; how far, and how many messages it holds, only when ``verbose`` (private:
    both depend on how many records there are)."""

    def __init__(self, job, progress: Callable[[str], None], clock: Callable[[], float] = time.time,
                 verbose: bool = False):
        self._job = job
        self._progress = progress
        self._clock = clock
        self._verbose = verbose
        self._said_at: Optional[float] = None
        self._since = clock()

    def __call__(self) -> None:
        status = read_status(self._job)
        if not status or status.get("read_through") is None or status.get("updated", 0) < self._since:
            return  # none yet (a previous run's is not this one's)
        now = self._clock()
        behind = now - status["read_through"]
        limit = (self._job.windows.size_micros + self._job.windows.lateness_micros) / 1e6
        if behind > limit and (self._said_at is None or now - self._said_at >= 60):
            self._said_at = now
            line = "behind: the subscription's read is more than a window and its lateness behind the clock"
            if self._verbose:
                through = rfc3339(int(status["read_through"] * 1e6) // 1000 * 1000)
                line += (f" [private: read through {through}, {behind:,.0f} s behind; "
                         f"{status.get('messages_held', 0):,} messages read and held until their windows are released]")
            else:
                line += " (how far, and how much it holds: --verbose, private)"
            self._progress(line)


def unread_path(job) -> str:
    return FileSystems.join(job.config.resolved_state_dir, UNREAD_NAME)


def describe_unread(options: PipelineOptions, job, subscription: str, verbose: bool = False,
                    seconds: float = 5.0) -> Optional[str]:
    """What a stopped stream says of its subscription: the messages still unread (counted for up
    to ``seconds``, nothing acknowledged) and those its read held unacknowledged (delivered again
    to the next run) stay there for the next run. Their counts are private: written to
    ``UNREAD_NAME`` in the state directory, and in the line only when ``verbose`` (marked
    private). None on Dataflow, whose service reports its subscription's backlog."""
    from google.api_core import exceptions as api_exceptions

    from triehh_beam.io.pubsub import pull as pubsub_pull
    from triehh_beam.io.pubsub.client import PubsubUnavailableError

    if "Dataflow" in (options.view_as(StandardOptions).runner or ""):
        return None
    try:
        count, complete = pubsub_pull.count_backlog(subscription, seconds=seconds)
    except (PubsubUnavailableError, api_exceptions.GoogleAPICallError) as e:
        return f"could not count the messages left unread in {subscription}: {type(e).__name__}: {e}"
    held = (read_status(job) or {}).get("messages_held", 0) if uses_own_read(options) else 0
    path = unread_path(job)
    outputs.write_json(path, {"subscription": subscription, "messages_unread": count, "complete": complete,
                              "messages_read_not_acknowledged": held,
                              "note": "private: how many messages there are depends on the records"}, private=True)
    text = f"unread messages stay in {subscription} for the next run"
    if not verbose:
        return text + f" (how many is private: --verbose, or {path})"
    text += f" [private: {'' if complete else 'at least '}{count:,} left unread"
    if held:
        text += (f", and {held:,} read but not acknowledged (their windows were not released; Pub/Sub delivers "
                 "them again to the next run, which counts each once)")
    return text + "]"
