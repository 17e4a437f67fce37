"""`triehh discover --protocol triehh++` (issue 16): the Beam pipeline runs TrieHH++ and equals the
keyed simulation (``simulate_sample_threshold``, same seed, identity and keys) trie for trie, byte
for byte, one job per round and all rounds in one job; the ledger holds its spend (the composed
guarantee, with tau, alpha and p_s) before anything is released; heavy_hitters.json publishes the
TrieHH++ plan without n, the operator report with it, and both its accounting (exact by default);
--dry-run shows the plan and charges nothing; a resume under the other protocol, TrieHH's own flags
with triehh++, --accounting with triehh and a target outside the bound's theorem (--accounting
bound; a plan under exact accounting) are refused in one line, the last before any record is read;
a sample file lost between rounds is noticed (the round reads fewer users than
the pass drew) and drawn again."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import io
import json
import os

import numpy as np
import pytest

from tests.release_keys import keyed_identity
from triehh_beam import cli
from triehh_beam.io.write import write_records
from triehh_beam.job.batch import levels
from triehh_beam.job.batch.driver import run_discovery
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.release.outputs import ACCOUNTING_NOTES, published_plan_document
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.accounting.composition import compose_rounds
from triehh_beam.protocol.accounting.exact_accountant import release_delta
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate_sample_threshold

WORDS = ["apple", "apply", "ample", "maple", "mango", "man", "map", "zebra", "zero", "zoo", "zone"]
N_USERS = 3000
EPSILON, DELTA, L = 4.0, 1e-5, 6
SEED = hashlib.sha256(b"triehh-beam: discover --protocol triehh++").digest()
TARGET = ["--epsilon", str(EPSILON), "--delta", str(DELTA), "--max-length", str(L)]


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """(records path, seed file, users mapping): one word per user, Zipf-like."""
    root = tmp_path_factory.mktemp("triehh-pp")
    rng = np.random.default_rng(16)
    weights = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.1
    rows, users = [], {}
    for user, word in enumerate(rng.choice(WORDS, size=N_USERS, p=weights / weights.sum())):
        rows.append((f"u{user}", str(word), 1))
        users[f"u{user}"] = {str(word): 1}
    path = root / "records.parquet"
    write_records(str(path), rows)
    seed_file = root / "seed.bin"
    seed_file.write_bytes(SEED)
    return str(path), str(seed_file), users


def _discover(records, output, *extra):
    """``triehh discover`` in process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["discover", "--input", records, "--output", str(output), *TARGET, *extra]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def runs(population, tmp_path_factory):
    """One output run twice: by the CLI (one job per round) and by the driver, every round in
    one job, watching what was released when round 1 was announced."""
    records, seed_file, _ = population
    root = tmp_path_factory.mktemp("runs")
    output = root / "out"
    code, stdout, err = _discover(records, output, "--seed-file", seed_file, "--protocol", "triehh++",
                                  "--ledger", str(root / "ledger"))
    assert code == 0, err
    per_round = {"trie": (output / "trie.pb").read_bytes(), "stdout": stdout,
                 "published": json.loads((output / "heavy_hitters.json").read_text()),
                 "report": json.loads((root / "out.state" / "operator_report.json").read_text()),
                 "state": StateStore(str(root / "out.state")).load(),
                 "ledger": [json.loads(line) for line in (root / "ledger" / "ledger.jsonl").read_text().splitlines()]}
    # The same job (same identity: same output), every round in one job, in a fresh state.
    os.rename(output, root / "out-per-round")
    os.rename(root / "out.state", root / "out-per-round.state")
    config = DiscoveryConfig(input_pattern=records, output_dir=str(output), seed=SEED, epsilon=EPSILON,
                             delta=DELTA, max_length=L, protocol="triehh++", rounds_per_job="all",
                             ledger_dir=str(root / "ledger-all"))
    seen = {}

    def progress(line):
        if line.startswith("round 1/") and not seen:
            ledger_file = root / "ledger-all" / "ledger.jsonl"
            seen["ledger"] = ledger_file.read_text() if ledger_file.exists() else ""
            seen["published"] = sorted(os.listdir(output)) if output.exists() else []

    # The same release (its keys: the per-round run's nonce), run again every round in one job.
    run_discovery(config, progress=progress, release=Release.of_state(per_round["state"]))
    one_job = {"trie": (output / "trie.pb").read_bytes(), "state": StateStore(config.resolved_state_dir).load(),
               "seen_at_round_1": seen}
    return {"records": records, "root": root, "per_round": per_round, "one_job": one_job,
            "per_round_output": root / "out-per-round", "config": config}


def test_the_pipeline_equals_the_keyed_simulation_byte_for_byte_in_both_modes(runs, population):
    _, _, users = population
    state = runs["per_round"]["state"]
    plan = state.plan
    expected = plan_sample_threshold(EPSILON, DELTA, L)
    assert (plan.protocol, plan.theta, plan.alpha, plan.sample_probability) == (
        "triehh++", expected.tau, expected.alpha, expected.sampling_probability)
    simulated = simulate_sample_threshold(users, runs["config"].encoder, plan.theta, plan.sample_probability, SEED,
                                          sampling="keyed", identity=keyed_identity(state))
    encoder = runs["config"].encoder
    trie = Trie.from_bytes(runs["per_round"]["trie"])
    assert trie.levels == simulated.levels
    assert runs["per_round"]["trie"] == Trie(encoder, simulated.levels).to_bytes()
    assert runs["one_job"]["trie"] == runs["per_round"]["trie"]
    assert len(simulated.levels) >= 3, "the population must grow a trie of several levels"
    assert runs["one_job"]["state"].sampling_identity == state.sampling_identity
    for job in (state, runs["one_job"]["state"]):
        assert job.stop_reason == simulated.stop.describe()
        assert len(job.rounds) == simulated.rounds_run
        for summary, stats in zip(job.rounds, simulated.round_stats):
            assert summary.counters["users_sampled"] == stats.users_sampled
            assert summary.counters["votes_cast"] == stats.votes_cast
    # Bernoulli samples: each round's size is Binomial(n, p_s), within 5 sd of n p_s, and varies.
    drawn = list(state.samples.users_sampled)
    p = plan.sample_probability
    assert all(abs(k - N_USERS * p) < 5 * (N_USERS * p * (1 - p)) ** 0.5 for k in drawn)
    assert len(set(drawn)) > 1


def test_the_ledger_holds_the_triehh_pp_spend_before_anything_is_released(runs):
    seen = runs["one_job"]["seen_at_round_1"]
    assert seen["published"] == []  # nothing in the output when round 1 was announced
    [record] = [json.loads(line) for line in seen["ledger"].splitlines()]
    plan = runs["one_job"]["state"].plan
    assert record["record_id"] == runs["one_job"]["state"].ledger_record
    assert (record["epsilon"], record["delta"]) == (plan.epsilon, plan.delta)
    assert plan.epsilon <= EPSILON and plan.delta <= DELTA
    assert record["protocol"] == "triehh++" and record["rule"] == "sample-and-threshold"
    assert (record["tau"], record["alpha"], record["sample_probability"]) == (
        plan.theta, plan.alpha, plan.sample_probability)
    assert (record["round_epsilon"], record["round_delta"]) == (plan.round_epsilon, plan.round_delta)
    assert record["population"] == N_USERS and "batch_size" not in record and "theta" not in record
    # Planned under the default accounting, exact: recorded in the plan and the ledger, and the
    # per-round delta is the exact accountant's at the plan's (eps_r, p_s, tau), composed over L.
    assert plan.accounting == record["accounting"] == "exact"
    assert plan.round_delta == release_delta(plan.round_epsilon, plan.sample_probability, plan.theta).delta
    composed = compose_rounds(plan.round_epsilon, plan.round_delta, L)
    assert (plan.delta, plan.basic_delta, plan.pld_delta, plan.composition) == (
        composed.delta, composed.basic_delta, composed.pld_delta, composed.method)
    [charged] = runs["per_round"]["ledger"]  # the CLI's job: charged once
    assert charged["record_id"] == runs["per_round"]["state"].ledger_record and charged["protocol"] == "triehh++"


def test_the_published_plan_is_triehh_pp_without_n_and_the_report_has_n(runs):
    plan = runs["per_round"]["state"].plan
    published = runs["per_round"]["published"]["privacy"]
    assert published["protocol"] == "triehh++"
    assert (published["tau"], published["alpha"], published["sample_probability"]) == (
        plan.theta, plan.alpha, plan.sample_probability)
    assert (published["epsilon"], published["delta"]) == (plan.epsilon, plan.delta)
    assert (published["target_epsilon"], published["target_delta"]) == (EPSILON, DELTA)
    assert "population" not in published and "batch_size" not in published
    assert "sample-and-threshold" in published["guarantee"]
    assert published["accounting"] == plan.accounting == "exact"
    assert published["accounting_note"] == ACCOUNTING_NOTES["exact"]
    assert "exact_accountant.release_delta" in published["accounting_note"]
    assert (published["round_epsilon"], published["round_delta"]) == (plan.round_epsilon, plan.round_delta)
    assert (published["basic_delta"], published["pld_delta"], published["composition"]) == (
        plan.basic_delta, plan.pld_delta, plan.composition)
    report = runs["per_round"]["report"]["privacy"]
    assert report["population"] == N_USERS and report["protocol"] == "triehh++"
    assert report["tau"] == plan.theta
    stdout = runs["per_round"]["stdout"]
    assert f"(TrieHH++: tau={plan.theta}, p_s={100 * plan.sample_probability:.4g}% per round)" in stdout
    assert f"{N_USERS:,}" not in stdout  # n is private without --verbose
    assert f"plan: TrieHH++ tau={plan.theta} p_s=" in stdout


def test_a_declared_population_is_published_with_the_triehh_pp_plan():
    plan = state_pb2.PrivacyPlan(protocol="triehh++", rule="sample-and-threshold", population=5000,
                                 max_length=4, target_epsilon=4, target_delta=1e-8, theta=23, alpha=0.18,
                                 sample_probability=0.114, epsilon=4, delta=1e-8, accounting="bound")
    assert "population" not in published_plan_document(plan)
    plan.public_population = 5000
    assert published_plan_document(plan)["population"] == 5000


@pytest.mark.parametrize("other", [["--protocol", "triehh"]])  # (no flag: TrieHH++, the default since issue 38)
def test_a_resume_under_the_other_protocol_is_refused(runs, population, other):
    _, seed_file, _ = population
    output = runs["per_round_output"]
    before = (output / "trie.pb").read_bytes()
    code, stdout, err = _discover(runs["records"], output, "--seed-file", seed_file,
                                  "--ledger", str(runs["root"] / "ledger"), *other)
    assert code == 2 and "census" not in stdout
    assert "holds a job with a different protocol (state has 'triehh++', asked 'triehh')" in err
    assert len(err.splitlines()) == 1
    assert (output / "trie.pb").read_bytes() == before


def test_dry_run_shows_the_triehh_pp_plan_and_charges_nothing(runs, tmp_path):
    code, stdout, err = _discover(runs["records"], tmp_path / "out", "--protocol", "triehh++", "--dry-run")
    assert code == 0, err
    expected = plan_sample_threshold(EPSILON, DELTA, L)
    assert (f"plan [private]: TrieHH++ n={N_USERS:,} tau={expected.tau} "
            f"p_s={100 * expected.sampling_probability:.6g}% L={L}:") in stdout
    assert f"would spend [private]: epsilon {expected.epsilon:.6g}, delta {expected.delta:.3g}" in stdout
    assert not (tmp_path / "out.state" / "ledger.jsonl").exists()
    assert not (tmp_path / "out.state" / "MANIFEST.json").exists()
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags, message", [
    (["--theta", "10", "--batch-size", "300"], "--theta fixes TrieHH's parameters; --protocol triehh++ plans"),
    (["--rule", "corollary1"], "--rule chooses TrieHH's theta and m; --protocol triehh++ has its own planner"),
])
def test_triehhs_own_settings_are_refused_with_triehh_pp(runs, tmp_path, flags, message):
    code, stdout, err = _discover(runs["records"], tmp_path / "out", "--protocol", "triehh++", *flags)
    assert code == 2 and stdout == ""
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.state").exists()


def test_under_the_bound_a_target_outside_the_theorem_is_refused_before_any_record_is_read(runs, tmp_path):
    code, stdout, err = _discover(runs["records"], tmp_path / "out", "--protocol", "triehh++",
                                  "--epsilon", "8", "--max-length", "4", "--accounting", "bound")
    assert code == 2 and "census" not in stdout
    assert "privacy target infeasible: the sample-and-threshold theorem covers eps_r = epsilon/L <= 1" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.state").exists()


def test_the_same_target_is_a_plan_under_exact_accounting(population, tmp_path):
    # eps_r = 12 / 6 = 2: outside the bound's theorem (as 8 / 4 above), accounted exactly (the default).
    code, stdout, err = _discover(population[0], tmp_path / "out", "--protocol", "triehh++",
                                  "--epsilon", "12", "--dry-run")
    assert code == 0, err
    expected = plan_sample_threshold(12, DELTA, L)
    assert expected.feasible and expected.epsilon_round == 2.0
    assert expected.round_delta == release_delta(2.0, expected.sampling_probability, expected.tau).delta
    assert expected.delta <= DELTA
    assert f"tau={expected.tau} p_s={100 * expected.sampling_probability:.6g}%" in stdout
    assert "exact accounting" in stdout
    assert not (tmp_path / "out").exists()


def test_accounting_with_triehh_is_refused_in_one_line(population, tmp_path):
    code, stdout, err = _discover(population[0], tmp_path / "out", "--accounting", "exact", "--protocol", "triehh")
    assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1
    assert "--accounting chooses how sample-and-threshold is certified; --protocol triehh is certified by " \
           "Theorem 1" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.state").exists()


def test_a_sample_lost_between_rounds_is_drawn_again_and_changes_nothing(runs, population, tmp_path):
    # A job per round, so that round 2 reads its sample after round 1 is announced.
    config = DiscoveryConfig(input_pattern=runs["records"], output_dir=str(tmp_path / "out"), seed=SEED,
                             epsilon=EPSILON, delta=DELTA, max_length=L, protocol="triehh++", rounds_per_job="1")
    lines = []

    def progress(line):
        lines.append(line)
        if line.startswith("round 1/"):  # round 2's sample loses a file before round 2 reads it
            state = StateStore(config.resolved_state_dir).load()
            parts = sorted(glob.glob(os.path.join(levels.samples_dir(config.resolved_state_dir, state.job_id),
                                                  "round-0002", "*")))
            assert parts
            os.remove(parts[0])

    run_discovery(config, progress=progress)
    assert any("round 2: its sample in the state directory is incomplete" in line for line in lines)
    simulated = simulate_sample_threshold(
        population[2], config.encoder, runs["per_round"]["state"].plan.theta,
        runs["per_round"]["state"].plan.sample_probability, SEED, sampling="keyed",
        identity=keyed_identity(config))
    assert Trie.from_bytes((tmp_path / "out" / "trie.pb").read_bytes()).levels == simulated.levels

