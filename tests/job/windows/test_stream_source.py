"""Which read a stream uses and what the driver says of it (``job.windows.stream_source``): Dataflow and
the in-process DirectRunner keep Beam's native read, every other runner the product's; a window
is settled once its operator report exists, or when it is outside the declared range; a source
behind the clock by more than a window and its lateness is reported at most once a minute, never
from a previous run's status; and a stopped stream counts the messages it left unread (against
the emulator), nothing acknowledged. How far behind, and every count of messages, is private: on
the console only under --verbose (marked private), and in the state directory."""

from __future__ import annotations

import json

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam.pubsub.source import ReadPubsubMessages
from triehh_beam.io.pubsub.pull import PullReader
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.windows import stream_source, windowed

SECOND = 1_000_000


def _job(tmp_path):
    config = DiscoveryConfig(input_pattern="pubsub://projects/p/subscriptions/s", output_dir=str(tmp_path / "out"),
                             epsilon=4.0, delta=1e-6, max_length=4, window=10, allowed_lateness=2,
                             windows=(100 * SECOND, 130 * SECOND), population=1000, seed=bytes(32))
    return windowed.WindowedJob.for_config(config, bytes(32))


@pytest.mark.parametrize("argv, own", [
    ([], False),
    (["--runner", "DirectRunner"], False),
    (["--runner", "BundleBasedDirectRunner"], False),
    (["--runner", "DataflowRunner"], False),
    (["--runner", "PrismRunner"], True),
    (["--runner", "FlinkRunner"], True),
    (["--runner", "PortableRunner"], True),
])
def test_the_native_read_stays_only_where_the_runner_needs_it(argv, own, tmp_path):
    options = PipelineOptions(argv)
    assert stream_source.uses_own_read(options) is own
    read = stream_source.read_messages(options, _job(tmp_path), "projects/test-project/subscriptions/records", "ts")
    assert isinstance(read, ReadPubsubMessages) is own


def test_a_bad_subscription_name_is_refused_by_beams_check():
    with pytest.raises(ValueError):
        stream_source.check_subscription("projects/p/topics/t")


def test_a_window_is_settled_by_its_report_or_by_being_undeclared(tmp_path):
    job = _job(tmp_path)
    settled = stream_source.WindowSettled(job)
    assert settled(90 * SECOND) and settled(130 * SECOND)  # outside --windows: its records are dropped
    assert not settled(110 * SECOND)
    path = tmp_path / "out.state" / "windows" / windowed.window_dir_name(110 * SECOND) / "operator_report.json"
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    assert settled(110 * SECOND) and not settled(120 * SECOND)


def _write_status(job, **status):
    stream_source.SourceStatus(stream_source.status_path(job))(status)


@pytest.mark.parametrize("verbose", [False, True])
def test_a_source_behind_the_clock_says_so_once_a_minute(tmp_path, verbose):
    job = _job(tmp_path)
    said, now = [], [1000.0]
    _write_status(job, read_through=900.0, messages_held=5, updated=999.0)  # a previous run's
    watch = stream_source.LagWatch(job, said.append, clock=lambda: now[0], verbose=verbose)
    watch()
    assert said == []
    _write_status(job, read_through=995.0, messages_held=5, updated=1001.0)
    now[0] = 1006.0  # 11 s behind: within a window (10 s) and its lateness (2 s)
    watch()
    assert said == []
    _write_status(job, read_through=990.0, messages_held=7, updated=1007.0)
    now[0] = 1010.0  # 20 s behind
    watch()
    assert len(said) == 1 and said[0].startswith("behind: the subscription's read is more than a window")
    if verbose:
        assert "[private: read through 1970-01-01T00:16:30Z, 20 s behind; 7 messages read and held" in said[0]
    else:  # the default line holds no count and no figure that depends on the records
        assert not any(ch.isdigit() for ch in said[0]), said[0]
    now[0] = 1060.0
    watch()
    assert len(said) == 1  # at most once a minute
    now[0] = 1071.0
    watch()
    assert len(said) == 2


def test_a_stopped_stream_counts_what_it_left_unread_privately(pubsub_emulator, tmp_path):
    paths = pubsub_emulator.topic("unread")
    for i in range(7):
        pubsub_emulator.publish(paths["topic"], b"x%d" % i)
    job = _job(tmp_path)
    private = tmp_path / "out.state" / stream_source.UNREAD_NAME
    line = stream_source.describe_unread(PipelineOptions([]), job, paths["subscription"])
    # The default line says where the count is, never the count.
    assert line == (f"unread messages stay in {paths['subscription']} for the next run (how many is private: "
                    f"--verbose, or {private})")
    assert json.loads(private.read_text())["messages_unread"] == 7
    assert private.stat().st_mode & 0o077 == 0  # owner-only
    line = stream_source.describe_unread(PipelineOptions([]), job, paths["subscription"], verbose=True)
    assert line == f"unread messages stay in {paths['subscription']} for the next run [private: 7 left unread]"
    # The product's read: what it held unacknowledged (its last status) is said too, privately.
    _write_status(job, read_through=1.0, messages_held=3, updated=2.0)
    line = stream_source.describe_unread(PipelineOptions(["--runner", "PrismRunner"]), job, paths["subscription"],
                                         verbose=True)
    assert line.startswith(f"unread messages stay in {paths['subscription']} for the next run [private: 7 left "
                           "unread, and 3 read but not acknowledged")
    line = stream_source.describe_unread(PipelineOptions(["--runner", "PrismRunner"]), job, paths["subscription"])
    named = line.replace(str(private), "").replace(paths["subscription"], "")
    assert not any(ch.isdigit() for ch in named), line
    assert json.loads(private.read_text())["messages_read_not_acknowledged"] == 3
    assert stream_source.describe_unread(PipelineOptions(["--runner", "DataflowRunner"]), job, "x") is None
    reader = PullReader(paths["subscription"])  # nothing was acknowledged by counting
    try:
        got = []
        for _ in range(5):
            got.extend(reader.pull())
        assert len({m.message_id for m in got}) == 7
    finally:
        reader.close()
    assert json.loads((tmp_path / "out.state" / stream_source.STATUS_NAME).read_text())["messages_held"] == 3
