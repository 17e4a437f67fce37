"""Deny lists in windowed discoveries (``--deny-list`` with ``--window`` and in ``triehh stream``,
job/windows/windowed.py; bounded, and on the streaming DirectRunner): each window's trie equals the keyed
simulation of that window's records alone, under the window's committed keys, given the same deny
set (the batch rounds' vote, ``columnar.count_votes``), and differs from the simulation without it
(so the comparison can fail); the window's state, published result and private report record the
list, and a resume with another list is refused."""

import dataclasses
import json

import numpy as np
import pytest

from triehh_beam.job.settings import deny_lists
from triehh_beam.job.windows import windowed
from triehh_beam.job.windows.releases import WindowReleases
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate, simulate_sample_threshold

from tests.published_releases import release_document
from tests.windowed_jobs import (HOUR, T0, WORDS, committed_window, hour_batches, one_stamp_batches,
                                 run_streaming_windows, run_windows, window_sampler, windowed_config,
                                 fixed_nonces)  # noqa: F401 (the fixture: fixed release nonces)

DENIED = ["the", "and"]


def _several_words(users: int, seed: int, prefix: str):
    """Users holding 1 to 3 records of Zipf-drawn words: a user holding a denied word most often
    holds another, which the deny list makes it vote for."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    population = {}
    for i in range(users):
        words = rng.choice(len(WORDS), size=int(rng.integers(1, 4)), p=weights / weights.sum())
        population[f"{prefix}{i}"] = [WORDS[w] for w in words]
    return population


def _deny_file(tmp_path, items=DENIED, name="earlier_heavy_hitters.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(release_document(items)))
    return str(path)


@pytest.mark.parametrize("protocol", ["triehh", "triehh++"])
def test_each_window_with_a_deny_list_equals_the_keyed_simulation_with_it(tmp_path, protocol):
    rng = np.random.default_rng(3)
    first, second = _several_words(2500, 11, "a"), _several_words(2200, 12, "b")
    batches = hour_batches(first, T0, rng) + hour_batches(second, T0 + HOUR, rng)
    overrides = {"protocol": "triehh++"} if protocol == "triehh++" else {"population": 2200}
    config = windowed_config(tmp_path, deny_list=(_deny_file(tmp_path),), **overrides)
    denied = config.deny.sequences
    assert denied == {config.encoder.encode(w) for w in DENIED}
    job = run_windows(config, batches)
    for start, population in ((T0, first), (T0 + HOUR, second)):
        out = tmp_path / "out" / windowed.window_dir_name(start)
        sampler = window_sampler(job, start)
        if protocol == "triehh":
            plan = planner.plan(2200, 4.0, 1e-5, 6)
            expected, without = (simulate(population, config.encoder, plan.theta, plan.batch_size, sampler,
                                          denied=d) for d in (denied, frozenset()))
        else:
            chosen = plan_sample_threshold(4.0, 1e-5, 6)
            expected, without = (simulate_sample_threshold(population, config.encoder, chosen.tau,
                                                           chosen.sampling_probability, sampler, denied=d)
                                 for d in (denied, frozenset()))
        trie = Trie.from_bytes((out / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels], start
        assert [set(level) for level in trie.levels] != [set(level) for level in without.levels], start
        assert set(DENIED) <= set(without.heavy_hitters)  # without the list, both are found
        document = json.loads((out / "heavy_hitters.json").read_text())
        assert sorted(document["heavy_hitters"]) == sorted(expected.heavy_hitters)
        assert not set(document["heavy_hitters"]) & set(DENIED)
        assert len(expected.heavy_hitters) >= 2  # the votes moved to other words, which are found
        assert document["deny_list"]["items"] == 2
        assert document["deny_list"]["items_digest"] == deny_lists.sequences_digest(denied, config.encoder)
        assert config.deny_list[0] not in (out / "heavy_hitters.json").read_text()  # operator paths stay private
        assert committed_window(job, start).deny_list.digest == config.deny.digest
        (report,) = [r for r in windowed.read_window_reports(job) if r["window_start"] == windowed.rfc3339(start)]
        assert report["deny_list"]["files"] == list(config.deny_list)


def test_streaming_windows_with_a_deny_list_equal_the_keyed_simulation_with_it(tmp_path):
    """The same graph on the streaming DirectRunner (``triehh stream``'s), fed by a TestStream."""
    rng = np.random.default_rng(9)
    first, second = _several_words(2000, 21, "a"), _several_words(2000, 22, "b")
    early, later = one_stamp_batches(first, T0, rng), one_stamp_batches(second, T0 + HOUR, rng)
    config = windowed_config(tmp_path, protocol="triehh++", deny_list=(_deny_file(tmp_path),))
    job = run_streaming_windows(config, [T0, early[: len(early) // 2], T0 + HOUR // 2,
                                         early[len(early) // 2:], later[:5], T0 + HOUR + 1000, later[5:],
                                         T0 + 3 * HOUR])
    chosen = plan_sample_threshold(4.0, 1e-5, 6)
    for start, population in ((T0, first), (T0 + HOUR, second)):
        expected, without = (simulate_sample_threshold(population, config.encoder, chosen.tau,
                                                       chosen.sampling_probability, window_sampler(job, start),
                                                       denied=d) for d in (config.deny.sequences, frozenset()))
        trie = Trie.from_bytes((tmp_path / "out" / windowed.window_dir_name(start) / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels], start
        assert [set(level) for level in trie.levels] != [set(level) for level in without.levels], start
        assert not set(trie.heavy_hitters()) & set(DENIED) and len(expected.heavy_hitters) >= 2


def test_a_window_planned_with_a_deny_list_is_not_resumed_with_another(tmp_path):
    config = windowed_config(tmp_path, protocol="triehh++", deny_list=(_deny_file(tmp_path),))
    job = windowed.WindowedJob.for_config(config, config.seed)
    assert WindowReleases(job).decide(T0).charged
    for other in ((), (_deny_file(tmp_path, ["the"], "another.json"),)):
        changed = windowed.WindowedJob.for_config(dataclasses.replace(config, deny_list=other), config.seed)
        with pytest.raises(windowed.WindowStateMismatchError, match="another deny list"):
            WindowReleases(changed).decide(T0)


def test_a_bad_deny_list_file_is_refused_before_any_window(tmp_path):
    path = tmp_path / "raw.json"
    path.write_text(json.dumps({"heavy_hitters": ["the"]}))
    config = windowed_config(tmp_path, protocol="triehh++", deny_list=(str(path),))
    with pytest.raises(deny_lists.DenyListError, match="raw.json"):
        windowed.WindowedJob.check(config)
    assert not (tmp_path / "state").exists() and not (tmp_path / "out").exists()
