"""A stream's public status as text (``triehh show OUT`` on a ``triehh stream`` output): its state,
its windows (released, empty, refused by the budget), the lag of the last release behind the clock
and the spend per period of its budget, from the ``_STREAM.json`` the stream rewrites as windows
close. Reads only published files."""

from __future__ import annotations

import datetime
import json
import os
from typing import List, Optional

__all__ = ["STATUS_NAME", "load_status", "stream_lines"]

#: The stream's status in its output (``job.stream_clock`` writes it).
STATUS_NAME = "_STREAM.json"
_SHOWN_WINDOWS = 20


def load_status(output: str) -> Optional[dict]:
    """The status document of a stream's output directory, or None when ``output`` is not one."""
    path = os.path.join(output, STATUS_NAME)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _instant(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _amount(value, spec: str = ".6g") -> str:
    return "unlimited" if value is None else format(value, spec)


def stream_lines(status: dict, now: Optional[datetime.datetime] = None) -> List[str]:
    """The status as lines: the stream, its budget, its windows (the last ``20``) and the spend
    per period; ``now`` (default: the clock) for the lag shown beside the stream's own."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    windows = status["windows"]
    counts = {}
    for window in windows:
        counts[window["outcome"]] = counts.get(window["outcome"], 0) + 1
    lines = [f"stream: {status['state']}, status written {status['updated_at']}; windows "
             f"{status['declared_windows']} of {status['window_seconds']} s, each closing "
             f"{status['allowed_lateness_seconds']} s after its end"]
    budget = status["budget"]
    if budget["unit"]:
        lines.append(f"budget: epsilon {_amount(budget['epsilon'])}, delta {_amount(budget['delta'], '.3g')} "
                     f"(the privacy unit: {budget['unit']})")
    else:
        lines.append("budget: none (each window is its own release; the privacy unit: a user per window)")
    last = status["last_released_window"]
    if last is None:
        lines.append("last release: none yet")
    else:
        close = _instant(last) + datetime.timedelta(
            seconds=status["window_seconds"] + status["allowed_lateness_seconds"])
        lines.append(f"last release: window {last}; its close was {status['lag_seconds']:.1f} s behind the clock "
                     f"when the status was written, {(now - close).total_seconds():.1f} s now")
    summary = ", ".join(f"{counts[k]} {k}" for k in ("released", "empty", "refused by the budget", "not released")
                        if counts.get(k))
    lines.append(f"windows closed: {len(windows)}" + (f" ({summary})" if summary else ""))
    if len(windows) > _SHOWN_WINDOWS:
        lines.append(f"  ... {len(windows) - _SHOWN_WINDOWS} earlier windows")
    lines += [f"  {w['window_start']}  {w['outcome']}" for w in windows[-_SHOWN_WINDOWS:]]
    if status["spend_per_period"]:
        lines.append("spend per period (every release on the population's ledger):")
        lines += [f"  from {p['period_start']}: epsilon {_amount(p['epsilon'])}, delta {_amount(p['delta'], '.3g')}"
                  for p in status["spend_per_period"]]
    return lines
