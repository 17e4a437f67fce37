"""Progress of a discovery's long jobs while they run: a pass-through step (``CountProgressDoFn``)
appends each batch's row count to a private local file and a ``ProgressMonitor`` thread of the
driver reads it about every second, reporting the rows done, the time elapsed and an estimate of
the time left (on a remote runner only the time elapsed); the census's total is estimated before
it runs (``estimate_records``). Counts are private: ``describe`` shows them only with
``--verbose``; ``TerminalBar`` draws the line in place.
"""

from __future__ import annotations

import bz2
import dataclasses
import lzma
import os
import sys
import tempfile
import threading
import time
import zlib
from typing import Callable, Iterable, List, Optional, TextIO, Tuple

import apache_beam as beam
import pyarrow.parquet as pq
import zstandard
from apache_beam.io.filesystems import FileSystems

from triehh_beam.io.streams import UNREADABLE_ERRORS, compression_of, infer_format
from triehh_beam.proto import state_pb2

__all__ = [
    "CountProgressDoFn",
    "Progress",
    "ProgressChannel",
    "ProgressMonitor",
    "TerminalBar",
    "describe",
    "estimate_records",
]

_HEAD_BYTES = 1 << 20  # of a text file, read to estimate its records
_SAMPLED_FILES = 8


class ProgressChannel:
    """A private local file (0600) a running job's steps append row counts to; ``rows()``
    totals what was appended so far. Delete it with ``close()``."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="triehh-progress-")
        os.close(fd)
        self._offset = 0
        self._rows = 0
        self._partial = b""

    def rows(self) -> int:
        """Rows reported so far (a line still being written is counted once complete)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return self._rows
        self._offset += len(data)
        data = self._partial + data
        complete, _, self._partial = data.rpartition(b"\n")
        if complete:
            self._rows += sum(int(line) for line in complete.split(b"\n") if line)
        return self._rows

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


class CountProgressDoFn(beam.DoFn):
    """Passes every element through, appending its row count (``num_rows``, of an Arrow batch or
    table, or of a pair's second item) to a ``ProgressChannel``'s file. A worker that cannot open
    the file (another machine) reports nothing and passes elements through all the same."""

    def __init__(self, path: str):
        self._path = path

    def setup(self):
        try:
            self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            self._fd = None

    def process(self, element):
        if self._fd is not None:
            table = element[1] if isinstance(element, tuple) else element
            try:
                os.write(self._fd, b"%d\n" % table.num_rows)
            except OSError:
                self._fd = None
        yield element

    def teardown(self):
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None


@dataclasses.dataclass(frozen=True)
class Progress:
    """Where a running job is.

    Attributes:
      phase: what runs ("census", "sampling", "round 3", "rounds 3-10").
      done: rows done so far (records read, or sampled users voted), private.
      total: rows in all, if known (``estimated``: approximately), private.
      unit: what a row is ("records", "users").
      elapsed: seconds since the job started.
      remaining: estimated seconds left, when the rate and the total are known.
      finished: the job has ended (a terminal clears its line).
    """

    phase: str
    done: int
    total: Optional[int]
    estimated: bool
    unit: str
    elapsed: float
    remaining: Optional[float]
    finished: bool = False

    @property
    def fraction(self) -> Optional[float]:
        """Share done, below 1 until the rows are all read (an estimate can be short)."""
        if not self.total:
            return None
        return min(self.done / self.total, 1.0 if not self.estimated else 0.99)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def describe(progress: Progress, private: bool = False, width: int = 24) -> str:
    """One line: the phase, a bar with the share done, the time elapsed and left; with
    ``private``, also the rows done and in all, marked private (they are counts)."""
    fraction = progress.fraction
    line = f"{progress.phase}:"
    if fraction is not None:
        filled = int(fraction * width)
        line += f" [{'#' * filled}{'.' * (width - filled)}] {fraction:4.0%}"
    line += f" {_clock(progress.elapsed)} elapsed"
    if progress.remaining is not None:
        line += f", about {_clock(progress.remaining)} left"
    elif fraction is not None and progress.done >= (progress.total or 0):
        line += ", finishing"
    if private:
        total = "" if progress.total is None else f" of {'~' if progress.estimated else ''}{progress.total:,}"
        line += f" [private: {progress.done:,}{total} {progress.unit}]"
    return line


class ProgressMonitor:
    """While a job runs (a context manager around it), reports its ``Progress`` about every
    ``interval`` seconds from a thread, and once more, ``finished``, when it ends.

    Args:
      phase, total, estimated, unit: as ``Progress``.
      report: called with each ``Progress``; an exception stops the reports, not the job.
      channel: where the job's steps append their rows (None: the elapsed time only).
      interval: seconds between reports.
      clock: ``time.monotonic``, injectable for tests.
    """

    def __init__(self, phase: str, total: Optional[int], estimated: bool, unit: str,
                 report: Callable[[Progress], None], channel: Optional[ProgressChannel],
                 interval: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._phase, self._total, self._estimated, self._unit = phase, total, estimated, unit
        self._report = report
        self._channel = channel
        self._interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"triehh-progress-{phase}", daemon=True)
        self._started = 0.0
        self._first = None  # (time, rows) when rows were first seen: the rate excludes start-up
        self._failed = False

    def snapshot(self, finished: bool = False) -> Progress:
        now = self._clock()
        done = self._channel.rows() if self._channel is not None else 0
        if self._first is None and done:
            self._first = (now, done)
        remaining = None
        if self._first is not None and self._total and done < self._total:
            if now > self._first[0]:
                rate = (done - self._first[1]) / (now - self._first[0])
            else:  # rows seen for the first time: their rate counts the job's start-up too
                rate = done / max(now - self._started, 1e-9)
            if rate > 0:
                remaining = (self._total - done) / rate
        return Progress(self._phase, done, self._total, self._estimated, self._unit,
                        now - self._started, remaining, finished)

    def _send(self, progress: Progress) -> None:
        if self._failed:
            return
        try:
            self._report(progress)
        except Exception:  # a reporter's failure must not fail the job it reports on
            self._failed = True

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._send(self.snapshot())

    def __enter__(self) -> "ProgressMonitor":
        self._started = self._clock()
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()
        self._send(self.snapshot(finished=True))


class TerminalBar:
    """Draws progress lines (``describe``) on a stream: in place on a terminal, about once a
    second; elsewhere (a log file, a pipe) one line every ``log_interval`` seconds, so that a long
    job is never silent and a short one adds nothing. ``None`` ends a job's line."""

    def __init__(self, stream: Optional[TextIO] = None, log_interval: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._log_interval = log_interval
        self._clock = clock
        self._shown = False
        self._last_logged: Optional[float] = None

    def __call__(self, line: Optional[str]) -> None:
        if self._tty:
            if line is None:
                if self._shown:
                    self._stream.write("\r\x1b[K")
                    self._shown = False
            else:
                self._stream.write("\r" + line + "\x1b[K")
                self._shown = True
            self._stream.flush()
            return
        now = self._clock()
        if line is None:
            self._last_logged = None
            return
        if self._last_logged is None:
            self._last_logged = now  # a job's first line waits one interval: short jobs print none
            return
        if now - self._last_logged >= self._log_interval:
            self._stream.write(line + "\n")
            self._stream.flush()
            self._last_logged = now


def _text_records(path: str, format: str, size: int) -> Tuple[float, bool]:
    """(Records of a JSON Lines or CSV file, from the lines of its first MiB (decompressed);
    whether that is all of the file)."""
    compression = compression_of(path, format)
    with FileSystems.open(path, "application/octet-stream", compression_type="uncompressed") as f:
        head = f.read(_HEAD_BYTES)
    if not head:
        return 0.0, True
    if compression is not None:
        decompressor = {
            "gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
            "deflate": zlib.decompressobj,
            "bzip2": bz2.BZ2Decompressor,
            "lzma": lzma.LZMADecompressor,
            "zstd": lambda: zstandard.ZstdDecompressor().decompressobj(),
        }[compression]()
        text = decompressor.decompress(head)
    else:
        text = head
    if len(head) < size:  # part of the file: its complete lines, scaled to the whole
        return text.count(b"\n") * size / len(head), False
    lines = text.count(b"\n") + (1 if text and not text.endswith(b"\n") else 0)
    # A CSV file's header is no record; blank or bad lines are counted (an estimate).
    return float(max(lines - (format == "csv"), 0)), False


def _file_records(entry: state_pb2.InputFile, format: Optional[str]) -> Tuple[float, bool]:
    """(A file's records, exact or estimated; whether exact)."""
    kind = format or infer_format(entry.path)
    if kind == "parquet":
        with FileSystems.open(entry.path, "application/octet-stream", compression_type="uncompressed") as f:
            return float(pq.ParquetFile(f).metadata.num_rows), True
    return _text_records(entry.path, kind, entry.size_bytes)


def estimate_records(files: Iterable[state_pb2.InputFile], format: Optional[str] = None) -> Tuple[Optional[int], bool]:
    """About how many records ``files`` (an input snapshot) hold, and whether that is exact:
    exact from Parquet footers, estimated from the first MiB of JSON Lines and CSV files, up to 8
    files spread over the list, scaled to the total size of all; (None, False) if no file could
    be sampled."""
    files = list(files)
    if not files:
        return 0, True
    step = max(1, len(files) // _SAMPLED_FILES)
    sampled: List[state_pb2.InputFile] = files[::step][:_SAMPLED_FILES]
    records = size = 0.0
    exact = len(sampled) == len(files)
    for entry in sampled:
        try:
            counted, whole = _file_records(entry, format)
        except (ValueError, *UNREADABLE_ERRORS):  # an estimate only: the census refuses such files
            exact = False
            continue
        records += counted
        size += entry.size_bytes
        exact = exact and whole
    total = sum(f.size_bytes for f in files)
    if exact:
        return int(records), True
    if not size:
        return None, False
    return int(round(records * total / size)), False
