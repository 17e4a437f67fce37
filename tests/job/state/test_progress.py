"""Issue 15, item 6: progress on long work (job/state/progress.py, job/batch/jobs.py). A running job's steps
report their rows through a local file (``ProgressChannel``, ``CountProgressDoFn``), a monitor
thread turns them into ``Progress`` about every second, the driver shows a line in place on a
terminal (``TerminalBar``) and sends ``progress`` events with ``--log-format json``; rows done
are counts, shown only with ``--verbose``, marked private. The census's total comes from the
file list (``estimate_records``): exact for Parquet, within a stated tolerance for text files.
"""

import gzip
import io
import random

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to

from tests.pipeline_factory import new_pipeline
from triehh_beam.io.write import write_records
from triehh_beam.job.batch import jobs as jobs_lib
from triehh_beam.job.batch.driver import DiscoveryConfig, run_discovery
from triehh_beam.job.settings.input_files import snapshot
from triehh_beam.job.state import progress as progress_lib
from triehh_beam.job.state.progress import (CountProgressDoFn, Progress, ProgressChannel,
                                            ProgressMonitor, TerminalBar, describe, estimate_records)


def test_steps_report_their_rows_and_pass_elements_through():
    channel = ProgressChannel()
    try:
        batches = [pa.record_batch([pa.array(range(n))], names=["x"]) for n in (5, 70_000, 1)]
        pipeline = new_pipeline()
        passed = (pipeline | beam.Create(batches) | beam.ParDo(CountProgressDoFn(channel.path))
                  | beam.Map(lambda batch: batch.num_rows))
        assert_that(passed, equal_to([5, 70_000, 1]))
        pipeline.run().wait_until_finish()
        assert channel.rows() == 70_006
        assert channel.rows() == 70_006  # read once: nothing is counted twice
    finally:
        channel.close()


def test_a_channel_counts_a_line_only_once_it_is_complete():
    channel = ProgressChannel()
    try:
        with open(channel.path, "ab") as f:
            f.write(b"10\n2")
            f.flush()
            assert channel.rows() == 10
            f.write(b"5\n")
            f.flush()
            assert channel.rows() == 35
    finally:
        channel.close()


def test_a_step_that_cannot_reach_the_file_reports_nothing_and_passes_elements():
    step = CountProgressDoFn("/nonexistent/triehh-progress")
    step.setup()
    batch = pa.record_batch([pa.array([1, 2])], names=["x"])
    assert list(step.process(batch)) == [batch]
    step.teardown()


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_monitor_estimates_the_time_left_from_the_rate_since_rows_first_came():
    channel = ProgressChannel()
    clock = _Clock()
    reports = []
    try:
        monitor = ProgressMonitor("census", 1000, False, "records", reports.append, channel,
                                  interval=3600, clock=clock)  # the thread never ticks: snapshots only
        with monitor:
            clock.now += 5.0  # start-up: nothing read yet
            assert monitor.snapshot().remaining is None
            with open(channel.path, "ab") as f:
                f.write(b"100\n")
            clock.now += 1.0
            first = monitor.snapshot()  # rows first seen: rate over the whole 6 s, start-up included
            assert (first.done, first.elapsed) == (100, 6.0)
            assert first.remaining == pytest.approx(900 / (100 / 6.0))
            with open(channel.path, "ab") as f:
                f.write(b"200\n")
            clock.now += 2.0
            later = monitor.snapshot()  # 200 rows in the 2 s since: 100 rows/s
            assert later.remaining == pytest.approx(700 / 100.0)
            assert later.fraction == pytest.approx(0.3)
        assert reports[-1].finished and reports[-1].done == 300
    finally:
        channel.close()


def test_the_monitor_reports_from_its_thread_and_survives_a_failing_reporter():
    reports = []

    def report(progress):
        reports.append(progress)
        if len(reports) == 3:
            raise RuntimeError("a reporter's bug")

    import time

    with ProgressMonitor("sampling", None, False, "records", report, None, interval=0.01):
        time.sleep(0.2)
    assert len(reports) == 3  # no more after the failure, not even the final one; the job went on


def test_describe_shows_counts_only_when_private():
    progress = Progress("census", 2_500_000, 5_900_000, True, "records", 21.0, 28.6)
    line = describe(progress)
    assert line == "census: [##########..............]  42% 0:21 elapsed, about 0:29 left"
    assert "2,500,000" not in line
    assert describe(progress, private=True).endswith("[private: 2,500,000 of ~5,900,000 records]")
    # Past an estimate that was short: never 100% before the job ends.
    assert Progress("census", 6_000_000, 5_900_000, True, "records", 50.0, None).fraction == 0.99
    assert describe(Progress("rounds 3-10", 0, None, False, "users", 3725.0, None)) == "rounds 3-10: 1:02:05 elapsed"


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def test_a_terminal_bar_redraws_in_place_and_clears_at_the_end():
    stream = _Stream(tty=True)
    bar = TerminalBar(stream)
    bar("census: 10%")
    bar("census: 20%")
    bar(None)
    assert stream.getvalue() == "\rcensus: 10%\x1b[K\rcensus: 20%\x1b[K\r\x1b[K"


def test_off_a_terminal_a_long_job_logs_a_line_every_interval_and_a_short_one_none():
    stream, clock = _Stream(tty=False), _Clock()
    bar = TerminalBar(stream, log_interval=30.0, clock=clock)
    for second in range(0, 75):
        clock.now = 100.0 + second
        bar(f"census: {second} s")
    bar(None)
    assert stream.getvalue().splitlines() == ["census: 30 s", "census: 60 s"]
    bar("sampling: 0 s")  # a new job: its first line waits again
    bar(None)
    assert stream.getvalue().splitlines() == ["census: 30 s", "census: 60 s"]


def test_the_census_total_is_exact_for_parquet_and_close_for_text(tmp_path):
    rng = random.Random(6)
    rows = [(f"user-{i}", "w" * rng.randint(1, 40)) for i in range(60_000)]
    write_records(str(tmp_path / "a.parquet"), rows[:25_000])
    write_records(str(tmp_path / "b.parquet"), rows[25_000:])
    assert estimate_records(snapshot(str(tmp_path / "*.parquet"))) == (60_000, True)
    # Text: the lines of the first MiB, scaled; these files are 1.6 to 3.5 MiB. Tolerance 3%:
    # the lines' lengths are independent, so a MiB's mean line length is within a fraction of
    # a percent of the file's.
    write_records(str(tmp_path / "c.jsonl"), rows)
    write_records(str(tmp_path / "d.csv"), rows)
    for name in ("c.jsonl", "d.csv"):
        estimate, exact = estimate_records(snapshot(str(tmp_path / name)))
        assert not exact and abs(estimate - 60_000) <= 0.03 * 60_000, (name, estimate)
    # Compressed: the lines decompressed from the first compressed MiB, over that MiB.
    with open(tmp_path / "c.jsonl", "rb") as f, gzip.open(tmp_path / "e.jsonl.gz", "wb") as g:
        g.write(f.read() * 8)
    estimate, _ = estimate_records(snapshot(str(tmp_path / "e.jsonl.gz")))
    assert abs(estimate - 480_000) <= 0.03 * 480_000, estimate
    # A small text file is read whole.
    write_records(str(tmp_path / "f.csv"), rows[:10])
    assert estimate_records(snapshot(str(tmp_path / "f.csv"))) == (10, False)


@pytest.fixture
def every_tick(monkeypatch):
    monkeypatch.setattr(jobs_lib.JobRunner, "interval", 0.02)
    monkeypatch.setattr(jobs_lib, "PROGRESS_EVENT_SECONDS", 0.0)


@pytest.mark.parametrize("verbose", [False, True])
def test_a_discovery_reports_the_census_the_pass_and_the_rounds(tmp_path, make_population, every_tick, verbose):
    pattern = make_population(3000, max_chars=3, vocabulary=100).write(tmp_path / "records", shards=2)
    # One job per round, so that a round's own job reports too (the default runs them all in the
    # cut's job, reported as "sampling").
    config = DiscoveryConfig(input_pattern=pattern, output_dir=str(tmp_path / "out"), epsilon=4.0, delta=1e-6,
                             max_length=4, verbose=verbose, rounds_per_job="1", protocol="triehh")
    lines, events = [], []
    run_discovery(config, ticks=lines.append, events=events.append)
    shown = [line for line in lines if line is not None]
    for phase in ("census", "sampling", "round 1/4"):
        assert any(line.startswith(phase + ":") for line in shown), phase
    assert lines[-1] is None  # the last job's line is cleared
    progress = [e for e in events if e["event"] == "progress"]
    assert {e["phase"] for e in progress} >= {"census", "sampling"}
    census = [e for e in progress if e["phase"] == "census"]
    assert all(e["total_estimated"] is False for e in census)  # Parquet: exact
    if verbose:
        assert all("[private:" in line for line in shown)
        assert all(e["private"]["total"] == 3000 for e in census)
    else:
        assert not any("private" in line or "3,000" in line for line in shown)
        assert not any("private" in e for e in progress)


@pytest.mark.parametrize("flags, reported", [
    ([], True),
    (["--runner=PrismRunner"], True),  # loopback workers: this process's threads append to the file
    (["--runner=DataflowRunner"], False),  # its workers cannot reach a local file
])
def test_a_job_gives_its_steps_the_progress_file_where_the_workers_run_here(monkeypatch, flags, reported):
    # The job itself runs in process whatever the options name: only the runner's choice of
    # handing its steps the progress file is under test (a Prism run is in tests/e2e/test_prism.py).
    from apache_beam.options.pipeline_options import PipelineOptions

    monkeypatch.setattr(jobs_lib.runners, "make_pipeline", lambda options, log_dir=None: new_pipeline())
    given = []

    def build(pipeline, progress_path):
        given.append(progress_path)
        batches = [pa.record_batch([pa.array(range(10))], names=["x"])]
        read = pipeline | beam.Create(batches)
        if progress_path is not None:  # as the graphs do: a step reports only given a file
            _ = read | beam.ParDo(CountProgressDoFn(progress_path))

    ticks = []
    jobs_lib.JobRunner(PipelineOptions(flags), False, ticks.append, None).run(build, "census", total=10)
    assert (given[0] is not None) is reported
