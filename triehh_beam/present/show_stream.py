"""A stream's status as text (``triehh show OUT`` on a ``triehh stream`` output): its state, its
windows (released, empty, refused by the budget) and the spend per period of its budget, from the
``_STREAM.json`` the stream rewrites in its output as windows close; and, marked operator-only, the
lag of the last release behind the clock, from the private ``stream_status.json`` of its state
directory when that is readable (the lag depends on how long the records took to process)."""

from __future__ import annotations

import datetime
import json
import os
from typing import List, Optional

from triehh_beam.job.release.wording import counted

__all__ = ["OPERATOR_STATUS_NAME", "STATUS_NAME", "load_operator_status", "load_status", "stream_lines"]

#: The stream's status in its output (``job.windows.stream_clock`` writes it).
STATUS_NAME = "_STREAM.json"
#: Its private part, in its state directory.
OPERATOR_STATUS_NAME = "stream_status.json"
_SHOWN_WINDOWS = 20


def _load(path: str) -> Optional[dict]:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_status(output: str) -> Optional[dict]:
    """The status document of a stream's output directory, or None when ``output`` is not one."""
    return _load(os.path.join(output, STATUS_NAME))


def load_operator_status(state_dir: str) -> Optional[dict]:
    """The private status in a stream's state directory, or None (not there, or not readable:
    it is owner-only)."""
    try:
        return _load(os.path.join(state_dir, OPERATOR_STATUS_NAME))
    except PermissionError:
        return None


def _instant(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _amount(value, spec: str = ".6g") -> str:
    return "unlimited" if value is None else format(value, spec)


def stream_lines(status: dict, operator: Optional[dict] = None,
                 now: Optional[datetime.datetime] = None) -> List[str]:
    """The status as lines: the stream, its budget, its windows (the last ``20``) and the spend
    per period; with ``operator`` (the private status), the lag of the last release behind the
    clock when it was written and at ``now`` (default: the clock), marked operator-only."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    windows = status["windows"]
    counts = {}
    for window in windows:
        counts[window["outcome"]] = counts.get(window["outcome"], 0) + 1
    lines = [f"stream: {status['state']}; windows {status['declared_windows']} of {status['window_seconds']} s, "
             f"each closing {status['allowed_lateness_seconds']} s after its end"]
    budget = status["budget"]
    if budget["unit"]:
        lines.append(f"budget: epsilon {_amount(budget['epsilon'])}, delta {_amount(budget['delta'], '.3g')} "
                     f"(the privacy unit: {budget['unit']})")
    else:
        lines.append("budget: none (each window is its own release; the privacy unit: a user per window)")
    last = status["last_released_window"]
    lines.append("last release: " + ("none yet" if last is None else f"window {last}"))
    if operator is None:
        lines.append("lag: operator-only, in the stream's state directory (not found; --state-dir names it)")
    elif operator.get("lag_seconds") is not None and operator.get("last_released_window"):
        close = _instant(operator["last_released_window"]) + datetime.timedelta(
            seconds=status["window_seconds"] + status["allowed_lateness_seconds"])
        lines.append(f"lag (operator-only, private: it depends on the records): the close of window "
                     f"{operator['last_released_window']} was {operator['lag_seconds']:.1f} s behind the clock at "
                     f"{operator['updated_at']} (the stream's last note), {(now - close).total_seconds():.1f} s now")
    summary = ", ".join(f"{counts[k]} {k}" for k in ("released", "empty", "refused by the budget", "not released")
                        if counts.get(k))
    lines.append(f"windows closed: {len(windows)}" + (f" ({summary})" if summary else ""))
    if len(windows) > _SHOWN_WINDOWS:
        lines.append(f"  ... {counted(len(windows) - _SHOWN_WINDOWS, 'earlier window')}")
    lines += [f"  {w['window_start']}  {w['outcome']}" for w in windows[-_SHOWN_WINDOWS:]]
    if status["spend_per_period"]:
        lines.append("spend per period (every release on the population's ledger):")
        lines += [f"  from {p['period_start']}: epsilon {_amount(p['epsilon'])}, delta {_amount(p['delta'], '.3g')}"
                  for p in status["spend_per_period"]]
    return lines
