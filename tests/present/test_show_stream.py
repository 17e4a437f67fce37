"""``triehh show OUT`` on a stream's output: the status the stream writes as windows close
(``job.windows.stream_clock.StreamStatus``) shown as its windows (released, empty, refused by the
budget) and the spend per period; the lag of the last release, and when each window was seen,
depend on how long the records took to process, so they are written only to the private state
directory, and ``show`` reads them from there, marked operator-only."""

import datetime
import json
import os

from triehh_beam import cli
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.ledger import Ledger, Spend
from triehh_beam.job.windows import stream_clock, windowed
from triehh_beam.present import show_stream

SEED = bytes(range(32))
HOUR = 3600 * 1_000_000
D0 = 1_763_856_000 * 1_000_000  # 2025-11-23T00:00:00Z


def test_the_stream_status_publishes_windows_and_spend_and_keeps_the_lag_private(tmp_path, capsys):
    assert show_stream.STATUS_NAME == stream_clock.STATUS_NAME
    config = DiscoveryConfig(input_pattern="unused", output_dir=str(tmp_path / "out"), epsilon=4.0, delta=1e-5,
                             max_length=4, window=3600, windows=(D0, None), protocol="triehh++", seed=SEED,
                             state_dir=str(tmp_path / "state"), ledger_dir=str(tmp_path / "ledger"),
                             budget_epsilon=10.0, budget_period=86400)
    job = windowed.WindowedJob.for_config(config, SEED)
    ledger = Ledger(config.resolved_ledger_dir, config.budget)
    for i in range(2):
        ledger.charge(f"w{i}", Spend(4.0, 1e-6), {}, interval=(D0 + i * HOUR, D0 + (i + 1) * HOUR))
    status = stream_clock.StreamStatus(job, ledger)
    status.note({"window_start": "2025-11-23T00:00:00Z", "released": True, "heavy_hitters": 3, "reason": None})
    status.note({"window_start": "2025-11-23T01:00:00Z", "released": True, "heavy_hitters": 0, "reason": None})
    status.note({"window_start": "2025-11-23T02:00:00Z", "released": False,
                 "reason": "refused by the budget (a user per day): the next window ..."})
    status.write("running")
    published = json.loads((tmp_path / "out" / show_stream.STATUS_NAME).read_text())
    # Nothing published depends on processing time: no wall time, no lag (a planted
    # "noted_at"/"lag_seconds"/"updated_at" in the public document fails here).
    assert set(published) == {"kind", "state", "declared_windows", "window_seconds", "allowed_lateness_seconds",
                              "windows", "last_released_window", "budget", "spend_per_period"}
    assert all(set(w) == {"window_start", "outcome"} for w in published["windows"])
    assert show_stream.OPERATOR_STATUS_NAME == stream_clock.OPERATOR_STATUS_NAME
    private = tmp_path / "state" / show_stream.OPERATOR_STATUS_NAME
    operator = json.loads(private.read_text())
    assert operator["lag_seconds"] > 0 and set(operator["noted_at"]) == {w["window_start"] for w in published["windows"]}
    assert os.stat(private).st_mode & 0o077 == 0  # owner-only
    now = datetime.datetime(2025, 11, 23, 2, 30, tzinfo=datetime.timezone.utc)
    lines = show_stream.stream_lines(show_stream.load_status(str(tmp_path / "out")),
                                     show_stream.load_operator_status(str(tmp_path / "state")), now=now)
    text = "\n".join(lines)
    assert lines[0] == "stream: running; windows 2025-11-23T00:00:00Z.. of 3600 s, each closing 0 s after its end"
    assert "budget: epsilon 10, delta unlimited (the privacy unit: a user per day)" in text
    assert "last release: window 2025-11-23T01:00:00Z" in lines
    lag = next(line for line in lines if line.startswith("lag (operator-only, private: it depends on the records): "))
    assert "the close of window 2025-11-23T01:00:00Z was " in lag and "s behind the clock at " in lag
    assert lag.endswith(", 1800.0 s now")  # its close (02:00) was half an hour before 02:30
    assert "windows closed: 3 (1 released, 1 empty, 1 refused by the budget)" in text
    assert "  2025-11-23T02:00:00Z  refused by the budget" in lines
    assert "  from 2025-11-23T00:00:00Z: epsilon 8, delta 2e-06" in lines
    # Without the state directory the lag is not shown, and the line says where it is.
    alone = show_stream.stream_lines(show_stream.load_status(str(tmp_path / "out")), None, now=now)
    assert "lag: operator-only, in the stream's state directory (not found; --state-dir names it)" in alone
    assert not any(line.startswith("lag (") for line in alone)
    assert cli.main(["show", str(tmp_path / "out")]) == 0  # the default OUT.state is not this stream's
    shown = capsys.readouterr().out
    assert "windows closed: 3 (1 released, 1 empty, 1 refused by the budget)" in shown and "lag: operator-only" in shown
    assert cli.main(["show", str(tmp_path / "out"), "--state-dir", str(tmp_path / "state")]) == 0
    assert "lag (operator-only, private: it depends on the records): " in capsys.readouterr().out
