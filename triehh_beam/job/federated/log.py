"""Reading the federated server's report log (``beam.pubsub.federated.LogReports``) as it grows:
``ReportLog.read_new()`` returns each Pub/Sub message once across the whole log (a repeat is
counted in ``redelivered``), as a ``LoggedMessage`` with the time Pub/Sub accepted it, which
decides its round, so the assignment is the same on every run and every resume.
"""

from __future__ import annotations

import base64
import datetime
import json
from typing import Callable, List, NamedTuple, Set

from apache_beam.io.filesystems import FileSystems

__all__ = ["LoggedMessage", "ReportLog", "count_until"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class LoggedMessage(NamedTuple):
    """One message of the log: publish time (microseconds since the epoch), id, body."""

    time_micros: int
    message_id: str
    data: bytes


def count_until(pool: List[LoggedMessage], close: int, add: Callable[[bytes], object]) -> List[LoggedMessage]:
    """Gives ``add`` the body of every message of ``pool`` published by ``close`` (microseconds),
    in publish order; returns the messages published after it (the next close's)."""
    ordered = sorted(pool, key=lambda m: (m.time_micros, m.message_id))
    for message in ordered:
        if message.time_micros <= close:
            add(message.data)
    return [m for m in ordered if m.time_micros > close]


def _micros(when: datetime.datetime) -> int:
    return (when - _EPOCH) // datetime.timedelta(microseconds=1)


def _file_time(name: str) -> int:
    """The write time in a log file's name (``<%Y%m%dT%H%M%S.%fZ>-<random>.jsonl``)."""
    stamp = datetime.datetime.strptime(name.split("-", 1)[0], "%Y%m%dT%H%M%S.%fZ")
    return _micros(stamp.replace(tzinfo=datetime.timezone.utc))


class ReportLog:
    """The log in ``directory``."""

    def __init__(self, directory: str):
        self.directory = directory
        self._read_files: Set[str] = set()
        self._ids: Set[str] = set()
        self.redelivered = 0
        self.unreadable_lines = 0

    @property
    def messages(self) -> int:
        """Distinct messages read so far."""
        return len(self._ids)

    def list_files(self) -> List[str]:
        if not FileSystems.exists(self.directory):
            return []
        pattern = FileSystems.join(self.directory, "*.jsonl")
        names = [m.path.rsplit("/", 1)[-1] for match in FileSystems.match([pattern]) for m in match.metadata_list]
        return sorted(n for n in names if not n.startswith("."))

    def read_new(self) -> List[LoggedMessage]:
        """The messages of the files not read before (each file is read once), new ids only."""
        out: List[LoggedMessage] = []
        for name in self.list_files():
            if name in self._read_files:
                continue
            self._read_files.add(name)
            out.extend(self._read(name))
        return out

    def _read(self, name: str) -> List[LoggedMessage]:
        with FileSystems.open(FileSystems.join(self.directory, name), compression_type="uncompressed") as f:
            text = f.read().decode("utf-8")
        fallback = _file_time(name)
        out = []
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                message_id, data = entry["id"], base64.b64decode(entry["data"], validate=True)
                when = _micros(datetime.datetime.fromisoformat(entry["time"])) if entry.get("time") else fallback
            except (ValueError, KeyError, TypeError):
                self.unreadable_lines += 1  # never written by LogReports: counted, not guessed at
                continue
            if message_id in self._ids:
                self.redelivered += 1
                continue
            self._ids.add(message_id)
            out.append(LoggedMessage(when, str(message_id), data))
        return out

    def delete(self) -> None:
        """Removes the log (raw votes: kept only while the job runs)."""
        if FileSystems.exists(self.directory):
            FileSystems.delete([self.directory])
