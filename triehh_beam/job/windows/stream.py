"""Runs a windowed discovery, ``triehh stream`` (Pub/Sub, unbounded) or ``triehh discover
--window`` (files, bounded), as one Beam graph: records, event time, ``GateLateRecords``, then
``job.windows.windowed``'s per-window discovery, rejected and late records to the dead letter. The driver
prints one line per closed window and stops after ``--stop-after-windows`` or once every declared
window has closed, keeping every window already released."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam import runners
from triehh_beam.beam.read import RECORDS_TAG, REJECTED_TAG, WriteDeadLetters
from triehh_beam.beam.transforms import DropZeroCountsDoFn
from triehh_beam.beam.windows.windows import (ADMITTED_TAG, LATE_TAG, GateLateRecords, SplitIntoWindows,
                                              rfc3339)
from triehh_beam.io.drops import DROP_REASONS, bad_fraction, counter_name
from triehh_beam.io.schema import RecordColumns
from triehh_beam.job.batch import jobs as jobs_lib
from triehh_beam.job.release import input_checks, outputs
from triehh_beam.job.release.wording import counted
from triehh_beam.job.settings import sources
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state import cas, leftovers
from triehh_beam.job.windows import modes, windowed, stream_clock
from triehh_beam.job.windows.releases import WindowReleases
from triehh_beam.protocol.randomness.sampling import Sampler

__all__ = [
    "StreamSource",
    "WindowedRun",
    "count_dead_letters",
    "declared_window_count",
    "describe_dead_letters",
    "describe_window",
    "run_replay",
    "run_stream",
    "stop_reason",
]


@dataclasses.dataclass(frozen=True)
class StreamSource:
    """Where a stream's records come from and how its messages read.

    Attributes:
      subscription: ``projects/P/subscriptions/S``.
      message_format: ``json`` (one record object or a list) or ``proto`` (``DeviceRecords``).
      timestamp_attribute: the attribute holding the event time (milliseconds since the epoch
        or RFC 3339); None: the publish time.
      stop_after_windows: cancel the job after this many windows have closed; None: run until
        cancelled.
    """

    subscription: str
    message_format: str = "json"
    timestamp_attribute: Optional[str] = None
    stop_after_windows: Optional[int] = None

    def __post_init__(self):
        parts = self.subscription.split("/")
        if len(parts) != 4 or parts[0] != "projects" or parts[2] != "subscriptions" or not all(parts):
            raise ValueError(f"--subscription must be projects/PROJECT/subscriptions/NAME, got {self.subscription!r}")
        if self.message_format not in ("json", "proto"):
            raise ValueError(f"--message-format must be json or proto, got {self.message_format!r}")
        if self.stop_after_windows is not None and self.stop_after_windows < 1:
            raise ValueError(f"--stop-after-windows must be >= 1, got {self.stop_after_windows}")

    def check(self, config: DiscoveryConfig) -> None:
        """Refuses (ValueError, one line) a ``stop_after_windows`` the declared range cannot reach:
        only its windows close (with records or not), so the job would never stop."""
        if config.windows[1] is None:  # FROM..: open-ended, any number of windows closes
            return
        declared = declared_window_count(config)
        if self.stop_after_windows is not None and self.stop_after_windows > declared:
            raise ValueError(
                f"--stop-after-windows {self.stop_after_windows} is more than the "
                f"{counted(declared, 'window')} --windows declares: only those close (a record outside "
                "them is dropped), so the stream would never stop; the stream stops by itself once "
                "every declared window has closed")


def declared_window_count(config: DiscoveryConfig) -> int:
    """How many windows ``--windows FROM..TO`` declares (``--window`` each)."""
    first, last = config.windows
    return (last - first) // (config.window * 1_000_000)


def stop_reason(closed: int, declared_closed: int, declared: int, stop_after: Optional[int],
                open_ended: bool = False) -> Optional[str]:
    """Why a stream stops now, or None: ``stop_after`` windows have closed (with records or only
    empty messages: a window counts once it closes), or every declared window has (no other
    window is ever released); for ``FROM..``, every window of this run's graph has
    (``declared``: ``stream_clock.GRAPH_WINDOWS``)."""
    if stop_after is not None and closed >= stop_after:
        return f"{counted(closed, 'window')} closed: stopping (--stop-after-windows)"
    if declared_closed >= declared and open_ended:
        return (f"this run's {counted(declared, 'window')} have closed: stopping; run the same command to "
                "continue with the next")
    if declared_closed >= declared:
        return f"every declared window has closed ({declared}, --windows): stopping"
    return None


@dataclasses.dataclass
class WindowedRun:
    """What a windowed run did: the windows' private reports (oldest first) and its state."""

    reports: List[dict]
    state: str
    dead_letter: str
    result: object = None  # Beam's PipelineResult (a Dataflow dry run's holds the job)


def describe_window(report: dict, verbose: bool = False) -> str:
    """One progress line for a closed window (no count unless ``verbose``: then marked private)."""
    start = report["window_start"]
    if report["released"]:
        estimated = " with frequency estimates" if report.get("privacy", {}).get("estimate_epsilon") else ""
        hitters = counted(report.get("heavy_hitters", 0), "heavy hitter")
        line = (f"window {start}: released {hitters}{estimated}, "
                f"{counted(len(report.get('rounds', [])), 'round')} -> {report.get('published_to')}")
    else:
        line = f"window {start}: nothing released: {report['reason']}"
    if report.get("records_admitted_after_close"):
        line += ("; WARNING: records reached this window after it was computed (the runner ran them "
                 "before the window's close); they are in no result: see its operator report")
    if verbose:
        detail = f"; {report['detail']}" if report.get("detail") else ""
        line += (f" [private: {counted(report['input']['distinct_users'], 'user')}, "
                 f"{counted(report['input']['records'], 'record')}{detail}]")
    return line


def count_dead_letters(uri: str) -> Dict[str, int]:
    """Dead-letter entries per reason (``late``, ``malformed_message``, ``bad_count`` ...) under
    ``uri``: the replay's one file, or the stream's ``uri/<reason>/*.jsonl`` files (local or any
    Beam filesystem). Counts only: what the operator is told, never the rows. Nothing there yet
    is no entries."""
    counts: Dict[str, int] = {}
    patterns = (uri, FileSystems.join(uri, "*", "*.jsonl"))
    for pattern in patterns:
        try:
            matched = FileSystems.match([pattern])[0].metadata_list
        except (BeamIOError, OSError):  # nothing there (some filesystems raise for a missing prefix)
            continue
        for metadata in matched:
            if metadata.path.rsplit("/", 1)[-1].startswith(".") or os.path.isdir(metadata.path):
                continue  # a bundle's temporary, not yet renamed into place; the stream's directory
            with FileSystems.open(metadata.path) as f:
                for line in f.read().decode("utf-8", errors="replace").splitlines():
                    if line.strip():
                        try:
                            reason = str(json.loads(line).get("reason", "unknown"))
                        except (ValueError, AttributeError):
                            reason = "unknown"
                        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


def describe_dead_letters(counts: Dict[str, int], verbose: bool = False) -> str:
    """The dead letter's kinds, most first (``"malformed_message, late"``, or ``"none"``); their
    exact counts only when ``verbose``, marked private like every count on the console."""
    if not counts:
        return "none"
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(reason for reason, _ in ranked)
    if verbose:
        text += " [private: " + ", ".join(f"{n:,} {reason}" for reason, n in ranked) + "]"
    return text


# The windowed job's secret seed in its state directory (``modes.job_seed``).
SEED_NAME = "windowed_seed"


def _estimates_note(config: DiscoveryConfig) -> str:
    """What ``--estimate-frequencies`` adds to each released window's spend ("" without it)."""
    if not config.estimate_frequencies:
        return ""
    return (f"; each released window also spends epsilon_est={config.estimate_frequencies:g} on its "
            "frequency estimates (its plan and ledger charge hold the sum)")


def _deny_note(config: DiscoveryConfig) -> str:
    """What ``--deny-list`` changes in every window's votes ("" without it)."""
    deny = config.deny
    if deny is None:
        return ""
    return (f"; every window's votes skip the {counted(deny.size, 'earlier heavy hitter')} "
            f"of the deny list ({counted(len(deny.files), 'file')})")


def _prepare(job: windowed.WindowedJob, default_name: str) -> str:
    """Makes the private state directories; returns the dead letter location (``--dead-letter``,
    else ``default_name`` in the state directory)."""
    root = job.config.resolved_state_dir
    for private in (root, job.state_root):
        cas.make_private_dir(private)
    if job.config.dead_letter:
        return job.config.dead_letter
    return FileSystems.join(root, default_name)


def _late_rows(keyed) -> Iterator[Tuple[str, str, str]]:
    """Late records as dead-letter entries ``(source, "late", the record as a JSON line)``."""
    start, batch = keyed
    source = f"late for {windowed.window_dir_name(start)}"
    for row in batch.to_pylist():
        record = {}
        for name, value in row.items():
            if isinstance(value, bytes):
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    name, value = name + "_base64", base64.b64encode(value).decode("ascii")
            record[name] = value
        yield source, "late", json.dumps(record, ensure_ascii=False)


def _discover(records, job: windowed.WindowedJob, seed: bytes, rejected, write_dead_letters: beam.PTransform,
              wait_seconds: float = 0.0, starts=None):
    """The gate, the per-window discovery, and every rejected or late record to the dead letter;
    ``wait_seconds``: how long a closed window waits for the driver's decision; ``starts``: the
    graph's windows (``build_windowed_discovery``)."""
    sampler = Sampler(seed, job.config.window_identity())
    # A user holds an item only with a positive count: as in the batch census and rounds, a
    # record of count 0 is no record, so a window's n counts exactly the users it can sample.
    records = records | "DropZeroCounts" >> beam.ParDo(DropZeroCountsDoFn())
    gated = records | "GateLateRecords" >> GateLateRecords(job.windows)
    summaries = windowed.build_windowed_discovery(
        gated["records"], job, sampler.window_keys(), sampler.census_key(), wait_seconds, starts)
    windowed.note_admitted(gated[ADMITTED_TAG], job)
    late = gated[LATE_TAG] | "LateRecords" >> beam.FlatMap(_late_rows)
    (late, rejected) | "DeadLetters" >> beam.Flatten() | "WriteDeadLetters" >> write_dead_letters
    return summaries


def _check_replay_input(config: DiscoveryConfig, options: PipelineOptions, seed: bytes,
                        progress: Callable[[str], None], dead_letter: str) -> None:
    """The batch job's refusals, over the whole replayed input, before any window is charged:
    more than ``--max-bad-fraction`` of the rows bad, or more than ``--max-unusable-fraction`` of
    the users without a usable item (``input_checks.check_census``; BadInputError). It costs a
    census job (one more read of the files): skipped when both are disabled (``1``). Bad rows
    within the limit are named by reason as the run's last line names ``dead_letter``'s."""
    if all(limit is None or limit >= 1 for limit in (config.max_bad_fraction, config.max_unusable_fraction)):
        return
    jobs = jobs_lib.JobRunner(options, config.verbose, None, None, log_dir=config.resolved_state_dir)
    sampler = Sampler(seed, config.window_identity())
    counted, counters, _ = jobs_lib.take_census(config, jobs, sampler)
    counters = {**counters, "distinct_users": counted.users, "users_without_usable_item": counted.unusable_users}
    input_checks.check_census(config, counters, counted, counted.users)
    if bad_fraction(counters):
        bad = {reason: counters[counter_name(reason)] for reason in DROP_REASONS
               if counters.get(counter_name(reason))}
        progress(f"input: some rows are bad ({describe_dead_letters(bad, config.verbose)}), within "
                 f"--max-bad-fraction; they go to the dead letter (private, in {dead_letter})")
    if counted.unusable_users:
        # Not a bad row: the dead letter holds none of these users (their rows parsed).
        progress("input: some users hold no usable item (only items longer than --max-length allows, or that "
                 "cannot be encoded), within --max-unusable-fraction; they are sampled but never vote"
                 + (f" [private: {input_checks.describe_unusable(config, counted)}]" if config.verbose else ""))


def run_replay(config: DiscoveryConfig, options: PipelineOptions,
               progress: Callable[[str], None] = print) -> WindowedRun:
    """``discover --window``: one discovery per window of the files' records, bounded."""
    if config.timestamp_column is None:
        raise ValueError("--window over files needs --timestamp-column (the records' event time)")
    if config.windows is not None and config.windows[1] is None:
        raise ValueError("--windows FROM.. (open-ended) is for triehh stream: over files, declare FROM..TO")
    root = config.resolved_state_dir
    windowed.WindowedJob.check(config)
    modes.check_locations(config, options)  # LocationError, before anything is made or charged
    before = leftovers.local_entries(root)
    try:
        seed = modes.job_seed(config, SEED_NAME)
        job = windowed.WindowedJob.for_config(config, seed)
        dead_letter = _prepare(job, "dead_letter.jsonl")
        _check_replay_input(config, options, seed, progress, dead_letter)
    except BaseException:
        leftovers.remove_new(root, before)  # a refused replay leaves nothing behind
        raise
    progress(f"windowed discovery: {config.window}-second windows of {config.input_pattern}"
             f"{_estimates_note(config)}{_deny_note(config)}")
    releases = WindowReleases(job)
    for start in job.declared_starts:  # each committed and charged (or refused) before the graph runs
        releases.decide(start)
    pipeline = runners.make_pipeline(options, root)
    # A file that cannot be read fails the job (RecordFormatError, naming it): nothing is skipped.
    read = pipeline | "ReadRecords" >> sources.read_transform(config, dead_letter=True)
    records = read[RECORDS_TAG] | "IntoWindows" >> SplitIntoWindows(job.windows)
    _discover(records, job, seed, read[REJECTED_TAG], WriteDeadLetters(dead_letter))
    pipeline.run().wait_until_finish()
    reports = windowed.read_window_reports(job)
    for report in reports:
        progress(describe_window(report, config.verbose))
    outside = _records_outside(job)
    if outside:
        progress(f"input: some records fall outside --windows {job.describe_declared()}: they are in no "
                 "window, neither released nor in the dead letter"
                 + (f" [private: {counted(outside, 'record')}]" if config.verbose else ""))
    return WindowedRun(reports, "DONE", dead_letter)


def _records_outside(job: windowed.WindowedJob) -> int:
    """How many records the gate let into windows a replay's ``--windows FROM..TO`` does not
    declare (its admitted counts there): read, but in no window's census. Bounded ranges only."""
    declared = {rfc3339(start) for start in job.declared_starts}
    pattern = FileSystems.join(job.state_root, "window=*", "admitted", "shard-*.json")
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except (BeamIOError, OSError):  # nothing there (some filesystems raise for a missing prefix)
        return 0
    notes = (outputs.read_json(metadata.path) for metadata in matched)
    return sum(note["records"] for note in notes if note["window_start"] not in declared)


# How long a closed window's step waits for the driver's decision (made when the window opens).
_DECISION_WAIT_SECONDS = 120.0


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM (a scheduler's stop) is Ctrl-C: the stream stops cleanly, resumable (main thread
    only: other threads cannot set signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _wait(result, ended: List[BaseException]) -> None:
    try:
        result.wait_until_finish()
    except BaseException as e:  # re-raised by the driver's thread
        ended.append(e)


# How long a stream waits for its job to cancel (``modes.cancel_job``).
_CANCEL_WAIT_SECONDS = 5.0


def run_stream(config: DiscoveryConfig, source: StreamSource, options: PipelineOptions,
               progress: Callable[[str], None] = print, poll_seconds: float = 1.0) -> WindowedRun:
    """``triehh stream``: windows of the subscription's records until cancelled (or
    ``source.stop_after_windows`` have closed)."""
    from triehh_beam.beam.pubsub.messages import ParseMessages, WriteStreamDeadLetters
    from triehh_beam.job.windows import stream_source

    stream_source.check_subscription(source.subscription)
    windowed.WindowedJob.check(config)
    source.check(config)
    modes.check_locations(config, options)  # before anything is made or charged
    seed = modes.job_seed(config, SEED_NAME)
    job = windowed.WindowedJob.for_config(config, seed)
    read = stream_source.read_messages(options, job, source.subscription, source.timestamp_attribute)
    dead_letter = _prepare(job, "dead-letter")
    first = stream_clock.first_open_window(job)  # a restart resumes at the first window not released
    declared = stream_clock.graph_starts(job, first)
    pipeline = modes.stream_pipeline(options, config.resolved_state_dir)
    parsed = (
        pipeline
        | "ReadFromPubSub" >> read
        | "ParseMessages" >> ParseMessages(
            config.record_options, source.message_format,
            RecordColumns(config.user_column, config.item_column, config.count_column),
            timestamp_attribute=source.timestamp_attribute)
    )
    _discover(parsed["records"], job, seed, parsed["rejected"], WriteStreamDeadLetters(dead_letter),
              wait_seconds=_DECISION_WAIT_SECONDS, starts=declared)
    releases = WindowReleases(job)
    due = stream_clock.DueWindows(releases, job, first)
    # A runner that only translates the graph (--dry_run=True) runs nothing: nothing is charged.
    deciding = not options.get_all_options().get("dry_run")
    if deciding:
        due.decide(stream_clock.now_micros())  # every window already open: committed and charged before the graph runs
    status = stream_clock.StreamStatus(job, releases.ledger)
    seen = set()
    for report in windowed.read_window_reports(job):
        seen.add(report["window_start"])
        status.note(report)
    progress(f"streaming from {source.subscription}: {config.window}-second windows "
             f"{job.describe_declared()}, from {rfc3339(first)}, closing {config.allowed_lateness} s after their "
             f"end; results in {config.output_dir}{_estimates_note(config)}{_deny_note(config)}")
    result = pipeline.run()
    # The streaming DirectRunner's state stays RUNNING after its worker fails: wait on it in a
    # thread, whose end (and error) the loop below sees.
    ended: List[BaseException] = []
    waiter = threading.Thread(target=_wait, args=(result, ended), daemon=True, name="triehh-stream-wait")
    waiter.start()
    closed: List[dict] = []
    state = "RUNNING"
    lag = stream_source.LagWatch(job, progress, verbose=config.verbose)
    try:
        with _sigterm_interrupts():
            while True:
                lag()
                if deciding:
                    due.decide(stream_clock.now_micros())
                for report in windowed.read_window_reports(job):
                    if report["window_start"] not in seen:
                        seen.add(report["window_start"])
                        closed.append(report)
                        status.note(report)
                        progress(describe_window(report, config.verbose))
                status.write("running")
                why = stop_reason(len(closed), sum(1 for start in declared if rfc3339(start) in seen), len(declared),
                                  source.stop_after_windows, job.open_ended)
                refused = due.refused_now
                if why is None and refused is not None and all(
                        rfc3339(start) in seen for start in declared if start < refused.start):
                    why = stream_clock.describe_refusal(refused)
                if why:
                    progress(why)
                    state = modes.cancel_job(result, _CANCEL_WAIT_SECONDS)
                    break
                if not waiter.is_alive():
                    state = str(result.state).split(".")[-1]
                    break
                time.sleep(poll_seconds)
    except KeyboardInterrupt:
        resume = next((start for start in declared if rfc3339(start) not in seen), None)
        progress("interrupted: cancelling the job; every released window is kept"
                 + (f"; run the same command to resume at window {rfc3339(resume)}" if resume is not None else ""))
        state = modes.cancel_job(result, _CANCEL_WAIT_SECONDS)
    status.write(state.lower())
    if ended and state != "CANCELLED":
        raise ended[0]
    unread = stream_source.describe_unread(options, job, source.subscription, config.verbose)
    if unread:
        progress(unread)
    return WindowedRun(closed, state, dead_letter, result)
