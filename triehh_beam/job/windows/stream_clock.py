"""What a stream's driver does as the clock goes: it decides each window once the clock reaches
its start, in order (``WindowReleases.decide``: committed and charged, or refused), so what is
charged and published, and when, depends only on the settings and the clock; it picks the
windows a run's graph holds (from the first window not yet released, so a restart resumes
there); it stops when the budget refuses the window now open; and it writes the stream's
status for ``triehh show``: public in its output (``STATUS_NAME``: each window released, empty
or refused, the spend per period), private in its state directory (``OPERATOR_STATUS_NAME``:
the lag of the last release and when each was seen, which depend on the records).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Dict, Iterator, List, Optional

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from triehh_beam.beam.windows.windows import rfc3339
from triehh_beam.job.release import outputs
from triehh_beam.job.state import ledger as ledger_lib
from triehh_beam.job.windows.releases import Decision, WindowReleases
from triehh_beam.job.windows.windowed import (REFUSED_MARKER, RELEASED_MARKER, WITHHELD_NAME,
                                              WindowedJob, window_dir_name)

__all__ = ["GRAPH_WINDOWS", "OPERATOR_STATUS_NAME", "STATUS_NAME", "DueWindows", "StreamStatus", "describe_refusal", "first_open_window",
           "graph_starts", "now_micros"]

#: How many windows an open-ended stream's graph holds (each gets a census, empty or not); a
#: run that reaches the last stops cleanly, and the same command continues from there.
GRAPH_WINDOWS = 200
#: The stream's public status in its output (``triehh show OUT``).
STATUS_NAME = "_STREAM.json"
#: Its private part in the state directory: the lag and when each window was released.
OPERATOR_STATUS_NAME = "stream_status.json"


def now_micros() -> int:
    return time.time_ns() // 1000


def _names(pattern: str) -> set:
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except (BeamIOError, OSError):  # nothing there yet
        return set()
    return {m.path.rstrip("/").rsplit("/", 2)[-2] for m in matched}


def first_open_window(job: WindowedJob) -> int:
    """The first declared window not yet released, refused or withheld: where a restarted stream
    resumes (every window before it is done, each once)."""
    done = (_names(FileSystems.join(job.config.output_dir, "window=*", RELEASED_MARKER))
            | _names(FileSystems.join(job.config.output_dir, "window=*", REFUSED_MARKER))
            | _names(FileSystems.join(job.state_root, "window=*", WITHHELD_NAME)))
    for start in job.declared_starts:
        if window_dir_name(start) not in done:
            return start
    return job.config.windows[1]  # a FROM..TO range entirely done


def graph_starts(job: WindowedJob, first: int) -> List[int]:
    """The windows a run's graph holds: every declared one of ``FROM..TO``; ``GRAPH_WINDOWS``
    from ``first`` for ``FROM..``."""
    if not job.open_ended:
        return list(job.declared_starts)
    size = job.windows.size_micros
    return list(range(first, first + GRAPH_WINDOWS * size, size))


class DueWindows:
    """Decides every window once the clock reaches its start, in order, from ``first``; a
    refusal of a window still open when the run started, or opened since, stops the stream
    (``refused_now``); one of a window that ended before is only published as refused."""

    def __init__(self, releases: WindowReleases, job: WindowedJob, first: int):
        self._releases = releases
        self._size = job.windows.size_micros
        self._started = now_micros()
        self._starts: Iterator[int] = (s for s in job.declared_starts if s >= first)
        self._next = next(self._starts, None)
        self.refused_now: Optional[Decision] = None  # the budget refused the window open now

    def decide(self, now: int) -> List[Decision]:
        """Decides the windows opened by ``now`` (microseconds) and not decided yet; notes the
        first refusal of a window open during this run (the stream then stops)."""
        decided = []
        while self._next is not None and self._next <= now:
            decision = self._releases.decide(self._next)
            decided.append(decision)
            if decision.refused_by_budget and decision.start + self._size > self._started and self.refused_now is None:
                self.refused_now = decision
            self._next = next(self._starts, None)
        return decided


def describe_refusal(decision: Decision) -> str:
    """The stream's stop line when the budget refuses the window open now."""
    when = (f"the next window it allows starts at {rfc3339(decision.next_allowed)}: run the same command then"
            if decision.next_allowed is not None else "no later window fits (change the budget to continue)")
    return f"the budget refuses window {rfc3339(decision.start)}: stopping; {when}"


@dataclasses.dataclass
class StreamStatus:
    """The stream's status, rewritten as windows close. Public, in its output (``STATUS_NAME``):
    what depends only on the settings, the clock's schedule and the ledger (each window's bounds
    and outcome, the budget, the spend per period; a window's heavy hitters are in its published
    result). Private, in its state directory (``OPERATOR_STATUS_NAME``): when each window's
    release was seen and the lag of the last one behind the clock, which depend on how long the
    window's records took to process, so on how many there were."""

    job: WindowedJob
    ledger: ledger_lib.Ledger
    windows: Dict[str, dict] = dataclasses.field(default_factory=dict)
    noted_at: Dict[str, str] = dataclasses.field(default_factory=dict)
    _written: Optional[bytes] = None

    def note(self, report: dict) -> None:
        """Adds a closed window from its report: its public outcome, and (private) when."""
        start = report["window_start"]
        if report["released"]:
            outcome = "released" if report.get("heavy_hitters") else "empty"
        elif (report.get("reason") or "").startswith("refused by the budget"):
            outcome = "refused by the budget"
        else:
            outcome = "not released"
        self.windows[start] = {"window_start": start, "outcome": outcome}
        self.noted_at[start] = _second(now_micros())

    def write(self, state: str) -> None:
        """Writes the public status document (when it changed) and the private one (``state``:
        running, stopped ...)."""
        job = self.job
        released = [w for w in self.windows.values() if w["outcome"] in ("released", "empty")]
        last = max((w["window_start"] for w in released), default=None)
        budget = job.config.budget
        period = budget.period
        spend = [{"period_start": ledger_lib.period_start(k, period), "epsilon": s.epsilon, "delta": s.delta}
                 for k, s in self.ledger.spent_per_period(self.ledger.records())] if period else []
        document = {
            "kind": "triehh stream status", "state": state,
            "declared_windows": job.describe_declared(), "window_seconds": job.config.window,
            "allowed_lateness_seconds": job.config.allowed_lateness,
            "windows": [self.windows[k] for k in sorted(self.windows)],
            "last_released_window": last,
            "budget": {"unit": budget.unit if budget.limited else None, "epsilon": budget.epsilon,
                       "delta": budget.delta, "period_seconds": period},
            "spend_per_period": spend,
        }
        data = (json.dumps(document, indent=2) + "\n").encode("utf-8")
        if data != self._written:
            outputs.write_atomically(FileSystems.join(job.config.output_dir, STATUS_NAME), data)
            self._written = data
        lag = None
        if last is not None:
            from triehh_beam.job.settings.setting import parse_window_range

            start = parse_window_range(f"{last}..")[0]
            lag = max(0.0, (now_micros() - job.windows.closes_at(start)) / 1e6)
        outputs.write_json(FileSystems.join(job.config.resolved_state_dir, OPERATOR_STATUS_NAME), {
            "kind": "triehh stream operator status",
            "note": "private (operator only): these times depend on how long each window's records took to process",
            "state": state, "updated_at": _second(now_micros()), "last_released_window": last,
            "lag_seconds": lag,  # the clock's lead on the last released window's close
            "noted_at": {k: self.noted_at[k] for k in sorted(self.noted_at)},
        }, private=True)


def _second(micros: int) -> str:
    return rfc3339(micros // 1_000_000 * 1_000_000)
