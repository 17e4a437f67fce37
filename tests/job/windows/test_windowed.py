"""The windowed discovery graph (job/windows/windowed.py) on the in-process runner: each window's trie
equals the keyed simulation of that window's records alone with the sampler of the window's
committed release (its nonce), every declared window is charged before release under its own
record id, and a window that cannot be released says why."""

import json
import os

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest

from apache_beam.options.pipeline_options import PipelineOptions

from tests.windowed_jobs import (HOUR, SEED, T0, committed_window, decide_windows, fixed_nonces,  # noqa: F401
                                 hour_batches, one_stamp_batches, one_word_population, run_streaming_windows,
                                 run_windows, window_sampler, windowed_config)  # (fixed_nonces: the fixture)
from triehh_beam.beam.runners import make_pipeline
from triehh_beam.beam.windows.windows import GateLateRecords, SplitIntoWindows
from triehh_beam.job.release import outputs
from triehh_beam.job.release.planning import InfeasiblePlanError
from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.windows import windowed
from triehh_beam.protocol.accounting.exact_accountant import release_delta
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
from triehh_beam.protocol.randomness import sampling
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate, simulate_sample_threshold


def test_each_window_equals_the_keyed_simulation_of_its_own_records(tmp_path):
    rng = np.random.default_rng(1)
    first, second = one_word_population(3000, 1, "a"), one_word_population(2500, 2, "b")
    batches = hour_batches(first, T0, rng) + hour_batches(second, T0 + HOUR, rng)
    config = windowed_config(tmp_path, population=2500)
    job = run_windows(config, batches)
    plan = planner.plan(2500, 4.0, 1e-5, 6)  # the declared population's, whatever each window's n
    for start, population in ((T0, first), (T0 + HOUR, second)):
        out = tmp_path / "out" / windowed.window_dir_name(start)
        assert (out / windowed.RELEASED_MARKER).exists()
        expected = simulate(population, config.encoder, plan.theta, plan.batch_size,
                            window_sampler(job, start))
        trie = Trie.from_bytes((out / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels], start
        assert len(expected.heavy_hitters) >= 2  # "the" and "and" (28% and 14% of the users) at m = 135
        document = json.loads((out / "heavy_hitters.json").read_text())
        assert sorted(document["heavy_hitters"]) == sorted(expected.heavy_hitters)
        (report,) = [r for r in windowed.read_window_reports(job) if r["window_start"] == windowed.rfc3339(start)]
        assert report["released"] and report["input"]["distinct_users"] == len(population)
        assert report["records_admitted"] == report["input"]["records"] == len(population)
        assert report["records_admitted_after_close"] == 0
    charges = Ledger(config.resolved_ledger_dir).records()
    assert sorted(r["window_start"] for r in charges) == ["2025-11-23T10:00:00Z", "2025-11-23T11:00:00Z"]
    assert sorted(r["record_id"] for r in charges) == sorted(committed_window(job, s).ledger_record
                                                             for s in (T0, T0 + HOUR))


def test_triehh_plus_plus_each_window_equals_the_keyed_sample_and_threshold_simulation(tmp_path):
    rng = np.random.default_rng(6)
    first, second = one_word_population(3000, 1, "a"), one_word_population(2500, 2, "b")
    batches = hour_batches(first, T0, rng) + hour_batches(second, T0 + HOUR, rng)
    config = windowed_config(tmp_path, protocol="triehh++")
    job = run_windows(config, batches)
    chosen = plan_sample_threshold(4.0, 1e-5, 6)
    assert job.theta == chosen.tau and job.sample_probability == chosen.sampling_probability
    for start, population in ((T0, first), (T0 + HOUR, second)):
        out = tmp_path / "out" / windowed.window_dir_name(start)
        assert (out / windowed.RELEASED_MARKER).exists()
        expected = simulate_sample_threshold(population, config.encoder, chosen.tau, chosen.sampling_probability,
                                             window_sampler(job, start))
        trie = Trie.from_bytes((out / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels], start
        assert len(expected.heavy_hitters) >= 2
        document = json.loads((out / "heavy_hitters.json").read_text())
        assert sorted(document["heavy_hitters"]) == sorted(expected.heavy_hitters)
        (report,) = [r for r in windowed.read_window_reports(job) if r["window_start"] == windowed.rfc3339(start)]
        assert report["released"] and report["privacy"]["protocol"] == "triehh++"
        # Each round's Bernoulli sample, as the simulation drew it (its size is random).
        sampled = {r["round"]: r["users_sampled"] for r in report["rounds"]}
        assert sampled == {s.round_index: s.users_sampled for s in expected.round_stats}
    charges = Ledger(config.resolved_ledger_dir).records()
    assert sorted(r["window_start"] for r in charges) == ["2025-11-23T10:00:00Z", "2025-11-23T11:00:00Z"]
    assert {r["epsilon"] for r in charges} == {chosen.epsilon}


def test_triehh_plus_plus_under_the_bound_refuses_an_infeasible_target_before_any_window(tmp_path):
    # eps / L = 8 / 6 > 1: outside the bound's theorem.
    config = windowed_config(tmp_path, protocol="triehh++", epsilon=8.0, accounting="bound")
    with pytest.raises(InfeasiblePlanError):
        windowed.WindowedJob.for_config(config, SEED)
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def test_triehh_plus_plus_windows_plan_the_same_target_exactly(tmp_path):
    # Under exact accounting (the default) eps_r = 8 / 6 is a plan, every window's.
    config = windowed_config(tmp_path, protocol="triehh++", epsilon=8.0)
    job = windowed.WindowedJob.for_config(config, SEED)
    chosen = plan_sample_threshold(8.0, 1e-5, 6)
    plan = job.plan()
    assert plan.accounting == chosen.accounting == "exact"
    assert (job.theta, job.sample_probability) == (chosen.tau, chosen.sampling_probability)
    assert plan.round_epsilon > 1
    assert plan.round_delta == release_delta(plan.round_epsilon, plan.sample_probability, plan.theta).delta
    assert plan.epsilon <= 8.0 and plan.delta <= 1e-5
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def test_a_budget_for_one_window_releases_one_and_withholds_the_other(tmp_path):
    rng = np.random.default_rng(3)
    batches = (hour_batches(one_word_population(3000, 1, "a"), T0, rng)
               + hour_batches(one_word_population(3000, 2, "b"), T0 + HOUR, rng))
    config = windowed_config(tmp_path, ledger_dir=str(tmp_path / "ledger"), budget_epsilon=5.0)
    job = run_windows(config, batches)
    reports = windowed.read_window_reports(job)
    assert sorted(r["released"] for r in reports) == [False, True]
    withheld = next(r for r in reports if not r["released"])
    assert withheld["reason"].startswith("refused by the budget (a user over the population's lifetime)")
    released_dirs = [d for d in os.listdir(tmp_path / "out") if (tmp_path / "out" / d / "_RELEASED").exists()]
    refused_dirs = [d for d in os.listdir(tmp_path / "out") if (tmp_path / "out" / d / "_REFUSED").exists()]
    assert len(released_dirs) == 1 and len(refused_dirs) == 1 and len(os.listdir(tmp_path / "out")) == 2
    assert os.listdir(tmp_path / "out" / refused_dirs[0]) == ["_REFUSED"]  # nothing else of it is published
    assert len(Ledger(config.resolved_ledger_dir).records()) == 1


def test_a_triehh_window_of_452_users_is_released_as_one_of_453(tmp_path):
    # At epsilon 3.448 a plan for 452 users is infeasible and for 453 feasible: planned for the
    # declared 453, both windows are released alike (the 452-user one as if one phantom user
    # holding nothing were there). The published documents differ in nothing but their content.
    rng = np.random.default_rng(4)
    assert not planner.plan(452, 3.448, 1e-5, 6).feasible and planner.plan(453, 3.448, 1e-5, 6).feasible
    batches = (hour_batches(one_word_population(452, 1, "a"), T0, rng)
               + hour_batches(one_word_population(453, 2, "b"), T0 + HOUR, rng))
    config = windowed_config(tmp_path, epsilon=3.448, population=453)
    job = run_windows(config, batches)
    reports = {r["window_start"]: r for r in windowed.read_window_reports(job)}
    assert [reports[w]["released"] for w in sorted(reports)] == [True, True]
    documents = [json.loads((tmp_path / "out" / windowed.window_dir_name(s) / "heavy_hitters.json").read_text())
                 for s in (T0, T0 + HOUR)]
    assert documents[0].keys() == documents[1].keys()
    assert documents[0]["privacy"] == documents[1]["privacy"]
    assert "declared population of 453 users per window" in documents[0]["window"]["planned"]
    assert documents[0]["window"]["planned"] == documents[1]["window"]["planned"]
    assert len(Ledger(config.resolved_ledger_dir).records()) == 2
    # Round r of the 452-user window sampled K_r real users, K_r the plan's draw for it.
    plan = planner.plan(453, 3.448, 1e-5, 6)
    sampler = window_sampler(job, T0)
    drawn = [sampling.real_users_sampled(sampler.round_uniform("phantoms", r), 453, 452, plan.batch_size)
             for r in range(1, 7)]
    sampled = {r["round"]: r["users_sampled"] for r in reports["2025-11-23T10:00:00Z"]["rounds"]}
    assert all(sampled[r] == drawn[r - 1] for r in sampled) and sampled[1] == drawn[0]
    assert all(k in (plan.batch_size - 1, plan.batch_size) for k in drawn)


def test_triehh_windows_need_a_declared_population_and_a_declared_range(tmp_path):
    with pytest.raises(ValueError, match="need --population N.*--protocol triehh[+][+]"):
        windowed.WindowedJob.for_config(windowed_config(tmp_path, population=None), SEED)
    with pytest.raises(ValueError, match="--window needs --windows FROM..TO"):
        windowed.WindowedJob.for_config(windowed_config(tmp_path, windows=None), SEED)
    with pytest.raises(ValueError, match="not a window boundary"):
        windowed_config(tmp_path, windows=(T0 + 1_000_000, T0 + HOUR))
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def test_a_rerun_never_releases_a_window_twice(tmp_path):
    rng = np.random.default_rng(5)
    batches = hour_batches(one_word_population(3000, 1, "a"), T0, rng)
    config = windowed_config(tmp_path, windows=(T0, T0 + HOUR))
    run_windows(config, batches)
    trie = (tmp_path / "out" / windowed.window_dir_name(T0) / "trie.pb").read_bytes()
    job = run_windows(config, batches + hour_batches(one_word_population(500, 9, "c"), T0, rng))
    (report,) = windowed.read_window_reports(job)
    assert not report["released"] and "already released" in report["reason"]
    assert (tmp_path / "out" / windowed.window_dir_name(T0) / "trie.pb").read_bytes() == trie
    assert len(Ledger(config.resolved_ledger_dir).records()) == 1


def test_streaming_windows_with_lateness_equal_the_keyed_simulation_and_late_records_leave(tmp_path):
    rng = np.random.default_rng(7)
    first, second = one_word_population(2000, 1, "a"), one_word_population(2000, 2, "b")
    early, second_batches = one_stamp_batches(first, T0, rng), one_stamp_batches(second, T0 + HOUR, rng)
    straggler = one_stamp_batches({"late-1": ["the"]}, T0, rng)  # within the lateness
    too_late = one_stamp_batches({"late-2": ["the"], "late-3": ["and"]}, T0, rng)
    lateness = 600
    config = windowed_config(tmp_path / "stream", allowed_lateness=lateness)
    events = [T0, early[: len(early) // 2], T0 + HOUR // 2, early[len(early) // 2:], second_batches[:5],
              T0 + HOUR + 1000, straggler, second_batches[5:],
              T0 + HOUR + lateness * 1_000_000 + 1000, too_late, T0 + 3 * HOUR]
    job = run_streaming_windows(config, events)
    plan = planner.plan(2000, 4.0, 1e-5, 6)
    for start, population in ((T0, {**first, "late-1": ["the"]}), (T0 + HOUR, second)):
        streamed = tmp_path / "stream" / "out" / windowed.window_dir_name(start)
        expected = simulate(population, config.encoder, plan.theta, plan.batch_size,
                            window_sampler(job, start))
        trie = Trie.from_bytes((streamed / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels], start
        hitters = json.loads((streamed / "heavy_hitters.json").read_text())["heavy_hitters"]
        assert sorted(hitters) == sorted(expected.heavy_hitters) and hitters
    reports = {r["window_start"]: r for r in windowed.read_window_reports(job)}
    assert reports["2025-11-23T10:00:00Z"]["input"]["distinct_users"] == 2001  # the straggler counted
    for report in reports.values():
        assert report["records_admitted"] == report["input"]["records"]
        assert report["records_admitted_after_close"] == 0
    assert open(os.path.join(job.state_root, "late.txt")).read().split() == [str(T0), "2"]


def test_triehh_plus_plus_streaming_windows_equal_the_keyed_simulation(tmp_path):
    rng = np.random.default_rng(8)
    first, second = one_word_population(2000, 1, "a"), one_word_population(2000, 2, "b")
    early, second_batches = one_stamp_batches(first, T0, rng), one_stamp_batches(second, T0 + HOUR, rng)
    config = windowed_config(tmp_path, protocol="triehh++")
    events = [T0, early[: len(early) // 2], T0 + HOUR // 2, early[len(early) // 2:], second_batches[:5],
              T0 + HOUR + 1000, second_batches[5:], T0 + 3 * HOUR]
    job = run_streaming_windows(config, events)
    chosen = plan_sample_threshold(4.0, 1e-5, 6)
    for start, population in ((T0, first), (T0 + HOUR, second)):
        expected = simulate_sample_threshold(population, config.encoder, chosen.tau, chosen.sampling_probability,
                                             window_sampler(job, start))
        trie = Trie.from_bytes((tmp_path / "out" / windowed.window_dir_name(start) / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels], start
        assert len(expected.heavy_hitters) >= 2


def _at_ms(batches, ms):
    return [b.set_column(3, "timestamp", pa.array([ms * 1000] * b.num_rows, pa.int64())) for b in batches]


def test_a_late_record_is_dead_lettered_whatever_shard_it_falls_in(tmp_path):
    # Every on-time record of window T0 at one millisecond (one shard); the late ones one
    # millisecond later (another shard, which saw nothing on time): late all the same.
    rng = np.random.default_rng(7)
    early = _at_ms(one_stamp_batches(one_word_population(2000, 1, "a"), T0, rng), T0 // 1000 + 16_000)
    late = _at_ms(one_stamp_batches({"late-2": ["the"], "late-3": ["and"]}, T0, rng), T0 // 1000 + 16_001)
    events = [T0, early, T0 + HOUR + 120 * 1_000_000, late, T0 + 3 * HOUR]
    job = run_streaming_windows(windowed_config(tmp_path, allowed_lateness=60, windows=(T0, T0 + HOUR)),
                                events)
    (report,) = windowed.read_window_reports(job)
    assert report["released"] and report["input"]["records"] == 2000
    assert open(os.path.join(job.state_root, "late.txt")).read().split() == [str(T0), "2"]


def test_the_late_records_of_a_window_without_on_time_records_are_dead_lettered(tmp_path):
    rng = np.random.default_rng(8)
    early = one_stamp_batches(one_word_population(2000, 1, "a"), T0, rng)
    late = one_stamp_batches({"late-2": ["the"], "late-3": ["and"]}, T0 + HOUR, rng)  # all of window 2
    events = [T0, early, T0 + 2 * HOUR + 120 * 1_000_000, late, T0 + 4 * HOUR]
    job = run_streaming_windows(windowed_config(tmp_path, allowed_lateness=60), events)
    # Declared, the second window is released all the same: empty (its census counted 0 users).
    reports = windowed.read_window_reports(job)
    assert [(r["window_start"], r["released"]) for r in reports] == [
        ("2025-11-23T10:00:00Z", True), ("2025-11-23T11:00:00Z", True)]
    assert reports[1]["input"] == {"distinct_users": 0, "records": 0} and reports[1]["heavy_hitters"] == 0
    assert open(os.path.join(job.state_root, "late.txt")).read().split() == [str(T0 + HOUR), "2"]


def test_records_admitted_after_a_window_was_computed_are_reported_not_lost_silently(tmp_path):
    from triehh_beam.job.windows.stream import describe_window

    job = windowed.WindowedJob.for_config(windowed_config(tmp_path), SEED)
    outputs.write_json(job.report_path(T0), {"window_start": windowed.rfc3339(T0), "released": True,
                                               "reason": None, "input": {"distinct_users": 9, "records": 10},
                                               "heavy_hitters": 1, "rounds": [], "published_to": "out"}, True)
    (report,) = windowed.read_window_reports(job)
    assert "records_admitted" not in report and "WARNING" not in describe_window(report)
    directory = os.path.dirname(job.report_path(T0))
    for shard, records in ((0, 7), (8, 5)):
        outputs.write_json(os.path.join(directory, "admitted", f"shard-{shard:03d}.json"),
                             {"records": records}, True)
    (report,) = windowed.read_window_reports(job)
    assert (report["records_admitted"], report["records_admitted_after_close"]) == (12, 2)
    assert "WARNING: records reached this window after it was computed" in describe_window(report)


def test_a_window_with_one_record_and_an_empty_window_publish_the_same_kind_of_result(tmp_path):
    # TrieHH++ (no n anywhere in its plan): one record at 10:00, nothing at 11:00, both declared.
    one = pa.RecordBatch.from_arrays(
        [pa.array([b"u1"], pa.binary()), pa.array(["that"], pa.string()), pa.array([1], pa.int64()),
         pa.array([T0 + 5_000_000], pa.int64())], names=["user_id", "item", "count", "timestamp"])
    config = windowed_config(tmp_path, protocol="triehh++")
    job = run_windows(config, [one])
    published = [tmp_path / "out" / windowed.window_dir_name(start) for start in (T0, T0 + HOUR)]
    assert [sorted(os.listdir(d)) for d in published] == [["_RELEASED", "heavy_hitters.json", "trie.pb"]] * 2
    documents = [json.loads((d / "heavy_hitters.json").read_text()) for d in published]
    assert documents[0].keys() == documents[1].keys()
    assert documents[0]["heavy_hitters"] == documents[1]["heavy_hitters"] == []  # nothing below tau
    assert (published[0] / "trie.pb").read_bytes() == (published[1] / "trie.pb").read_bytes()
    assert len(Ledger(config.resolved_ledger_dir).records()) == 2
    reports = windowed.read_window_reports(job)
    assert [r["input"]["distinct_users"] for r in reports] == [1, 0]


def test_records_outside_the_declared_windows_are_dropped_and_counted(tmp_path):
    from apache_beam.metrics.metric import MetricsFilter

    rng = np.random.default_rng(9)
    batches = (hour_batches(one_word_population(2000, 1, "a"), T0, rng)
               + hour_batches(one_word_population(30, 2, "b"), T0 + 2 * HOUR, rng))
    config = windowed_config(tmp_path, protocol="triehh++", windows=(T0, T0 + HOUR))
    job = windowed.WindowedJob.for_config(config, config.seed)
    decide_windows(job)
    sampler = Sampler(config.seed, config.window_identity())
    p = make_pipeline(PipelineOptions([]))
    gated = p | beam.Create(batches) | SplitIntoWindows(job.windows) | GateLateRecords(job.windows)
    windowed.build_windowed_discovery(gated["records"], job, sampler.window_keys(), sampler.census_key())
    result = p.run()
    result.wait_until_finish()
    (counter,) = result.metrics().query(MetricsFilter().with_name("window.records_outside_declared_windows"))["counters"]
    assert counter.committed == 30
    assert os.listdir(tmp_path / "out") == [windowed.window_dir_name(T0)]
    assert [r["window_start"] for r in windowed.read_window_reports(job)] == ["2025-11-23T10:00:00Z"]


def _delete(*paths):
    import shutil

    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def test_a_window_replayed_three_times_with_output_and_state_deleted_is_charged_three_times(tmp_path):
    rng = np.random.default_rng(10)
    batches = hour_batches(one_word_population(2000, 1, "a"), T0, rng)
    config = windowed_config(tmp_path, protocol="triehh++", windows=(T0, T0 + HOUR),
                             ledger_dir=str(tmp_path / "ledger"))
    nonces = []
    for _ in range(3):
        job = run_windows(config, batches)
        nonces.append(committed_window(job, T0).release_nonce)
        _delete(tmp_path / "out", tmp_path / "state")
    charges = Ledger(config.resolved_ledger_dir).records()
    assert len(charges) == 3 and len({r["record_id"] for r in charges}) == 3
    assert len(set(nonces)) == 3  # three releases, three sets of keys


def test_a_restart_with_the_state_kept_reuses_the_windows_nonce_and_charges_once(tmp_path, monkeypatch):
    rng = np.random.default_rng(11)
    population = one_word_population(2000, 1, "a")
    batches = hour_batches(population, T0, rng)
    config = windowed_config(tmp_path, windows=(T0, T0 + HOUR))

    def crash(self, window):
        raise RuntimeError("the job died after the window was charged and committed")

    with monkeypatch.context() as patched:
        patched.setattr(windowed._ReleaseDoFn, "process", crash)
        with pytest.raises(Exception, match="the job died"):
            run_windows(config, batches)
    job = windowed.WindowedJob.for_config(config, config.seed)
    first = committed_window(job, T0)
    assert first.release_nonce and not first.finished and not (tmp_path / "out").exists()
    # Resumed with other settings: refused, nothing charged or published.
    with pytest.raises(Exception, match="planned with other settings"):
        run_windows(windowed_config(tmp_path, windows=(T0, T0 + HOUR), population=2100), batches)
    run_windows(config, batches)
    again = committed_window(job, T0)
    assert again.finished and again.release_nonce == first.release_nonce
    assert again.ledger_record == first.ledger_record
    assert [r["record_id"] for r in Ledger(config.resolved_ledger_dir).records()] == [first.ledger_record]
    plan = planner.plan(2000, 4.0, 1e-5, 6)
    expected = simulate(population, config.encoder, plan.theta, plan.batch_size, window_sampler(job, T0))
    trie = Trie.from_bytes((tmp_path / "out" / windowed.window_dir_name(T0) / "trie.pb").read_bytes())
    assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels]


def test_a_daily_budget_for_three_windows_refuses_the_fourth_and_releases_the_next_day(tmp_path):
    day = 24 * HOUR
    d0 = T0 - 10 * HOUR  # 2025-11-23T00:00:00Z
    rng = np.random.default_rng(12)
    batches = (hour_batches(one_word_population(1500, 1, "a"), d0 + 18 * HOUR, rng)
               + hour_batches(one_word_population(1500, 2, "b"), d0 + day, rng))
    probe = windowed_config(tmp_path / "probe", protocol="triehh++")
    spend = windowed.WindowedJob.for_config(probe, SEED).plan().epsilon
    config = windowed_config(tmp_path, protocol="triehh++", window=6 * 3600, windows=(d0, d0 + 2 * day),
                             ledger_dir=str(tmp_path / "ledger"), budget_epsilon=3.5 * spend,
                             budget_period=86400)
    job = windowed.WindowedJob.for_config(config, SEED)
    decisions = decide_windows(job)
    assert [d.charged for d in decisions] == [True, True, True, False, True, True, True, False]
    assert decisions[3].refused_by_budget and decisions[3].next_allowed == d0 + day
    assert "refused by the budget (a user per day)" in decisions[3].reason
    assert decisions[7].next_allowed == d0 + 2 * day
    run_windows(config, batches)  # decides again (finds every decision) and publishes
    out = tmp_path / "out"
    released = sorted(d for d in os.listdir(out) if (out / d / "_RELEASED").exists())
    refused = sorted(d for d in os.listdir(out) if (out / d / "_REFUSED").exists())
    assert refused == [windowed.window_dir_name(d0 + 18 * HOUR), windowed.window_dir_name(d0 + 42 * HOUR)]
    assert len(released) == 6 and not set(released) & set(refused)
    marker = json.loads((out / refused[0] / "_REFUSED").read_text())
    assert marker["refused_by"] == "budget" and marker["next_allowed_window"] == "2025-11-24T00:00:00Z"
    assert os.listdir(out / refused[0]) == ["_REFUSED"]  # the day's 4th window had records: none published
    charges = Ledger(config.resolved_ledger_dir).records()
    assert len(charges) == 6  # the refused windows charged nothing
    assert {r["window_start"] for r in charges}.isdisjoint({"2025-11-23T18:00:00Z", "2025-11-24T18:00:00Z"})
    document = json.loads((out / windowed.window_dir_name(d0 + day) / "heavy_hitters.json").read_text())
    unit = document["window"]["privacy_unit"]
    assert unit["unit"] == "a user per day" and unit["budget_period_seconds"] == 86400
    assert "a user active on k days is covered by k times that" in unit["meaning"]
    reports = {r["window_start"]: r for r in windowed.read_window_reports(job)}
    assert not reports["2025-11-23T18:00:00Z"]["released"]
    assert reports["2025-11-24T00:00:00Z"]["released"]


@pytest.mark.parametrize("overrides", [{}, {"protocol": "triehh++", "estimate_frequencies": 0.5}])
def test_the_windowed_graph_reads_no_side_input(tmp_path, overrides):
    """A window's plan, thresholds, frontiers, leaves and counts meet its records by key in
    groupings: no step reads a side input, which Prism 2.77 hands to a streaming step before it
    is filled (docs/stream_input.md). Fails on the graph of f7bd3e6 (plan, thresholds, frontier,
    sizes, results and estimates were side inputs)."""
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import beam_runner_api_pb2

    config = windowed_config(tmp_path, **overrides)
    job = windowed.WindowedJob.for_config(config, config.seed)
    sampler = Sampler(config.seed, config.window_identity())
    p = beam.Pipeline()
    gated = p | beam.Create([]).with_output_types(pa.RecordBatch) | SplitIntoWindows(job.windows) | GateLateRecords(
        job.windows)
    windowed.build_windowed_discovery(gated["records"], job, sampler.window_keys(), sampler.census_key())
    pardos = {}
    for transform in p.to_runner_api().components.transforms.values():
        if transform.spec.urn == common_urns.primitives.PAR_DO.urn:
            payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
            pardos[transform.unique_name] = list(payload.side_inputs)
    assert any("PlanAndCharge" in name for name in pardos) and any("KeepSampled" in n or "RankAllRounds" in n
                                                                   for n in pardos)
    assert {name: sides for name, sides in pardos.items() if sides} == {}
