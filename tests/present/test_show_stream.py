"""``triehh show OUT`` on a stream's output: the status the stream writes as windows close
(``job.stream_clock.StreamStatus``) shown as its windows (released, empty, refused by the
budget), the lag of the last release and the spend per period."""

import datetime

from triehh_beam import cli
from triehh_beam.job import stream_clock, windowed
from triehh_beam.job.config import DiscoveryConfig
from triehh_beam.job.ledger import Ledger, Spend
from triehh_beam.present import show_stream

SEED = bytes(range(32))
HOUR = 3600 * 1_000_000
D0 = 1_763_856_000 * 1_000_000  # 2025-11-23T00:00:00Z


def test_the_stream_status_shows_its_windows_lag_and_spend_per_period(tmp_path, capsys):
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
    lines = show_stream.stream_lines(show_stream.load_status(str(tmp_path / "out")),
                                     now=datetime.datetime(2025, 11, 23, 2, 30, tzinfo=datetime.timezone.utc))
    text = "\n".join(lines)
    assert lines[0].startswith("stream: running, status written ")
    assert "windows 2025-11-23T00:00:00Z.. of 3600 s, each closing 0 s after its end" in lines[0]
    assert "budget: epsilon 10, delta unlimited (the privacy unit: a user per day)" in text
    assert "last release: window 2025-11-23T01:00:00Z;" in text and "s behind the clock" in text
    assert ", 1800.0 s now" in text  # its close (02:00) was half an hour before 02:30
    assert "windows closed: 3 (1 released, 1 empty, 1 refused by the budget)" in text
    assert "  2025-11-23T02:00:00Z  refused by the budget" in lines
    assert "  from 2025-11-23T00:00:00Z: epsilon 8, delta 2e-06" in lines
    assert cli.main(["show", str(tmp_path / "out")]) == 0
    assert "windows closed: 3 (1 released, 1 empty, 1 refused by the budget)" in capsys.readouterr().out
