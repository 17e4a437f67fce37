"""What a job publishes against what it keeps private, through the real driver on Beam's
in-process runner: the publishable ``heavy_hitters.json`` and ``trie.pb`` are the same for two
neighbouring populations (4,000 users, and the same minus one) whenever their tries are, while
the operator report in the state directory tells them apart; no count the census made reaches
the published directory; and a population declared public (``--population``) publishes n, m
and the achieved epsilon, delta, and is refused when the data holds fewer users.

Every run uses the same fixed seed; the state directory is given outside the output directory,
as finding 5 makes it by default.
"""

import hashlib
import json
import pathlib

import shutil

import pytest

from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import DiscoveryConfig, run_discovery
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.planning import planner

SEED = hashlib.sha256(b"triehh-beam publishable tests").digest()  # public: tests only
EPSILON, DELTA, L = 4.0, 1e-6, 6
N = 4000
# Drawn independently of the records (uuid4 and the clock): they differ between any two runs,
# neighbouring or not, so they are left out of the comparison.
RANDOM_FIELDS = ("job_id", "created_at")


def _config(records: str, root: pathlib.Path, **overrides) -> DiscoveryConfig:
    return DiscoveryConfig(
        input_pattern=records, output_dir=str(root / "out"), state_dir=str(root / "state"),
        seed=SEED, epsilon=EPSILON, delta=DELTA, max_length=L, **{"protocol": "triehh", **overrides})


def _published(root: pathlib.Path) -> dict:
    return json.loads((root / "out" / "heavy_hitters.json").read_text(encoding="utf-8"))


def _report(root: pathlib.Path) -> dict:
    return json.loads((root / "state" / "operator_report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def neighbours(tmp_path_factory, make_population):
    """Runs the driver on a population of 4,000 users and on the same minus one user, who holds
    an item no one else has (the case where per-round counters told them apart)."""
    population = make_population(N, max_chars=L - 1)
    rows = population.rows()
    removed = 1234
    rows[removed] = (rows[removed][0], "zqx")  # unique: no English word in the vocabulary
    base = tmp_path_factory.mktemp("neighbours")
    runs, release = {}, None
    for name, kept in (("whole", rows), ("minus_one", rows[:removed] + rows[removed + 1:])):
        write_records(str(base / "records.parquet"), kept)
        runs[name] = _run_as_the_same_job(base, name, release=release)
        # The neighbour runs under the first release's keys (seed, identity and nonce): the
        # mechanism's randomness held fixed, only the data differs.
        release = Release.of_state(StateStore(str(runs[name] / "state")).load())
    return runs


def _run_as_the_same_job(base: pathlib.Path, name: str, release=None, **overrides) -> pathlib.Path:
    """Runs the job on ``base/records.parquet`` into ``base/out`` and ``base/state`` (with
    ``release``'s keys if given, else a fresh release's), then moves the three to ``base/name``.
    Neighbouring datasets are the same job on different data: the input and output paths are
    part of the job's identity, mixed into its sampling keys with the release's nonce."""
    run_discovery(_config(str(base / "records.parquet"), base, **overrides), release=release)
    root = base / name
    root.mkdir()
    for part in ("records.parquet", "out", "state"):
        (base / part).rename(root / part)
    return root


def test_neighbouring_populations_publish_identical_files_when_their_tries_are_equal(neighbours):
    whole, minus_one = neighbours["whole"], neighbours["minus_one"]
    trie_whole = (whole / "out" / "trie.pb").read_bytes()
    # The precondition of the comparison, deterministic at this seed (if the removed user had
    # changed the trie, nothing would be claimed).
    assert trie_whole == (minus_one / "out" / "trie.pb").read_bytes()
    assert _published(whole)["heavy_hitters"]
    assert sorted(path.name for path in (whole / "out").iterdir()) == ["heavy_hitters.json", "trie.pb"]

    def without_random_fields(root):
        text = (root / "out" / "heavy_hitters.json").read_text(encoding="utf-8")
        document = _published(root)
        for name in RANDOM_FIELDS:
            text = text.replace(json.dumps(document[name]), '"-"')
        return text

    assert without_random_fields(whole) == without_random_fields(minus_one)  # byte for byte, but two fields
    # The operator report tells them apart: it holds every count.
    report_whole, report_minus_one = _report(whole), _report(minus_one)
    assert report_whole["input"]["distinct_users"] == N
    assert report_minus_one["input"]["distinct_users"] == N - 1
    assert report_whole["input"]["records_read"] == N and report_minus_one["input"]["records_read"] == N - 1
    assert report_whole["privacy"]["epsilon"] != report_minus_one["privacy"]["epsilon"]
    assert report_whole["private"].startswith("PRIVATE operator data")


def _numbers(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def test_the_published_directory_holds_no_count_from_the_census(tmp_path, make_population, grep_files):
    population = make_population(N - 1, max_chars=L - 1)
    write_records(str(tmp_path / "records.parquet"), population.rows())
    bad = tmp_path / "bad.jsonl"  # the N-th user, and 7 bad rows: dropped, counted by the census
    bad.write_text('{"user_id": "last", "item": "the"}\n' + '{"user_id": null, "item": "the"}\n' * 4
                   + "not json\n" * 3, encoding="utf-8")
    run_discovery(_config(f"{tmp_path / 'records.parquet'},{bad}", tmp_path))
    plan = planner.plan(N, EPSILON, DELTA, L)
    published = _published(tmp_path)
    assert "input" not in published
    for name in ("population", "batch_size", "gamma", "epsilon", "delta"):
        assert name not in published["privacy"], name
    assert published["privacy"]["target_epsilon"] == EPSILON and published["privacy"]["theta"] == plan.theta
    private_figures = {N, N + 7, plan.batch_size, plan.epsilon, plan.delta, plan.gamma}
    assert set(_numbers(published)) & private_figures == set()
    out = tmp_path / "out"
    for figure in (str(N), f"{N:,}", str(N + 7), f"{N + 7:,}", f"{plan.epsilon:.6g}", f"{plan.epsilon:.4g}",
                   "records_read", "dropped"):
        assert grep_files(out, figure.encode()) == [], figure
    # ... and the operator report, in the state directory, holds them all.
    report = _report(tmp_path)
    assert report["input"]["records_read"] == N + 7 and sum(report["input"]["dropped"].values()) == 7
    assert report["input"]["files_read"] == 2
    assert (report["privacy"]["population"], report["privacy"]["batch_size"]) == (N, plan.batch_size)



def test_a_public_population_publishes_n_m_and_the_achieved_epsilon(neighbours, tmp_path):
    # Both neighbours hold at least N - 1 users: declared public, N - 1 is what both plan for.
    plan = planner.plan(N - 1, EPSILON, DELTA, L)
    texts, release = {}, None
    for name, source in neighbours.items():
        shutil.copy(source / "records.parquet", tmp_path / "records.parquet")
        root = _run_as_the_same_job(tmp_path, name, release=release, population=N - 1)
        release = Release.of_state(StateStore(str(root / "state")).load())  # the neighbour's keys
        published = _published(root)
        assert published["privacy"]["population_public"] is True
        assert (published["privacy"]["population"], published["privacy"]["batch_size"]) == (N - 1, plan.batch_size)
        assert (published["privacy"]["epsilon"], published["privacy"]["delta"]) == (plan.epsilon, plan.delta)
        assert _report(root)["input"]["distinct_users"] == (N if name == "whole" else N - 1)  # the count stays private
        texts[name] = (root / "out" / "trie.pb").read_bytes(), published
    (trie_whole, whole), (trie_minus_one, minus_one) = texts["whole"], texts["minus_one"]
    assert trie_whole == trie_minus_one
    for name in RANDOM_FIELDS:
        del whole[name], minus_one[name]
    assert whole == minus_one


def test_a_public_population_larger_than_the_input_is_refused(neighbours, tmp_path, capsys):
    from triehh_beam.cli import main

    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    code = main(["discover", "--protocol", "triehh", "--input", str(neighbours["whole"] / "records.parquet"), "--output", str(tmp_path / "out"),
                 "--epsilon", str(EPSILON), "--delta", str(DELTA), "--max-length", str(L),
                 "--seed-file", str(seed), "--population", str(N + 1)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        f"triehh: error: --population {N + 1:,} is more than the {N:,} distinct users the input holds: "
        "sampling m of fewer users than planned would exceed the planned epsilon; no round was run"]
    assert not (tmp_path / "out" / "state" / "MANIFEST.json").exists()
