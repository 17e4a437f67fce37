"""The federated server's streaming Beam job: ``LogReports`` appends every message of the reports
subscription to the job's private report log, one JSON-lines file per bundle published
atomically, before anything is decided about it; the round loop (``job.federated.serve``) reads the
log and counts. Deciding nothing here means a restart, a retried bundle or a redelivery loses
nothing and changes nothing (a repeated line has the same message id)."""

from __future__ import annotations

import base64
import datetime
import json
import uuid
from typing import List

import apache_beam as beam
from apache_beam.metrics import Metrics

from triehh_beam.beam.metrics import METRICS_NAMESPACE
from triehh_beam.beam.pubsub.messages import publish_file
from triehh_beam.io.pubsub.federated_attributes import KIND, SERVER_STOP

__all__ = ["LogReports", "log_line"]


def log_line(message_id: str, publish_time: str, attributes: dict, data: bytes) -> str:
    """One line of the report log (what ``job.federated.log`` reads back)."""
    return json.dumps({"id": message_id, "time": publish_time, "attributes": attributes or {},
                       "data": base64.b64encode(data).decode("ascii")}, sort_keys=True)


def _publish_time(message) -> str:
    when = getattr(message, "publish_time", None)
    if when is None:
        return ""
    if isinstance(when, datetime.datetime):
        return when.astimezone(datetime.timezone.utc).isoformat()
    return str(when)


class _AppendDoFn(beam.DoFn):
    """Collects a bundle's messages; writes them as one log file at the bundle's end."""

    def __init__(self, log_dir: str):
        super().__init__()
        self._log_dir = log_dir.rstrip("/")
        self._logged = Metrics.counter(METRICS_NAMESPACE, "federated.messages_logged")

    def start_bundle(self) -> None:
        self._lines: List[str] = []

    def process(self, message) -> None:
        attributes = dict(getattr(message, "attributes", None) or {})
        if attributes.get(KIND) == SERVER_STOP:
            return  # the server ending this job's pull: not a report
        data = message.data if hasattr(message, "data") else bytes(message)
        message_id = getattr(message, "message_id", None) or uuid.uuid4().hex
        self._lines.append(log_line(str(message_id), _publish_time(message), attributes, data or b""))

    def finish_bundle(self) -> None:
        if self._lines:
            publish_file(self._log_dir, "".join(line + "\n" for line in self._lines).encode("utf-8"))
            self._logged.inc(len(self._lines))
        self._lines = []


class LogReports(beam.PTransform):
    """Appends every message to the report log in ``log_dir`` (a private directory: a local path
    or any Beam filesystem prefix). Output: an empty PCollection (the files are the result)."""

    def __init__(self, log_dir: str):
        super().__init__()
        if not isinstance(log_dir, str) or not log_dir:
            raise ValueError(f"the report log must be a non-empty location, got {log_dir!r}")
        self._log_dir = log_dir

    def expand(self, messages: beam.PCollection) -> beam.PCollection:
        return messages | "AppendToReportLog" >> beam.ParDo(_AppendDoFn(self._log_dir))
