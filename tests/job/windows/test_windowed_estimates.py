"""``--estimate-frequencies`` in the windowed discovery graph (job/windows/windowed.py, in-process and
streaming runners): each released window's published estimates equal the per-user reference of
that window's records alone with the keys of the window's committed release (``EstimateKeys.derive``
of its ``Sampler``, its nonce's), its trie is still the keyed simulation's, each released window
is charged epsilon + epsilon_est before its estimates are computed or anything is published, a
window that is not released spends and estimates nothing, the stream (``TestStream``) publishes
the reference too, and TrieHH++ windows are estimated and charged alike."""

import json

import numpy as np
import pytest

from tests.windowed_jobs import (HOUR, SEED, T0, WORDS, committed_window, hour_batches, one_stamp_batches,
                                 run_streaming_windows, run_windows, window_sampler, windowed_config,
                                 fixed_nonces)  # noqa: F401 (fixture)
from triehh_beam.beam.windows import windowed_estimates
from triehh_beam.evaluation.estimates_eval import simulate_estimates
from triehh_beam.job.release import outputs
from triehh_beam.job.state import ledger as ledger_lib
from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.windows import windowed
from triehh_beam.protocol.estimates.count_intervals import noisy_count_intervals
from triehh_beam.protocol.estimates.frequency_estimates import EstimateKeys
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate, simulate_sample_threshold

EPSILON_EST = 0.5


def _population(users: int, seed: int, prefix: str):
    """Zipf-distributed words; every fifth user holds a second word (the estimate's choice)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    words = rng.choice(len(WORDS), size=(users, 2), p=weights / weights.sum())
    return {f"{prefix}{i}": [WORDS[a]] + ([WORDS[b]] if i % 5 == 0 and b != a else [])
            for i, (a, b) in enumerate(words)}


def _document(tmp_path, start):
    return json.loads((tmp_path / "out" / windowed.window_dir_name(start) / "heavy_hitters.json").read_text())


def _check_window(tmp_path, config, start, population):
    """The window's published trie and estimates against the keyed simulation and the per-user
    reference with the window's own keys; returns its document."""
    job = windowed.WindowedJob.for_config(config, SEED)
    sampler = window_sampler(job, start)
    out = tmp_path / "out" / windowed.window_dir_name(start)
    assert (out / windowed.RELEASED_MARKER).exists()
    trie = Trie.from_bytes((out / "trie.pb").read_bytes())
    plan = planner.plan(config.population, config.epsilon, config.delta, config.max_length)
    expected_trie = simulate(population, config.encoder, plan.theta, plan.batch_size, sampler)
    assert [set(level) for level in trie.levels] == [set(level) for level in expected_trie.levels], start
    assert len(expected_trie.heavy_hitters) >= 2
    expected = simulate_estimates(population, config.encoder, trie, sampler, EPSILON_EST).by_target()
    assert EstimateKeys.derive(sampler.seed, sampler.identity) == windowed_estimates.window_estimate_keys(
        Sampler(SEED, config.window_identity()).window_keys(), start,
        committed_window(job, start).release_nonce)
    document = json.loads((out / "heavy_hitters.json").read_text())
    k = document["frequency_estimates"]["half_width"]
    assert k == 6 and document["frequency_estimates"]["epsilon"] == EPSILON_EST
    entries = [(config.encoder.encode(e["item"]), e) for e in document["heavy_hitters"]]
    entries += [(tuple(e["prefix"]), e) for e in document["frequent_prefixes"]]
    assert len(entries) == len(expected) and len(entries) >= 3
    for sequence, entry in entries:
        assert entry["estimate"] == expected[sequence], (start, entry)
        assert entry["interval"] == list(noisy_count_intervals([entry["estimate"]], EPSILON_EST)[0])
    privacy = document["privacy"]
    assert privacy["estimate_epsilon"] == EPSILON_EST
    assert privacy["total_target_epsilon"] == pytest.approx(config.epsilon + EPSILON_EST)
    return document


def test_each_windows_estimates_equal_the_reference_with_the_windows_keys_charged_first(tmp_path, monkeypatch):
    # The order of what happens, per window: the charge, the estimates' release, the publication.
    events = []
    charge, release, write = ledger_lib.Ledger.charge_plan, windowed_estimates.release, outputs.write_outputs

    def charge_plan(self, record_id, plan, details, interval=None):
        events.append(("charge", details["window_start"]))
        return charge(self, record_id, plan, details, interval)

    monkeypatch.setattr(ledger_lib.Ledger, "charge_plan", charge_plan)
    monkeypatch.setattr(windowed_estimates, "release", lambda *a: events.append(("estimate", len(a[1]))) or release(*a))
    monkeypatch.setattr(outputs, "write_outputs", lambda d, *a, **k: events.append(("publish", d)) or write(d, *a, **k))

    rng = np.random.default_rng(1)
    first, second = _population(3000, 1, "a"), _population(2500, 2, "b")
    config = windowed_config(tmp_path, estimate_frequencies=EPSILON_EST, population=2500)
    job = run_windows(config, hour_batches(first, T0, rng) + hour_batches(second, T0 + HOUR, rng))
    documents = [_check_window(tmp_path, config, start, population)
                 for start, population in ((T0, first), (T0 + HOUR, second))]
    # Windows draw independently: their keys (and so their noise) differ.
    window_keys = Sampler(SEED, config.window_identity()).window_keys()
    keys = [windowed_estimates.window_estimate_keys(window_keys, s, committed_window(job, s).release_nonce)
            for s in (T0, T0 + HOUR)]
    assert keys[0] != keys[1]
    assert all(d["heavy_hitters"] for d in documents)

    records = Ledger(config.resolved_ledger_dir).records()
    assert sorted(r["window_start"] for r in records) == ["2025-11-23T10:00:00Z", "2025-11-23T11:00:00Z"]
    for record in records:
        assert record["estimate_epsilon"] == EPSILON_EST
        assert record["epsilon"] == pytest.approx(record["discovery_epsilon"] + EPSILON_EST)
        assert record["discovery_epsilon"] <= config.epsilon
    for start in (T0, T0 + HOUR):
        charged = events.index(("charge", windowed.rfc3339(start)))
        published = events.index(("publish", str(tmp_path / "out" / windowed.window_dir_name(start))))
        assert charged < published
    # Both windows' estimates were released after both charges (each a bundle of its own),
    # and before the publications.
    released = [i for i, (kind, _) in enumerate(events) if kind == "estimate"]
    assert len(released) == 2
    assert max(i for i, (kind, _) in enumerate(events) if kind == "charge") < min(released)
    assert max(released) < min(i for i, (kind, _) in enumerate(events) if kind == "publish")


def test_a_window_that_is_not_released_spends_and_estimates_nothing(tmp_path):
    # A budget that fits one window's epsilon + epsilon_est, not two.
    rng = np.random.default_rng(3)
    first, second = _population(3000, 1, "a"), _population(3000, 2, "b")
    config = windowed_config(tmp_path, estimate_frequencies=EPSILON_EST, ledger_dir=str(tmp_path / "ledger"),
                             budget_epsilon=4.0 + EPSILON_EST + 1.0, population=2500)
    job = run_windows(config, hour_batches(first, T0, rng) + hour_batches(second, T0 + HOUR, rng))
    reports = {r["window_start"]: r for r in windowed.read_window_reports(job)}
    assert sorted(r["released"] for r in reports.values()) == [False, True]
    (start,) = [s for s in (T0, T0 + HOUR) if reports[windowed.rfc3339(s)]["released"]]
    (withheld,) = [r for r in reports.values() if not r["released"]]
    assert withheld["reason"].startswith("refused by the budget (a user over the population's lifetime)")
    _check_window(tmp_path, config, start, first if start == T0 else second)
    refused = T0 + HOUR if start == T0 else T0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [windowed.window_dir_name(start), windowed.window_dir_name(refused)])
    assert [p.name for p in (tmp_path / "out" / windowed.window_dir_name(refused)).iterdir()] == ["_REFUSED"]
    (record,) = Ledger(config.resolved_ledger_dir).records()
    assert record["window_start"] == windowed.rfc3339(start) and record["estimate_epsilon"] == EPSILON_EST


def test_a_budget_that_fits_the_discovery_but_not_the_estimates_releases_nothing(tmp_path):
    rng = np.random.default_rng(4)
    config = windowed_config(tmp_path, estimate_frequencies=EPSILON_EST, ledger_dir=str(tmp_path / "ledger"),
                             budget_epsilon=4.0 + EPSILON_EST / 2, windows=(T0, T0 + HOUR))
    job = run_windows(config, hour_batches(_population(3000, 1, "a"), T0, rng))
    (report,) = windowed.read_window_reports(job)
    assert not report["released"] and report["reason"].startswith("refused by the budget")
    refused = tmp_path / "out" / windowed.window_dir_name(T0)
    assert [p.name for p in refused.iterdir()] == ["_REFUSED"] and Ledger(config.resolved_ledger_dir).records() == []


def test_streaming_windows_publish_the_estimates_of_the_reference(tmp_path):
    rng = np.random.default_rng(7)
    first, second = _population(2000, 1, "a"), _population(2000, 2, "b")
    early, second_batches = one_stamp_batches(first, T0, rng), one_stamp_batches(second, T0 + HOUR, rng)
    config = windowed_config(tmp_path / "stream", estimate_frequencies=EPSILON_EST, allowed_lateness=60)
    events = [T0, early[: len(early) // 2], T0 + HOUR // 2, early[len(early) // 2:], second_batches[:5],
              T0 + HOUR + 1000, second_batches[5:], T0 + 3 * HOUR]
    run_streaming_windows(config, events)
    for start, population in ((T0, first), (T0 + HOUR, second)):
        _check_window(tmp_path / "stream", config, start, population)


def test_triehh_plus_plus_windows_are_estimated_and_charged_alike(tmp_path):
    rng = np.random.default_rng(6)
    first, second = _population(3000, 1, "a"), _population(2500, 2, "b")
    config = windowed_config(tmp_path, protocol="triehh++", estimate_frequencies=EPSILON_EST)
    job = run_windows(config, hour_batches(first, T0, rng) + hour_batches(second, T0 + HOUR, rng))
    chosen = plan_sample_threshold(4.0, 1e-5, 6)
    for start, population in ((T0, first), (T0 + HOUR, second)):
        sampler = window_sampler(job, start)
        simulated = simulate_sample_threshold(population, config.encoder, chosen.tau, chosen.sampling_probability,
                                              sampler)
        trie = Trie.from_bytes((tmp_path / "out" / windowed.window_dir_name(start) / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in simulated.levels]
        assert len(trie.heavy_hitters()) >= 2
        expected = simulate_estimates(population, config.encoder, trie, sampler, EPSILON_EST).by_target()
        document = _document(tmp_path, start)
        assert {e["item"]: e["estimate"] for e in document["heavy_hitters"]} == {
            config.encoder.decode(s): expected[s] for s in trie.heavy_hitter_sequences()}
        assert document["privacy"]["protocol"] == "triehh++" and document["privacy"]["estimate_epsilon"] == EPSILON_EST
    records = Ledger(config.resolved_ledger_dir).records()
    assert len(records) == 2
    assert [r["epsilon"] for r in records] == [pytest.approx(chosen.epsilon + EPSILON_EST)] * 2
    assert [r["estimate_epsilon"] for r in records] == [EPSILON_EST] * 2


def test_a_released_window_that_discovers_nothing_publishes_no_estimate(tmp_path):
    # Every user holds an item of its own (distinct first characters): no prefix reaches theta.
    population = {f"u{i}": [chr(0x4E00 + i)] for i in range(3000)}
    config = windowed_config(tmp_path, estimate_frequencies=EPSILON_EST, windows=(T0, T0 + HOUR))
    job = run_windows(config, hour_batches(population, T0, np.random.default_rng(9)))
    (report,) = windowed.read_window_reports(job)
    assert report["released"] and report["heavy_hitters"] == 0
    document = _document(tmp_path, T0)
    assert document["heavy_hitters"] == [] and document["frequent_prefixes"] == []
    assert document["frequency_estimates"]["half_width"] == 6
    (record,) = Ledger(config.resolved_ledger_dir).records()
    assert record["estimate_epsilon"] == EPSILON_EST  # charged before the rounds found nothing
