"""Reading the federated server's report log (``beam.federated.LogReports``) as it grows.

``ReportLog.new_files()`` lists the log files not handed out yet, in the order they were
written (their names sort by time); ``read(file)`` yields each message body once per Pub/Sub
message id across the whole log: a line repeated by a retried bundle or a redelivered message
is counted in ``redelivered`` and not yielded again, so each message is classified exactly once.
"""

from __future__ import annotations

import base64
import json
from typing import Iterable, Iterator, List, Set

from apache_beam.io.filesystems import FileSystems

__all__ = ["ReportLog"]


class ReportLog:
    """The log in ``directory``; ``assigned`` are files an earlier run already handed out."""

    def __init__(self, directory: str, assigned: Iterable[str] = ()):
        self.directory = directory
        self._handed_out: Set[str] = set(assigned)
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

    def new_files(self) -> List[str]:
        """Files not handed out yet, oldest first (each is handed out once)."""
        fresh = [name for name in self.list_files() if name not in self._handed_out]
        self._handed_out.update(fresh)
        return fresh

    def read(self, name: str) -> Iterator[bytes]:
        """The bodies of the messages in file ``name`` not read before (by message id)."""
        with FileSystems.open(FileSystems.join(self.directory, name), compression_type="uncompressed") as f:
            text = f.read().decode("utf-8")
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                message_id, data = entry["id"], base64.b64decode(entry["data"], validate=True)
            except (ValueError, KeyError, TypeError):
                self.unreadable_lines += 1  # never written by LogReports: counted, not guessed at
                continue
            if message_id in self._ids:
                self.redelivered += 1
                continue
            self._ids.add(message_id)
            yield data

    def remember(self, names: Iterable[str]) -> None:
        """Marks the message ids of files read by an earlier run as read (on resume)."""
        for name in names:
            self._handed_out.add(name)
            for _ in self.read(name):
                pass

    def delete(self) -> None:
        """Removes the log (raw votes: kept only while the job runs)."""
        if FileSystems.exists(self.directory):
            FileSystems.delete([self.directory])
