"""A window's release is decided by the driver (job/windows/releases.py), never in a step a runner
may retry: its nonce derives from the job's committed base nonce and the window, its release is
committed, then charged, then committed marked charged; a retried decision or a retried
``PlanAndCharge`` bundle finds the same nonce and charges nothing more."""

import numpy as np
import pytest
from apache_beam.transforms.window import IntervalWindow
from apache_beam.utils.timestamp import Timestamp

from tests.release_events import check_order, record_events
from triehh_beam.job.release import lifecycle as release
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.job.windows import windowed
from triehh_beam.job.windows.releases import WindowReleases
from triehh_beam.protocol.randomness.sampling import Sampler

SEED = bytes(range(32))
HOUR = 3600 * 1_000_000
T0 = 1_763_892_000 * 1_000_000  # 2025-11-23T10:00:00Z


def _job(tmp_path, **overrides):
    values = dict(input_pattern="unused", output_dir=str(tmp_path / "out"), epsilon=4.0, delta=1e-5,
                  max_length=6, window=3600, seed=SEED, state_dir=str(tmp_path / "state"),
                  windows=(T0, T0 + 3 * HOUR), protocol="triehh++")
    values.update(overrides)
    config = DiscoveryConfig(**values)
    return windowed.WindowedJob.for_config(config, SEED)


def _decide_do_fn(job, start):
    """``PlanAndCharge``'s DoFn run on the window's census, as a runner runs a bundle."""
    do_fn = windowed._DecideDoFn(job, Sampler(SEED, job.config.window_identity()).window_keys())
    beam_window = IntervalWindow(Timestamp(micros=start + job.windows.lateness_micros),
                                 Timestamp(micros=start + job.windows.lateness_micros + job.windows.size_micros))
    return list(do_fn.process((1000, 1200), beam_window=beam_window))


def test_a_retried_decision_and_a_retried_bundle_find_one_nonce_and_one_charge(tmp_path, monkeypatch):
    job = _job(tmp_path)
    events = record_events(monkeypatch)
    first = WindowReleases(job).decide(T0)
    again = WindowReleases(job).decide(T0)  # the driver restarted
    assert first.charged and again.charged
    plans = [_decide_do_fn(job, T0), _decide_do_fn(job, T0)]  # the step run twice
    assert len(plans[0]) == len(plans[1]) == 1 and plans[0][0].released
    assert plans[0][0].nonce == plans[1][0].nonce == StateStore(job.window_state_dir(T0)).load().release_nonce
    assert [r["record_id"] for r in Ledger(job.config.resolved_ledger_dir).records()] == [
        StateStore(job.window_state_dir(T0)).load().ledger_record]
    assert check_order(events) == [StateStore(job.window_state_dir(T0)).load().ledger_record]
    assert [e[0] for e in events] == ["commit", "charge", "commit"]  # the DoFn committed and charged nothing


def test_every_window_has_its_own_nonce_and_a_new_state_directory_new_ones(tmp_path):
    job = _job(tmp_path)
    releases = WindowReleases(job)
    nonces = [releases.nonce(start) for start in job.declared_starts]
    assert len(set(nonces)) == 3
    other = WindowReleases(_job(tmp_path / "again"))
    assert not set(nonces) & {other.nonce(start) for start in job.declared_starts}


def test_a_driver_killed_between_commit_and_charge_charges_once_on_restart(tmp_path, monkeypatch):
    job = _job(tmp_path)
    with monkeypatch.context() as patched:
        def killed(self, *args, **kwargs):
            raise KeyboardInterrupt("killed after the commit, before the charge")

        patched.setattr(Ledger, "charge_plan", killed)
        with pytest.raises(KeyboardInterrupt):
            WindowReleases(job).decide(T0)
    committed = StateStore(job.window_state_dir(T0)).load()
    assert committed.release_nonce and not committed.release_charged
    assert Ledger(job.config.resolved_ledger_dir).records() == []
    with pytest.raises(windowed.WindowNotDecidedError):  # not charged: the window's step releases nothing
        _decide_do_fn(job, T0)
    assert WindowReleases(job).decide(T0).charged
    resumed = StateStore(job.window_state_dir(T0)).load()
    assert resumed.release_charged and resumed.release_nonce == committed.release_nonce
    assert [r["record_id"] for r in Ledger(job.config.resolved_ledger_dir).records()] == [committed.ledger_record]


def test_the_window_nonce_is_derived_not_drawn(tmp_path, monkeypatch):
    draws = []
    monkeypatch.setattr(release, "fresh_nonce", lambda: draws.append(1) or np.random.default_rng(1).bytes(16))
    job = _job(tmp_path)
    releases = WindowReleases(job)
    for start in job.declared_starts:
        releases.decide(start)
    WindowReleases(job).decide(T0)
    assert draws == [1]  # one base nonce for the job, committed once; none per window or retry
