"""The census job's spill (``jobs.take_census``): its fingerprints are written inside the state
directory (``census/spill-<id>/``, owner-only) while the job runs, and nothing is left under
``census/`` once it ends: after a census that succeeded, one whose input is refused, one whose
job raised, and a whole discovery; a spill a killed run left is deleted by the next census that
holds the state directory's lease (a discovery's, not a dry run's or a replay check's). The
census itself is compared with a count of the users by Python sets.

A ``JobRunner`` that looks into the state directory when the job has run (before
``take_census`` cleans up) shows that the spill was written there, so "nothing left" is not
"nothing written".
"""

from __future__ import annotations

import collections
import hashlib
import os
import pathlib

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from triehh_beam.beam.census import Census
from triehh_beam.io.schema import RecordFormatError
from triehh_beam.io.write import write_records
from triehh_beam.job.batch import jobs
from triehh_beam.job.batch.driver import DiscoveryConfig, run_discovery
from triehh_beam.job.batch.dry_run import dry_run
from triehh_beam.protocol.randomness.sampling import Sampler

SEED = hashlib.sha256(b"triehh-beam census spill job tests").digest()


class _Failed(Exception):
    pass


class _LookingJobRunner(jobs.JobRunner):
    """Runs jobs as ``JobRunner`` does; records the spill files and directory modes under
    ``census/`` once each job has run; with ``fail``, then raises ``_Failed``."""

    def __init__(self, state_dir: str, fail: bool = False):
        super().__init__(PipelineOptions([]), False, None, None)
        self._census = pathlib.Path(state_dir, "census")
        self._fail = fail
        self.spilled = []  # per job: {spill directory: (mode, files)}

    def run(self, build, phase, total=None, estimated=False, unit="records"):
        counters = super().run(build, phase, total, estimated, unit)
        self.spilled.append({d.name: (os.stat(d).st_mode & 0o777, sorted(f.name for f in d.iterdir()))
                             for d in self._census.glob("spill-*")})
        if self._fail:
            raise _Failed("the job failed after writing its spill")
        return counters


def _rows():
    """1,000 users with 1-3 records each, usable (3 characters) or too long (7-11)."""
    return [(f"user-{u}", "x" * (3 if (u * 7 + r) % 5 < 2 else 7 + (u + r) % 5), 1)
            for u in range(1000) for r in range(1 + u % 3)]


def _expected(rows, max_length) -> Census:
    """By sets: every user; the usable (an item of 1 to max_length - 1 characters: a unit a
    character, and the terminator); the others by their shortest item."""
    usable = {user for user, item, _ in rows if 0 < len(item) < max_length}
    shortest = {}
    for user, item, _ in rows:
        if user not in usable:
            shortest[user] = min(shortest.get(user, len(item)), len(item))
    return Census(len({user for user, _, _ in rows}), len(usable), dict(collections.Counter(shortest.values())))


def _config(tmp_path, pattern) -> DiscoveryConfig:
    return DiscoveryConfig(input_pattern=str(pattern), output_dir=str(tmp_path / "out"), seed=SEED,
                           epsilon=6.0, delta=1e-5, max_length=6, protocol="triehh")


def _left(config) -> list:
    census = pathlib.Path(config.resolved_state_dir, "census")
    return sorted(str(p.relative_to(census)) for p in census.rglob("*"))


def _one_spill(runner) -> tuple:
    """The one spill directory the census job wrote: (its mode, its files)."""
    (spilled,) = runner.spilled
    (mode_files,) = spilled.values()
    return mode_files


def test_the_census_spills_in_the_state_directory_and_leaves_nothing(tmp_path):
    rows = _rows()
    write_records(str(tmp_path / "records.parquet"), rows)
    config = _config(tmp_path, tmp_path / "records.parquet")
    runner = _LookingJobRunner(config.resolved_state_dir)
    counted, _, _ = jobs.take_census(config, runner, Sampler(SEED))
    expected = _expected(rows, config.max_length)
    assert 0 < expected.usable_users < expected.users and len(expected.unusable_lengths) >= 3
    assert counted == expected
    mode, files = _one_spill(runner)
    assert mode == 0o700 and files and all(f.startswith("census-") and f.endswith(".bin") for f in files)
    assert _left(config) == []


def test_a_refused_input_and_a_failed_job_leave_nothing(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    write_records(str(records / "good.parquet"), _rows())
    (records / "broken.parquet").write_bytes(b"not parquet at all")
    config = _config(tmp_path, f"{records}/*")
    runner = _LookingJobRunner(config.resolved_state_dir)
    with pytest.raises(RecordFormatError, match="broken.parquet"):
        jobs.take_census(config, runner, Sampler(SEED))
    assert _one_spill(runner)[1] and _left(config) == []
    (records / "broken.parquet").unlink()
    failing = _LookingJobRunner(config.resolved_state_dir, fail=True)
    with pytest.raises(_Failed):
        jobs.take_census(config, failing, Sampler(SEED))
    assert _one_spill(failing)[1] and _left(config) == []


@pytest.mark.parametrize("holds_the_lease", [True, False])
def test_a_spill_a_killed_run_left_is_deleted_by_the_next_census_that_holds_the_lease(tmp_path, holds_the_lease):
    write_records(str(tmp_path / "records.parquet"), _rows())
    config = _config(tmp_path, tmp_path / "records.parquet")
    census = pathlib.Path(config.resolved_state_dir, "census")
    left = census / ("spill-" + "0" * 32)
    left.mkdir(parents=True)
    (left / "census-03-killed.bin").write_bytes(b"fingerprints of a killed run")
    (census / ("spill-" + "1" * 32)).mkdir()  # an empty one
    (census / "unrelated.txt").write_text("not a spill")
    runner = _LookingJobRunner(config.resolved_state_dir)
    jobs.take_census(config, runner, Sampler(SEED), clear_stale_spills=holds_the_lease)
    if holds_the_lease:  # a discovery: the killed run's spill goes first
        assert len(runner.spilled[0]) == 1  # only its own spill while the job ran
        assert _left(config) == ["unrelated.txt"]
    else:  # a replay's check, without the lease: another run's spill may be live, so it stays
        assert _left(config) == ["spill-" + "0" * 32, "spill-" + "0" * 32 + "/census-03-killed.bin",
                                 "spill-" + "1" * 32, "unrelated.txt"]


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_discovery_leaves_nothing_under_census(tmp_path):
    rows = [(f"u{u}", ["apple", "apply", "maple", "zoo"][u % 4], 1) for u in range(3000)]
    write_records(str(tmp_path / "records.parquet"), rows)
    config = _config(tmp_path, tmp_path / "records.parquet")
    run_discovery(config)
    assert (tmp_path / "out" / "heavy_hitters.json").exists()
    census = pathlib.Path(config.resolved_state_dir, "census")
    assert census.is_dir() and _left(config) == []


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_discovery_deletes_a_killed_runs_spill_and_a_dry_run_does_not(tmp_path):
    """A dry run holds no lease: a spill it finds may be a running discovery's, so it stays; the
    discovery (under the lease) deletes it."""
    rows = [(f"u{u}", ["apple", "apply", "maple", "zoo"][u % 4], 1) for u in range(3000)]
    write_records(str(tmp_path / "records.parquet"), rows)
    config = _config(tmp_path, tmp_path / "records.parquet")
    census = pathlib.Path(config.resolved_state_dir, "census")
    live = census / ("spill-" + "a" * 32)
    live.mkdir(parents=True)
    (live / "census-03-live.bin").write_bytes(b"a running discovery's fingerprints")
    dry_run(config)
    assert (live / "census-03-live.bin").exists()
    run_discovery(config)
    assert _left(config) == []
