"""The plumbing the job modes share (``job.windows.modes``): the secret seed drawn once and kept private,
the locations refused before anything is made, and cancelling a job within a bounded wait."""

import os
import stat
import threading
import time

import pytest

from triehh_beam.job.release.lifecycle import LocationError
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.windows import modes


def _config(tmp_path, **fields) -> DiscoveryConfig:
    return DiscoveryConfig(input_pattern=str(tmp_path / "x.jsonl"), output_dir=str(tmp_path / "out"), epsilon=4.0,
                           delta=1e-6, max_length=4, population=1000, **fields)


def test_the_seed_is_drawn_once_kept_private_and_read_back_by_a_restart(tmp_path):
    config = _config(tmp_path)
    first = modes.job_seed(config, "some_seed")
    assert len(first) == 32 and modes.job_seed(config, "some_seed") == first  # a restart draws the same samples
    assert modes.job_seed(config, "other_seed") != first  # each mode's own name, its own seed
    root = config.resolved_state_dir
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700


def test_a_seed_file_is_the_seed_and_nothing_is_written(tmp_path):
    config = _config(tmp_path, seed=bytes(range(32)))
    assert modes.job_seed(config, "some_seed") == bytes(range(32))
    assert not os.path.exists(config.resolved_state_dir)


def test_an_output_inside_the_state_directory_is_refused_whatever_the_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = DiscoveryConfig(input_pattern="x.jsonl", output_dir="./state/../state/out/", state_dir="state",
                             epsilon=4.0, delta=1e-6, max_length=4, population=1000)
    with pytest.raises(LocationError, match="must not be inside each other"):
        modes.check_locations(config)
    assert not (tmp_path / "state").exists()


class _Job:
    """A running job whose cancel blocks until released (as the streaming DirectRunner's waits
    for its current pull)."""

    def __init__(self):
        self.cancelled = threading.Event()
        self.release = threading.Event()

    def cancel(self):
        self.cancelled.set()
        self.release.wait(10)


def test_cancel_returns_within_its_wait_while_the_runner_is_still_cancelling():
    job = _Job()
    started = time.monotonic()
    assert modes.cancel_job(job, 0.2) == "CANCELLED"
    assert job.cancelled.is_set() and time.monotonic() - started < 5  # bounded, not the cancel's 10 s
    job.release.set()


def test_the_nudge_runs_after_the_cancel_started_and_its_failure_is_ignored():
    job, seen = _Job(), []

    def nudge():
        seen.append(job.cancelled.wait(5))  # the cancel is under way when the nudge is sent
        job.release.set()
        raise ConnectionError("Pub/Sub is gone")

    assert modes.cancel_job(job, 5.0, nudge=nudge) == "CANCELLED"
    assert seen == [True]
