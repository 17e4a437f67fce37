"""When ``triehh stream`` stops (``job.windows.stream.stop_reason``): after ``--stop-after-windows``
windows have closed, whatever they held (an empty window closes and counts as one with records),
or once every declared window has closed, since no other window is ever released; and a
``--stop-after-windows`` beyond the declared range is refused before anything runs."""

import pytest

from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.windows.stream import StreamSource, declared_window_count, stop_reason

HOUR = 3600 * 1_000_000


@pytest.mark.parametrize("closed, declared_closed, declared, stop_after, stops", [
    (0, 0, 3, None, False),
    (2, 2, 3, None, False),
    (3, 3, 3, None, True),  # every declared window closed: nothing more can be released
    (1, 1, 3, 2, False),
    (2, 2, 3, 2, True),
    (2, 3, 3, 5, True),  # a restart: one window closed before it, counted as declared
])
def test_the_stream_stops_after_n_windows_or_the_declared_range(closed, declared_closed, declared, stop_after, stops):
    why = stop_reason(closed, declared_closed, declared, stop_after)
    assert (why is not None) == stops
    if stops and stop_after is not None and closed >= stop_after:
        assert "--stop-after-windows" in why
    elif stops:
        assert f"every declared window has closed ({declared}" in why


def _config(hours: int) -> DiscoveryConfig:
    return DiscoveryConfig(input_pattern="pubsub://projects/p/subscriptions/s", output_dir="out", epsilon=4.0,
                           delta=1e-6, max_length=4, window=3600, windows=(0, hours * HOUR), population=1000, protocol="triehh")


def test_a_stop_the_declared_range_cannot_reach_is_refused():
    config = _config(3)
    assert declared_window_count(config) == 3
    StreamSource("projects/p/subscriptions/s", stop_after_windows=3).check(config)
    with pytest.raises(ValueError, match=r"^--stop-after-windows 4 is more than the 3 windows --windows declares"):
        StreamSource("projects/p/subscriptions/s", stop_after_windows=4).check(config)


def test_an_open_ended_range_parses_accepts_any_stop_and_stops_at_the_end_of_its_graph():
    from triehh_beam.job.settings.setting import parse_window_range

    assert parse_window_range("1970-01-01T01:00:00Z..") == (HOUR, None)
    with pytest.raises(ValueError, match="not a range of windows"):
        parse_window_range("1970-01-01T01:00:00Z")
    config = DiscoveryConfig(input_pattern="pubsub://projects/p/subscriptions/s", output_dir="out", epsilon=4.0,
                             delta=1e-6, max_length=4, window=3600, windows=(HOUR, None), population=1000)
    StreamSource("projects/p/subscriptions/s", stop_after_windows=10 ** 6).check(config)
    assert stop_reason(5, 4, 200, None, open_ended=True) is None
    assert "this run's 200 windows have closed: stopping; run the same command to continue" in stop_reason(
        200, 200, 200, None, open_ended=True)
    with pytest.raises(ValueError, match="is not a window boundary"):
        DiscoveryConfig(input_pattern="x", output_dir="out", epsilon=4.0, delta=1e-6, max_length=4, window=3600,
                        windows=(HOUR + 1_000_000, None), population=1000)


def test_a_replay_over_files_refuses_an_open_ended_range(tmp_path):
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.job.windows.stream import run_replay

    config = DiscoveryConfig(input_pattern=str(tmp_path / "x.jsonl"), output_dir=str(tmp_path / "out"), epsilon=4.0,
                             delta=1e-6, max_length=4, window=3600, windows=(HOUR, None), population=1000,
                             timestamp_column="ts")
    with pytest.raises(ValueError, match=r"--windows FROM.. \(open-ended\) is for triehh stream"):
        run_replay(config, PipelineOptions([]))
    assert not (tmp_path / "out").exists()
