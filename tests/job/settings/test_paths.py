"""Issue 15, item 4: paths compared as typed. A job records canonical paths (``job/settings/paths.py``) for
its input pattern, state directory, ledger and output, so that ``--input ./data/records.parquet``
resumes a job started with ``--input data/records.parquet``, and a job started with relative
paths resumes from another working directory. Each resumed job ends with the trie an unbroken
run gives (the same samples: the recorded identity keys them).
"""

import hashlib
import json
import os
import pathlib

import pytest

from tests.driver_events import StoppedAfterRound, stop_after_round
from triehh_beam.job.batch.driver import ConfigMismatchError, DiscoveryConfig, run_discovery
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.settings.paths import canonical_path, canonical_pattern
from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.state.state_store import StateStore

SEED = hashlib.sha256(b"triehh-beam canonical paths tests").digest()  # public: tests only
L = 6


def test_canonical_local_paths_are_absolute_and_normalised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    here = str(tmp_path)
    for typed in ("data/x.jsonl", "./data/x.jsonl", "data//x.jsonl", "data/./x.jsonl", "other/../data/x.jsonl",
                  f"{here}/data/x.jsonl"):
        assert canonical_path(typed) == f"{here}/data/x.jsonl", typed
    assert canonical_path("out/") == f"{here}/out"
    assert canonical_path("") == ""


def test_canonical_urls_keep_their_object_names():
    assert canonical_path("gs://bucket/out/") == "gs://bucket/out"
    assert canonical_path("GS://bucket/out") == "gs://bucket/out"
    # Consecutive slashes are part of a GCS object's name: another object, never merged.
    assert canonical_path("gs://bucket/x//y") == "gs://bucket/x//y" != canonical_path("gs://bucket/x/y")


def test_canonical_patterns_are_sorted_distinct_parts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert canonical_pattern("b/*.csv, ./a.csv,a.csv") == f"{tmp_path}/a.csv,{tmp_path}/b/*.csv"
    assert canonical_pattern("data/*.parquet") == canonical_pattern(f"{tmp_path}/data/*.parquet")
    assert canonical_pattern("data/*.parquet") != canonical_pattern("data/*.jsonl")


def _config(pattern, output, **overrides) -> DiscoveryConfig:
    fields = dict(epsilon=4.0, delta=1e-6, max_length=L, seed=SEED)
    fields.update(overrides)
    return DiscoveryConfig(input_pattern=str(pattern), output_dir=str(output), **{"protocol": "triehh", **fields})


def _remove(path: pathlib.Path) -> None:
    if path.exists():
        for child in sorted(path.rglob("*"), reverse=True):
            child.rmdir() if child.is_dir() else child.unlink()
        path.rmdir()


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory, make_population):
    """A project directory with data/records-*.parquet (3,000 users), the trie an unbroken run
    gives and its release (the tests run the same job, the same input and output, under the same
    release's keys, so the same samples)."""
    root = tmp_path_factory.mktemp("paths") / "project"
    make_population(3000, max_chars=L - 1).write(root / "data", shards=2)
    result = run_discovery(_config(root / "data" / "records-*.parquet", root / "out"))
    release = Release.of_state(StateStore(str(root / "out.state")).load())
    return root, pathlib.Path(result.output_path).with_name("trie.pb").read_bytes(), release


@pytest.fixture
def project(unbroken):
    """The project, with no output, state or ledger yet."""
    root, trie, release = unbroken
    for leftover in ("out", "out.state", "private"):
        _remove(root / leftover)
    return root, trie, release


def _stopped(config, release=None):
    with pytest.raises(StoppedAfterRound):
        run_discovery(config, events=stop_after_round(1), release=release)
    assert StateStore(config.resolved_state_dir).load().rounds_completed == 1


def test_a_pattern_typed_differently_resumes(project, monkeypatch):
    root, trie, release = project
    monkeypatch.chdir(root)
    _stopped(_config("data/records-*.parquet", "out"), release)
    result = run_discovery(_config("./data/records-*.parquet", "./out/"))
    assert result.resumed_from_round == 1
    assert (root / "out" / "trie.pb").read_bytes() == trie  # the samples an unbroken run draws


def test_relative_paths_resume_from_another_working_directory(project, monkeypatch):
    root, trie, release = project
    ledger = root / "private" / "ledger"
    monkeypatch.chdir(root)
    _stopped(_config("data/records-*.parquet", "out", ledger_dir="private/ledger", budget_epsilon=100.0), release)
    state = StateStore(str(root / "out.state")).load()
    # Recorded canonical: absolute, whichever directory the job ran from.
    assert state.input.file_pattern == f"{root}/data/records-*.parquet"
    assert state.ledger == str(ledger)
    assert all(os.path.isabs(f.path) for f in state.input_snapshot.files)
    assert json.loads(state.sampling_identity)["output_dir"] == f"{root}/out"
    elsewhere = root.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    monkeypatch.chdir(elsewhere)
    result = run_discovery(_config("../project/data/records-*.parquet", "../project/out",
                                   ledger_dir="../project/private/ledger", budget_epsilon=100.0))
    assert result.resumed_from_round == 1
    assert (root / "out" / "trie.pb").read_bytes() == trie
    assert len(Ledger(str(ledger)).records()) == 1  # charged once
    # Another input is still another job.
    with pytest.raises(ConfigMismatchError, match="input"):
        run_discovery(_config("../project/data/records-00.parquet", "../project/out",
                              ledger_dir="../project/private/ledger", budget_epsilon=100.0))

