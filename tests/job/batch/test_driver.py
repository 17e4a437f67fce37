"""End-to-end tests of the multi-round driver (``run_discovery``) on Beam's in-process runner.

What is compared with what:
* the pipeline against the reference simulation in keyed mode: IDENTICAL tries for the same
  secret seed, theta and m (the strongest check; it also means the pipeline's statistics are
  the keyed simulation's);
* the pipeline against the simulation in numpy mode (independent draws): mean recall@K agrees
  statistically (fixed seeds, a Welch t-test at a stated alpha);
* the driver's promises: determinism across runs and runners, resume after a SIGKILL, refusal
  of a different job or an infeasible target, budget recorded before release, and nothing below
  theta (nor the seed) written where it must not be.

Populations are drawn from the bundled demo vocabulary (real English words) with Zipf weights,
one word per user, with numpy's ``default_rng`` at fixed seeds. L is kept small (4 to 8) so
that each run is a few seconds.
"""

import base64
import dataclasses
import hashlib
import json
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from scipy import stats

from triehh_beam.io.schema import RecordFormatError
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import (ConfigMismatchError, DiscoveryConfig, InfeasiblePlanError,
                                          run_discovery)
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.state.state_store import MANIFEST_NAME, StateStore
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder, is_terminated
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.reference.metrics import ground_truth, recall_at_k
from triehh_beam.reference.simulation import simulate, simulate_many
from tests.release_keys import keyed_identity
from triehh_beam.protocol.rounds.trie import Trie

SEED = hashlib.sha256(b"triehh-beam driver tests").digest()  # 32 bytes, public: tests only

# The Zipf population of the exactness and statistics tests, and its privacy target.
N_USERS = 20_000
EPSILON, DELTA, L = 4.0, 1e-6, 6  # planned: theta = 10, m = 973 for n = 20,000
PIPELINE_SEEDS = [hashlib.sha256(b"triehh-beam pipeline seed %d" % i).digest() for i in range(10)]
ENCODER = ItemEncoder(max_length=L)  # the driver's encoder for max_length=L (text, k = 1)
K = 20  # recall@20 is ~0.7 here: neither saturated nor zero, so it can tell runs apart
NUMPY_SEEDS = range(300)
ALPHA = 1e-3  # a correct pipeline fails the recall comparison at a random seed with odds 1e-3


def _config(input_pattern, output_dir, seed=SEED, **overrides) -> DiscoveryConfig:
    fields = dict(epsilon=EPSILON, delta=DELTA, max_length=L)
    fields.update(overrides)
    return DiscoveryConfig(input_pattern=str(input_pattern), output_dir=str(output_dir), seed=seed, **{"protocol": "triehh", **fields})


def _trie(output_dir) -> Trie:
    return Trie.from_bytes(pathlib.Path(output_dir, "trie.pb").read_bytes())


def _heavy_hitters_document(output_dir) -> dict:
    return json.loads(pathlib.Path(output_dir, "heavy_hitters.json").read_text(encoding="utf-8"))


def _spelled(trie_or_levels, encoder) -> list:
    # Each level as sorted text, the terminator shown as "$".
    levels = trie_or_levels.levels if isinstance(trie_or_levels, Trie) else trie_or_levels
    return [sorted(encoder.decode(p) + ("$" if is_terminated(p) else "") for p in level) for level in levels]


def _state_objects(state_dir) -> list:
    """(path, JobState) of every state object in a state directory."""
    return [
        (path, state_pb2.JobState.FromString(path.read_bytes()))
        for path in sorted(pathlib.Path(state_dir).glob("state-*.pb"))
    ]


# --------------------------------------------------------------------------------------------
# The three-user example: theta = 1 and m = n = 3, so every user votes every round and one vote
# keeps a prefix; the trie is exactly the three words. Theorem 1 needs theta >= 4: no guarantee.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_users(tmp_path_factory):
    directory = tmp_path_factory.mktemp("three-users")
    records = directory / "records.jsonl"
    write_records(str(records), [(1, "hello"), (2, "hey"), (3, "hi")])
    config = _config(records, directory / "out", epsilon=1.0, theta=1, batch_size=3, allow_no_guarantee=True)
    return config, run_discovery(config)


def test_three_users_discover_exactly_their_words_without_a_guarantee(three_users):
    config, result = three_users
    assert sorted(result.heavy_hitters) == ["hello", "hey", "hi"]
    assert result.frequent_prefixes == []
    assert _spelled(_trie(config.output_dir), config.encoder) == [
        ["h"], ["he", "hi"], ["hel", "hey", "hi$"], ["hell", "hey$"], ["hello"], ["hello$"],
    ]
    assert result.plan.no_guarantee and (result.plan.theta, result.plan.batch_size) == (1, 3)
    document = _heavy_hitters_document(config.output_dir)
    assert sorted(document["heavy_hitters"]) == ["hello", "hey", "hi"]
    assert document["privacy"]["guarantee"].startswith("none")
    assert document["privacy"]["theta"] == 1 and "batch_size" not in document["privacy"]
    report = json.loads(pathlib.Path(result.report_path).read_text(encoding="utf-8"))
    assert report["privacy"]["epsilon"] is None and report["privacy"]["delta"] is None
    assert (report["privacy"]["theta"], report["privacy"]["batch_size"]) == (1, 3)


def test_rerunning_a_finished_job_runs_nothing_and_republishes_the_same_result(three_users):
    config, first = three_users
    trie_before = pathlib.Path(config.output_dir, "trie.pb").read_bytes()
    lines, events = [], []
    again = run_discovery(config, progress=lines.append, events=events.append)
    job_id = _heavy_hitters_document(config.output_dir)["job_id"]
    assert lines[0] == f"resuming job {job_id[:8]} after round 6 (finished)"  # the wording
    resume = events[0]
    assert (resume["event"], resume["job_id"], resume["rounds_completed"], resume["finished"]) == (
        "resume", job_id, 6, True)
    ran = {e["event"] for e in events} & {"census_start", "sampling_start", "round", "estimates_start"}
    assert not ran, events
    assert again.resumed_from_round == 6
    assert again.heavy_hitters == first.heavy_hitters
    assert pathlib.Path(config.output_dir, "trie.pb").read_bytes() == trie_before


@pytest.mark.slow
def test_a_short_sample_is_drawn_again_from_the_records_and_changes_nothing(three_users, tmp_path, monkeypatch):
    # Candidate bounds that keep nobody: every round's sample comes back short from the cut of
    # the first read's candidates (a value in its summary, not an error), and the driver draws
    # those rounds again from the records without any prefilter. The discovery is the unbroken one.
    from triehh_beam.beam.samples.candidates import CandidateBounds
    from triehh_beam.job.batch import discovery_job

    monkeypatch.setattr(discovery_job, "candidate_bounds", lambda config: CandidateBounds(-1, 0))
    config, expected = three_users
    config = dataclasses.replace(config, output_dir=str(tmp_path / "out"), state_dir=None)
    events = []
    result = run_discovery(config, events=events.append)
    assert result.heavy_hitters == expected.heavy_hitters
    assert (result.rounds_run, result.stop_reason) == (expected.rounds_run, expected.stop_reason)
    retries = [e["rounds"] for e in events if e["event"] == "prefilter_retry"]
    assert retries == [list(range(1, config.max_length + 1))]
    state = StateStore(str(tmp_path / "out.state")).load()
    assert [r.counters["users_sampled"] for r in state.rounds] == [3] * result.rounds_run
    assert _trie(config.output_dir) == _trie(three_users[0].output_dir)


@pytest.mark.parametrize(
    "change, named",
    [
        (dict(epsilon=2.0), "epsilon"),
        (dict(delta=1e-3), "delta"),
        (dict(max_length=7), "max_length"),
        (dict(seed=b"\x01" * 32), "secret seed"),
        ("input", "input"),
    ],
    ids=["epsilon", "delta", "max_length", "seed", "input"],
)
def test_resuming_with_a_different_job_is_refused(three_users, tmp_path, change, named):
    config, _ = three_users
    manifest = pathlib.Path(config.resolved_state_dir, MANIFEST_NAME)
    manifest_before = manifest.read_bytes()
    if change == "input":  # the same records under another name are another input
        shutil.copy(config.input_pattern, tmp_path / "copy.jsonl")
        other = dataclasses.replace(config, input_pattern=str(tmp_path / "copy.jsonl"))
    else:
        other = dataclasses.replace(config, **change)
    with pytest.raises(ConfigMismatchError, match=named) as error:
        run_discovery(other)
    assert config.resolved_state_dir in str(error.value)
    assert manifest.read_bytes() == manifest_before


# --------------------------------------------------------------------------------------------
# Infeasible targets: refused before anything is committed.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, reason",
    [
        (dict(epsilon=1.0, delta=1e-10), lambda: planner.plan(50, 1.0, 1e-10, L).reason),
        (dict(theta=1, batch_size=10), lambda: "fixed theta and batch size give no DP guarantee"),
    ],
    ids=["planned", "fixed-without-guarantee"],
)
def test_an_infeasible_target_is_refused_before_any_state_is_committed(
    tmp_path, make_population, overrides, reason
):
    pattern = make_population(50, max_chars=L - 1, vocabulary=20).write(tmp_path / "records")
    config = _config(pattern, tmp_path / "out", **overrides)
    with pytest.raises(InfeasiblePlanError) as error:
        run_discovery(config)
    assert not error.value.plan.feasible
    assert reason() in str(error.value)
    assert reason() in error.value.plan.reason
    state_dir = pathlib.Path(config.resolved_state_dir)
    assert not (state_dir / MANIFEST_NAME).exists()
    assert not list(state_dir.rglob("state-*.pb"))
    assert not (tmp_path / "out" / "heavy_hitters.json").exists()


@pytest.mark.parametrize("runner", ["in-process", "multi-process"])
def test_unreadable_files_are_refused_by_type_before_any_state_is_committed(tmp_path, runner):
    records = tmp_path / "records"
    records.mkdir()
    write_records(str(records / "good.jsonl"), [(1, "hello"), (2, "hey"), (3, "hi")])
    (records / "broken.parquet").write_bytes(b"not parquet at all")
    write_records(str(records / "cut.jsonl.gz"), [(i, "word") for i in range(2000)])
    data = (records / "cut.jsonl.gz").read_bytes()
    (records / "cut.jsonl.gz").write_bytes(data[: len(data) // 2])
    config = _config(f"{records}/*", tmp_path / "out", epsilon=1.0, theta=1, batch_size=3,
                     allow_no_guarantee=True)
    options = PipelineOptions(
        ["--direct_running_mode=multi_processing", "--direct_num_workers=2"] if runner == "multi-process" else []
    )
    # Raised in the driver process as a RecordFormatError naming both files, whatever the
    # runner: the census outputs unreadable files as values, no worker traceback is parsed.
    with pytest.raises(RecordFormatError) as error:
        run_discovery(config, options)
    message = str(error.value)
    assert message.startswith("2 files cannot be read: ")
    assert f"{records / 'broken.parquet'}: cannot read it as parquet" in message
    assert f"{records / 'cut.jsonl.gz'}: the compressed stream ends before its end marker" in message
    assert "Traceback" not in message
    state_dir = pathlib.Path(config.resolved_state_dir)
    assert not (state_dir / MANIFEST_NAME).exists()
    assert not list(state_dir.rglob("state-*.pb"))
    assert not list(state_dir.rglob("*.unreadable.jsonl"))  # the census cleans up after itself


# --------------------------------------------------------------------------------------------
# Ten seeded runs on a Zipf population of 20,000 users, shared by the exactness, statistics and
# budget tests (computed once per session, even under pytest-xdist).
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def zipf_population(make_population):
    return make_population(N_USERS, max_chars=L - 1)


@pytest.fixture(scope="session")
def pipeline_runs(zipf_population, compute_once):
    """One run_discovery per PIPELINE_SEEDS entry, with what the published state held at the
    moment each round was announced (the driver's ``round`` event). The first runs one Beam
    job per round (``rounds_per_job="1"``); the other nine run every round in the sampling pass's
    job (``rounds_per_job="all"``, the default: 2 Beam jobs instead of 8), so that both
    modes are held to the keyed simulation here (tests/job/test_one_pass.py shows the two give
    byte-identical tries)."""

    def compute(directory):
        pattern = zipf_population.write(directory / "records", shards=2)
        runs = []
        for i, seed in enumerate(PIPELINE_SEEDS):
            output_dir = directory / f"run-{i}"
            store = StateStore(str(output_dir) + ".state")
            announced = []

            def on_event(event, store=store, announced=announced):
                # The driver's event for each round it announces (run on its own or in the
                # samples' job), with the published state as it stood then.
                if event["event"] == "round":
                    published = store.load()
                    announced.append(dict(
                        round=event["round"],
                        kept=event["prefixes_kept"],
                        rounds_completed=published.rounds_completed,
                        epsilon=published.plan.epsilon,
                        delta=published.plan.delta,
                    ))

            config = _config(pattern, output_dir, seed=seed, rounds_per_job="1" if i == 0 else "all")
            result = run_discovery(config, events=on_event)
            runs.append(dict(
                seed=seed.hex(),
                identity=config.sampling_identity().decode(),
                output_dir=str(output_dir),
                state_dir=str(output_dir) + ".state",
                heavy_hitters=result.heavy_hitters,
                theta=result.plan.theta,
                batch_size=result.plan.batch_size,
                epsilon=result.plan.epsilon,
                delta=result.plan.delta,
                announced=announced,
            ))
        return runs

    return compute_once("zipf-pipeline-runs", compute)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(PIPELINE_SEEDS)))
def test_pipeline_equals_the_keyed_simulation(pipeline_runs, zipf_population, index):
    run = pipeline_runs[index]
    encoder = ENCODER
    assert (run["theta"], run["batch_size"]) == (10, 973)  # the planner's choice for n = 20,000
    # The pipeline keys its samples with (seed, job identity, release nonce), and records them.
    state = StateStore(run["state_dir"]).load()
    assert state.sampling_identity == run["identity"] and len(state.release_nonce) == 16
    simulated = simulate(
        zipf_population.users, encoder, run["theta"], run["batch_size"], bytes.fromhex(run["seed"]),
        sampling="keyed", identity=keyed_identity(state),
    )
    trie = _trie(run["output_dir"])
    assert _spelled(trie, encoder) == _spelled(simulated.levels, encoder)
    assert trie.levels == simulated.levels
    assert set(run["heavy_hitters"]) == set(simulated.heavy_hitters)
    # Round by round, the totals agree too, and both stop after the same round for the same
    # reason (one round loop, protocol.rounds.loop).
    state = StateStore(run["state_dir"]).load()
    rounds = state.rounds
    assert len(rounds) == simulated.rounds_run
    assert state.stop_reason == simulated.stop.describe()
    for summary, expected in zip(rounds, simulated.round_stats):
        assert summary.round_index == expected.round_index
        assert summary.counters["users_sampled"] == expected.users_sampled
        assert summary.counters["votes_cast"] == expected.votes_cast
        assert summary.prefixes_kept == expected.prefixes_kept


@pytest.mark.slow
def test_mean_recall_agrees_with_the_independent_numpy_simulation(pipeline_runs, zipf_population):
    # The pipeline equals the keyed simulation draw for draw (test above); this checks the
    # keyed draws themselves against numpy's independent ones, on >= 10 pipeline seeds.
    encoder = ENCODER
    truth = ground_truth(zipf_population.users, encoder).user_counts
    theta, m = pipeline_runs[0]["theta"], pipeline_runs[0]["batch_size"]
    pipeline = np.array([recall_at_k(run["heavy_hitters"], truth, K) for run in pipeline_runs])
    numpy_runs = simulate_many(zipf_population.users, encoder, theta, m, NUMPY_SEEDS, sampling="numpy")
    reference = np.array([recall_at_k(r.heavy_hitters, truth, K) for r in numpy_runs])
    assert len(pipeline) >= 10 and len(reference) >= 100
    # Not a vacuous comparison: recall@K varies from run to run and is far from 0 and 1.
    assert 0.3 < reference.mean() < 0.95 and reference.std() > 0.01
    # Welch's t-test (unequal variances): two-sided p below ALPHA fails.
    test = stats.ttest_ind(pipeline, reference, equal_var=False)
    assert test.pvalue > ALPHA, (
        f"mean recall@{K}: pipeline {pipeline.mean():.3f} over {len(pipeline)} seeds, numpy "
        f"simulation {reference.mean():.3f} over {len(reference)} seeds (p = {test.pvalue:.2g})"
    )
    # ... and the difference is small in absolute terms as well.
    assert abs(pipeline.mean() - reference.mean()) < 0.1


@pytest.mark.slow  # the ten discoveries of pipeline_runs
def test_the_budget_is_committed_before_round_one_is_released(pipeline_runs):
    run = pipeline_runs[0]
    objects = _state_objects(run["state_dir"])
    initial = [(path, state) for path, state in objects
               if state.rounds_completed == 0 and not state.rounds and not state.samples.complete]
    assert len(initial) == 1, [path.name for path, _ in objects]
    path, state = initial[0]
    # Then the samples (drawn in one pass after the plan was committed), then the rounds.
    sampled = [(p, s) for p, s in objects if s.samples.complete and not s.rounds]
    assert len(sampled) == 1
    assert path.stat().st_mtime_ns <= sampled[0][0].stat().st_mtime_ns
    assert path.name.startswith("state-0000-")
    assert not state.finished and not state.trie.levels
    assert state.secret_seed == bytes.fromhex(run["seed"])
    plan = state.plan
    assert (plan.epsilon, plan.delta) == (run["epsilon"], run["delta"])
    assert 0 < plan.epsilon <= EPSILON and 0 < plan.delta <= DELTA
    assert (plan.target_epsilon, plan.target_delta) == (EPSILON, DELTA)
    assert (plan.theta, plan.batch_size, plan.population, plan.max_length) == (10, 973, N_USERS, L)
    # When round 1's outcome was first reported, the published state already held the plan.
    first = run["announced"][0]
    assert first["round"] == 1
    assert (first["epsilon"], first["delta"]) == (run["epsilon"], run["delta"])
    # And the budget object was written before any round's object.
    later = [p for p, s in objects if s.rounds_completed >= 1]
    assert later and all(path.stat().st_mtime_ns <= p.stat().st_mtime_ns for p in later)


@pytest.mark.slow  # the ten discoveries of pipeline_runs
def test_a_round_is_committed_before_it_is_announced(pipeline_runs):
    for run in pipeline_runs:
        for announced in run["announced"]:
            if announced["kept"]:
                assert announced["rounds_completed"] >= announced["round"], announced


# --------------------------------------------------------------------------------------------
# Determinism across runs and runners.
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_same_release_gives_the_same_trie_twice_and_on_the_multi_process_runner(
    tmp_path, make_population, monkeypatch, subprocess_env
):
    # The multi-process runner's workers are subprocesses: they must import triehh_beam.
    monkeypatch.setenv("PYTHONPATH", subprocess_env["PYTHONPATH"])
    # Four files, so that the workers read different shards (in the census and the sampling
    # pass, the jobs that read the input). Units of 2 letters and L = 3 (words of up to 4
    # letters), every round in the sampling pass's job (``rounds_per_job="all"``): 2 jobs a run,
    # as every job of the multi-process runner starts its workers anew, 5-15 s each on 2 cores.
    pattern = make_population(3000, max_chars=4).write(tmp_path / "records", shards=4)

    def trie_bytes(name, options=None, release=None):
        # One output for all three, each run's output and state moved aside after it; the second
        # and third run the first's release again (its seed, identity and nonce: its keys).
        output = tmp_path / "out"
        config = _config(pattern, output, max_length=3, unit_size=2, rounds_per_job="all")
        result = run_discovery(config, options, release=release)
        assert result.rounds_run >= 2
        output.rename(tmp_path / name)
        pathlib.Path(f"{output}.state").rename(tmp_path / f"{name}.state")
        return pathlib.Path(tmp_path, name, "trie.pb").read_bytes()

    first = trie_bytes("first")
    release = Release.of_state(StateStore(str(tmp_path / "first.state")).load())
    assert trie_bytes("second", release=release) == first
    multi = trie_bytes(
        "multi", PipelineOptions(["--direct_running_mode=multi_processing", "--direct_num_workers=2"]), release)
    assert multi == first
    assert Trie.from_bytes(first).depth >= 2


# --------------------------------------------------------------------------------------------
# Resume after SIGKILL, through the command-line tool in a subprocess.
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_killed_job_resumes_and_ends_as_an_unbroken_run(tmp_path, make_population, subprocess_env):
    max_length = 4  # words of up to 3 letters: rounds 3 and 4 remain after round 2
    pattern = make_population(5000, max_chars=max_length - 1).write(tmp_path / "records", shards=2)
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    output = tmp_path / "resumed"
    command = [
        sys.executable, "-m", "triehh_beam.cli", "discover", "--protocol", "triehh", "--input", pattern, "--output", str(output),
        "--epsilon", str(EPSILON), "--delta", str(DELTA), "--max-length", str(max_length),
        "--seed-file", str(seed_file),
    ]
    lines = []
    with open(tmp_path / "killed.stderr", "wb") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, env=subprocess_env, cwd=tmp_path, text=True
        )
        watchdog = threading.Timer(240, process.kill)
        watchdog.start()
        try:
            for line in process.stdout:
                lines.append(line)
                if line.startswith("round 2/"):
                    process.send_signal(signal.SIGKILL)
                    break
        finally:
            watchdog.cancel()
            process.wait()
            process.stdout.close()
    assert process.returncode == -signal.SIGKILL, (lines, (tmp_path / "killed.stderr").read_text())
    killed_state = StateStore(str(output) + ".state").load()
    manifest = json.loads((pathlib.Path(str(output) + ".state") / MANIFEST_NAME).read_text())
    assert manifest["rounds_completed"] == killed_state.rounds_completed
    # Round 1 was committed before round 2 ran; the kill came long before the last round. (Not
    # ">= 2": the driver prints round 2's line *before* committing round 2, so the kill usually
    # lands with round 1 published; see test_a_round_is_committed_before_it_is_announced.)
    assert 1 <= killed_state.rounds_completed < max_length and not killed_state.finished
    assert not (output / "heavy_hitters.json").exists()

    resumed = subprocess.run(command, capture_output=True, text=True, env=subprocess_env, cwd=tmp_path, timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    match = re.search(r"^resuming job ([0-9a-f]{8}) after round (\d+)$", resumed.stdout, re.M)
    assert match, resumed.stdout
    assert match.group(1) == killed_state.job_id[:8]
    assert int(match.group(2)) == killed_state.rounds_completed
    assert "census" not in resumed.stdout  # the population and the plan come from the state
    first_round = re.search(r"^round (\d+)/", resumed.stdout, re.M)
    assert first_round and int(first_round.group(1)) == killed_state.rounds_completed + 1

    # The same release unbroken (its keys: the killed run's seed, identity and nonce), the
    # resumed run's output and state moved aside first; every round in one job (2 Beam jobs, not
    # 2 + L: both modes give the same trie, tests/job/test_one_pass.py).
    output.rename(tmp_path / "resumed-aside")
    pathlib.Path(f"{output}.state").rename(tmp_path / "resumed-aside.state")
    run_discovery(_config(pattern, output, max_length=max_length, rounds_per_job="all"),
                  release=Release.of_state(killed_state))
    unbroken, output = output, tmp_path / "resumed-aside"
    assert (output / "trie.pb").read_bytes() == (unbroken / "trie.pb").read_bytes()
    resumed_document = _heavy_hitters_document(output)
    unbroken_document = _heavy_hitters_document(unbroken)
    assert resumed_document["job_id"] == killed_state.job_id
    for document in (resumed_document, unbroken_document):  # a job's identity, not its result
        del document["job_id"], document["created_at"]
    assert resumed_document == unbroken_document
    assert resumed_document["heavy_hitters"]


# --------------------------------------------------------------------------------------------
# Nothing below theta is written, and the seed stays in the state directory.
# --------------------------------------------------------------------------------------------


def test_nothing_below_theta_is_written_and_the_seed_stays_private(tmp_path, make_population, grep_files):
    population = make_population(5000, max_chars=L - 1)
    plan = planner.plan(len(population.users), EPSILON, DELTA, L)
    records = tmp_path / "records.parquet"
    output = tmp_path / "out"
    # A release whose keys are known before it runs (a fresh one draws its nonce when it starts).
    release = Release(SEED, _config(records, output).sampling_identity(), bytes(range(16)))
    sampler = release.sampler()
    ids = list(population.users)
    # Two rare items, each held by one user who is sampled when the item would get its vote:
    # "€ur" votes "€" in round 1 (a unit no one else has); "th¥" votes "th¥" in round 3 under
    # the frequent prefix "th". Each gets 1 vote < theta.
    root_holder = int(sampler.sample(1, ids, plan.batch_size)[0])
    deep_holder = next(int(u) for u in sampler.sample(3, ids, plan.batch_size) if int(u) != root_holder)
    users = dict(population.users)
    users[root_holder], users[deep_holder] = ["€ur"], ["th¥"]
    write_records(str(records), [(user, items[0]) for user, items in users.items()])
    lines, events = [], []
    result = run_discovery(_config(records, output), progress=lines.append, events=events.append, release=release)
    # Progress lines and structured events (with each round's Beam metrics) are logs too.
    lines += [json.dumps(event, ensure_ascii=False) for event in events]

    assert result.plan.batch_size == plan.batch_size and result.plan.theta == plan.theta >= 2
    assert ("t", "h") in _trie(output).level(2)  # "th" was on round 3's frontier
    assert "the" in result.heavy_hitters
    assert grep_files(output, '"the"'.encode()) == [str(output / "heavy_hitters.json")]  # the search works
    for text in ("€", "¥", "€ur", "th¥"):
        for form in (text.encode("utf-8"), json.dumps(text).strip('"').encode("ascii")):  # raw, \\u-escaped
            assert grep_files(output, form) == [], form
        assert not [line for line in lines if text in line]
    document = _heavy_hitters_document(output)
    assert not [item for item in document["heavy_hitters"] + document["frequent_prefixes"] if "€" in item or "¥" in item]

    state_dir = pathlib.Path(str(pathlib.Path(result.output_path).parent) + ".state")
    assert grep_files(state_dir, SEED)  # the seed is in the private state (the search works)
    for form in (SEED, SEED.hex().encode(), base64.b64encode(SEED), base64.urlsafe_b64encode(SEED)):
        assert grep_files(output, form) == []  # the state is not inside the output
        assert not [line for line in lines if form.decode("latin-1") in line]


@pytest.mark.parametrize("normalise, users", [(False, 32), (True, 31)], ids=["off", "on"])
def test_normalise_user_ids_makes_42_and_space_42_one_user_with_one_vote(tmp_path, normalise, users):
    from triehh_beam.job.state.state_store import StateStore

    records = tmp_path / "records.jsonl"
    rows = [(f"u{i:02d}", "ab", 1) for i in range(30)] + [(" 42", "ab", 1), ("42", "ab", 1)]
    write_records(str(records), rows)
    config = DiscoveryConfig(str(records), str(tmp_path / "out"), 1.0, 1e-6, 3, seed=bytes(range(32)),
                             theta=1, batch_size=100, allow_no_guarantee=True,
                             normalise_user_ids=normalise, protocol="triehh")
    run_discovery(config)
    state = StateStore(config.resolved_state_dir).load()
    assert state.plan.population == users and state.input.normalise_user_ids == normalise
    first = state.rounds[0].counters
    assert first["users_sampled"] == users and first["votes_cast"] == users  # one vote per id
    # Part of the job's identity: a resume with the other choice is refused.
    with pytest.raises(ConfigMismatchError, match="input"):
        run_discovery(dataclasses.replace(config, normalise_user_ids=not normalise))
