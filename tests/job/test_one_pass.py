"""One pass over the data (``run_discovery``, in-process runner): the sampling pass draws every
round's sample once; rounds read only their sample; one job per round and every round in one job
(``rounds_per_job="all"``) give byte-identical ``trie.pb``, equal to the keyed simulation for the
same seed and job identity, for several seeds (one per item type), item types and many items per user. Also: the
samples are private and deleted at the end unless kept, the pass is checked against the census,
a lost sample is drawn again (the short sample: tests/job/batch/test_driver.py), and levels a
one-job run wrote are committed in order by the next run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from triehh_beam.io.write import write_records
from triehh_beam.job.batch import driver as driver_lib
from triehh_beam.job.batch import levels
from triehh_beam.job.batch.driver import DiscoveryConfig, InputChangedError, run_discovery
from triehh_beam.job.settings import sources
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate
from tests.one_pass_jobs import discovery_config, job_seed, population
from tests.release_keys import keyed_identity
from triehh_beam.job.release.lifecycle import Release

@pytest.fixture(scope="module")
def populations(tmp_path_factory):
    root = tmp_path_factory.mktemp("one-pass")
    made = {}
    for kind in ("one_word", "many_items", "int"):
        rows, users, fields = population(kind, np.random.default_rng(sum(map(ord, kind))))
        path = root / f"{kind}.parquet"
        write_records(str(path), rows)
        made[kind] = (path, users, fields)
    return made


def _encoder(config: DiscoveryConfig) -> ItemEncoder:
    return config.encoder


def _clear(output_dir) -> None:
    shutil.rmtree(output_dir, ignore_errors=True)
    shutil.rmtree(f"{output_dir}.state", ignore_errors=True)


# One seed per item type, three in all: a second seed on the same population ran the same code
# (tests/job/batch/test_driver.py holds ten seeds to the keyed simulation, in both modes).
@pytest.mark.parametrize("kind, label", [
    pytest.param("one_word", "a", marks=pytest.mark.slow),  # over 5 s, as the others
    pytest.param("many_items", "b", marks=pytest.mark.slow),
    pytest.param("int", "c", marks=pytest.mark.slow),
])
def test_per_round_jobs_one_job_and_keyed_simulation_give_the_same_trie(populations, kind, label, tmp_path):
    path, users, fields = populations[kind]
    output_dir = tmp_path / "out"  # one path for both modes, the second running the first's release
    tries, states = {}, {}
    release = None
    for mode in ("1", "all"):
        _clear(output_dir)
        config = discovery_config(path, output_dir, job_seed(label), rounds_per_job=mode, **fields)
        run_discovery(config, release=release)
        tries[mode] = (output_dir / "trie.pb").read_bytes()
        states[mode] = StateStore(config.resolved_state_dir).load()
        release = Release.of_state(states[mode])  # its keys: seed, identity and nonce
    assert tries["1"] == tries["all"]
    state = states["1"]
    simulated = simulate(users, config.encoder, state.plan.theta, state.plan.batch_size, job_seed(label),
                         sampling="keyed", identity=keyed_identity(state))
    trie = Trie.from_bytes(tries["1"])
    assert trie.levels == simulated.levels
    assert len(trie.levels) >= 2, "the population must grow a trie of several levels"
    for mode in ("1", "all"):
        rounds = states[mode].rounds
        assert states[mode].stop_reason == simulated.stop.describe()
        assert [r.counters["users_sampled"] for r in rounds] == [s.users_sampled for s in simulated.round_stats]
        assert [r.counters["votes_cast"] for r in rounds] == [s.votes_cast for s in simulated.round_stats]
        assert list(states[mode].samples.users_sampled) == [state.plan.batch_size] * state.plan.max_length


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_the_samples_are_private_and_deleted_when_the_job_ends(populations, tmp_path):
    path, _, _ = populations["one_word"]
    config = discovery_config(path, tmp_path / "out", job_seed("a"))
    run_discovery(config)
    state = StateStore(config.resolved_state_dir).load()
    assert state.samples.complete and state.samples.deleted
    assert not os.path.exists(state.samples.dir)
    assert not os.path.exists(levels.levels_dir(config.resolved_state_dir, state.job_id))
    report = json.loads(pathlib.Path(config.resolved_state_dir, "operator_report.json").read_text())
    assert report["sampling"]["samples"] == "deleted"

    kept = discovery_config(path, tmp_path / "kept", job_seed("a"), keep_samples=True)
    run_discovery(kept)
    state = StateStore(kept.resolved_state_dir).load()
    assert not state.samples.deleted and state.samples.dir.startswith(kept.resolved_state_dir)
    parts = sorted(pathlib.Path(state.samples.dir).rglob("*.parquet"))
    assert {p.parent.name for p in parts} == {f"round-{r:04d}" for r in range(1, state.plan.max_length + 1)}
    # Inside the owner-only state directory, and nowhere in what is published.
    assert os.stat(kept.resolved_state_dir).st_mode & 0o077 == 0
    assert not list(pathlib.Path(kept.output_dir).rglob("*.parquet"))


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_discovery_reads_the_input_once_and_rounds_never(populations, tmp_path, monkeypatch):
    # Every record is read by the one first pass (census and candidates together): the cut and
    # the rounds read candidates and samples only (the read transform is built exactly once).
    path, _, _ = populations["one_word"]
    built = []
    original = sources.read_transform

    def counting(*args, **kwargs):
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(sources, "read_transform", counting)
    for mode in ("1", "all"):
        built.clear()
        result = run_discovery(discovery_config(path, tmp_path / mode, job_seed("a"), rounds_per_job=mode))
        assert result.rounds_run >= 3
        assert len(built) == 1, mode


def test_input_changed_before_a_resumed_pass_is_refused(tmp_path, monkeypatch):
    # A run that dies after its plan is charged, before its candidates are cut, resumes by
    # reading the records again (its candidates are not kept across runs): that pass must rank
    # exactly what the census counted, even when the file's size and time do not tell.
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"user_id": u, "item": w}) + "\n"
                               for u, w in enumerate(["hello", "hey", "hi"] * 20)), encoding="utf-8")
    config = discovery_config(records, tmp_path / "out", job_seed("a"), epsilon=1.0, theta=1, batch_size=5,
                     allow_no_guarantee=True)

    def die(*args, **kwargs):
        raise _Stop()

    with monkeypatch.context() as patch:
        patch.setattr(driver_lib.Driver, "_cut_job", die)
        with pytest.raises(_Stop):
            run_discovery(config)
    state = StateStore(config.resolved_state_dir).load()
    assert state.plan.batch_size and not state.samples.complete
    left = pathlib.Path(config.resolved_state_dir, "candidates", state.job_id)
    assert list(left.rglob("*.parquet"))  # raw items in the private state, until the resume
    text = records.read_text(encoding="utf-8")
    first = text.splitlines()[0]
    stat = records.stat()
    records.write_text(text.replace(first, "x" * len(first), 1), encoding="utf-8")
    os.utime(records, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # only reading it can tell
    with pytest.raises(InputChangedError, match="ranked 59 records where the census counted 60"):
        run_discovery(config)
    state = StateStore(config.resolved_state_dir).load()
    assert not state.samples.complete and state.rounds_completed == 0 and not state.rounds
    # The refused pass wrote candidates of its own (raw items): gone with it, like the first's.
    assert not list(pathlib.Path(config.resolved_state_dir, "candidates").rglob("*.parquet"))
    assert not left.exists()  # the resume does not use them: deleted before it reads


class _Stop(Exception):
    pass


@pytest.fixture(scope="module")
def one_word_baseline(populations, tmp_path_factory):
    """The one-word population's unbroken job (seed "a", every round in one job: the trie is
    the per-round one's) at one output path, shared by the tests that break a run of the same
    job: (output path, its trie.pb, its release). Each such test clears the path first (a
    worker runs a module's tests in turn)."""
    path, _, _ = populations["one_word"]
    output_dir = tmp_path_factory.mktemp("one-word-baseline") / "out"
    config = discovery_config(path, output_dir, job_seed("a"), rounds_per_job="all")
    run_discovery(config)
    expected = (output_dir / "trie.pb").read_bytes()
    release = Release.of_state(StateStore(config.resolved_state_dir).load())
    _clear(output_dir)
    return output_dir, expected, release


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["1", "all"])
def test_a_lost_sample_is_drawn_again_and_changes_nothing(populations, one_word_baseline, monkeypatch, mode):
    path, _, _ = populations["one_word"]
    output_dir, expected, release = one_word_baseline  # the unbroken job, run again below
    _clear(output_dir)
    config = discovery_config(path, output_dir, job_seed("a"), rounds_per_job=mode)

    def stop(*args, **kwargs):
        raise _Stop()

    # A run that dies once its samples are committed, before any round (one job per round here,
    # so that the one-job run below starts from the samples alone).
    with monkeypatch.context() as patch:
        patch.setattr(driver_lib.Driver, "run_round", stop)
        with pytest.raises(_Stop):
            run_discovery(dataclasses.replace(config, rounds_per_job="1"), release=release)
    state = StateStore(config.resolved_state_dir).load()
    assert state.samples.complete and not state.rounds
    lost = pathlib.Path(state.samples.dir, "round-0002")
    assert list(lost.glob("*.parquet"))
    shutil.rmtree(lost)
    events = []
    run_discovery(config, events=events.append)
    assert [e["round"] for e in events if e["event"] == "resample"] == [2]
    assert (output_dir / "trie.pb").read_bytes() == expected


@pytest.mark.parametrize("written", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_levels_a_one_job_run_wrote_are_committed_in_order_by_the_next_run(populations, one_word_baseline,
                                                                           monkeypatch, written):
    path, _, _ = populations["one_word"]
    output_dir, expected, release = one_word_baseline  # the unbroken job, run again below
    _clear(output_dir)
    config = discovery_config(path, output_dir, job_seed("a"), rounds_per_job="all")
    original = levels.write_level
    count = [0]

    def die_after(directory, round_index, result, encoder):
        original(directory, round_index, result, encoder)
        count[0] += 1
        if count[0] == written:
            raise _Stop()

    with monkeypatch.context() as patch:
        patch.setattr(levels, "write_level", die_after)
        with pytest.raises(Exception):
            run_discovery(config, release=release)
    state = StateStore(config.resolved_state_dir).load()
    assert state.rounds_completed == 0  # the levels are written, not yet committed
    events = []
    run_discovery(config, events=events.append)
    assert (output_dir / "trie.pb").read_bytes() == expected
    # The written levels are committed first, in order, before anything is run again.
    names = [e["event"] for e in events]
    assert names[names.index("plan") + 1:][:written] == ["round"] * written
    assert [e["round"] for e in events if e["event"] == "round"][:written] == list(range(1, written + 1))


def test_candidates_a_killed_run_left_are_deleted_and_none_outlive_the_samples(populations, tmp_path):
    # A run killed inside its first read commits no job but may leave candidates (raw items) in
    # the state directory: the next run deletes them before its own read, and its own once its
    # samples are drawn. The directory stays owner-only.
    path, _, _ = populations["one_word"]
    config = discovery_config(path, tmp_path / "out", job_seed("a"))
    left = pathlib.Path(config.resolved_state_dir, "candidates", "0" * 32)
    left.mkdir(parents=True)
    (left / "part-00000-of-00001.parquet").write_bytes(b"raw items of a killed run")
    run_discovery(config)
    root = pathlib.Path(config.resolved_state_dir, "candidates")
    assert not left.exists() and not list(root.rglob("*"))
    assert os.stat(root).st_mode & 0o777 == 0o700
