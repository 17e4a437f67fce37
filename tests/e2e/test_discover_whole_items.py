"""`triehh discover --protocol sample-threshold` (issue 14, part 2): the pipeline's one release
equals the keyed simulation's (``simulate_whole_items``: same seed, identity and keys), items AND
counts; the ledger holds its spend before anything is released; nothing reported by fewer than tau
sampled users is anywhere (output, state, progress and JSON events, counters); heavy_hitters.json
carries each item's count and count / p_s and the sample-and-threshold privacy block, and no
trie.pb is written; the plan's accounting (exact by default) is recorded in the state, the ledger
and the document; targets outside the bound's theorem (--accounting bound; a plan under exact
accounting) and trie-only flags are refused before any record is read and before the ledger is
touched; a finished job re-run publishes the same release without reading the input, and a run
that died after its plan was committed releases the same draws."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json

import pytest

from tests.release_keys import keyed_identity
from tests.word_population import write_word_population
from triehh_beam import cli
from triehh_beam.job.batch import graphs
from triehh_beam.job.batch.driver import run_discovery
from triehh_beam.job.release.outputs import ACCOUNTING_NOTES
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.accounting.exact_accountant import release_delta
from triehh_beam.protocol.central.whole_items import estimate_interval, plan_whole_items
from triehh_beam.protocol.rounds.vote import choose_sequence
from triehh_beam.reference.simulation import sampler_for_seed
from triehh_beam.reference.whole_items import simulate_whole_items

# Distinctive made-up words, so that grepping for one finds nothing by accident.
WORDS = ["quokkax", "zorbix", "plimsox", "wendrak", "tovalix", "gravunk", "snerdix", "yolpaz", "mirvotk",
         "dagrenx", "fulbizq", "hextrov", "jaxumel", "korplin", "vuzzlar"]
N_USERS = 3000
EPSILON, DELTA, L = 1.0, 1e-5, 9
SEED = hashlib.sha256(b"triehh-beam: discover --protocol sample-threshold").digest()
TARGET = ["--epsilon", str(EPSILON), "--delta", str(DELTA), "--max-length", str(L)]


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """(records path, seed file, users): Zipf-like words, a quarter of the users with 2-3 items
    in different counts (so the keyed choice decides their report)."""
    # Steep enough that some words are reported by fewer than tau sampled users (the test below
    # needs both sides) under either accounting: the exact plan samples about twice the bound's.
    return write_word_population(tmp_path_factory.mktemp("whole-items"), WORDS, N_USERS, 1.8, SEED, 14)


def _discover(records, output, *extra):
    out, err = io.StringIO(), io.StringIO()
    argv = ["discover", "--input", records, "--output", str(output), *TARGET, *extra]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def _full_tally(users, encoder, p_s, seed, identity):
    """Every item's reports, below tau too: the test's own count (the product never makes one)."""
    sampler = sampler_for_seed(seed, identity)
    tally = {}
    for user in sampler.bernoulli_sample(1, list(users), p_s):
        weighted = sorted((encoder.encode(w), c) for w, c in users[user.decode()].items())
        chosen = choose_sequence(weighted, sampler.choice_uniform(1, user))
        tally[encoder.decode(chosen)] = tally.get(encoder.decode(chosen), 0) + 1
    return tally


@pytest.fixture(scope="module")
def runs(population, tmp_path_factory):
    records, seed_file, _ = population
    root = tmp_path_factory.mktemp("runs")
    output = root / "out"
    code, stdout, err = _discover(records, output, "--seed-file", seed_file, "--protocol", "sample-threshold",
                                  "--ledger", str(root / "ledger"), "--log-format", "json", "--verbose")
    assert code == 0, err
    text_code, text_stdout, text_err = _discover(records, root / "text-out", "--seed-file", seed_file,
                                                 "--protocol", "sample-threshold", "--verbose")
    assert text_code == 0, text_err
    return {"root": root, "output": output, "records": records, "events": stdout, "text": text_stdout,
            "published": json.loads((output / "heavy_hitters.json").read_text()),
            "state": StateStore(str(root / "out.state")).load(),
            "ledger": [json.loads(line) for line in (root / "ledger" / "ledger.jsonl").read_text().splitlines()]}


def _config(records, output, **kw):
    return DiscoveryConfig(input_pattern=records, output_dir=str(output), seed=SEED, epsilon=EPSILON, delta=DELTA,
                           max_length=L, protocol="sample-threshold", **kw)


def test_the_pipeline_releases_exactly_the_keyed_simulations_items_and_counts(runs, population):
    _, _, users = population
    state = runs["state"]
    plan = plan_whole_items(EPSILON, DELTA)
    assert (state.plan.protocol, state.plan.theta, state.plan.alpha, state.plan.sample_probability) == (
        "sample-threshold", plan.tau, plan.alpha, plan.sampling_probability)
    encoder = _config(runs["records"], runs["output"]).encoder
    simulated = simulate_whole_items(users, encoder, state.plan.sample_probability, state.plan.theta, SEED,
                                     identity=keyed_identity(state))
    published = {entry["item"]: entry["count"] for entry in runs["published"]["released"]}
    assert published == dict(simulated.items)
    assert 3 <= len(published) < len(WORDS)  # some released, some not: the threshold bites
    assert state.release.users_sampled == simulated.users_sampled
    assert state.release.counters["whole_item_reports"] == simulated.reports
    assert state.release.counters["items_released"] == len(published)
    for entry in runs["published"]["released"]:
        assert entry["estimate"] == entry["count"] / state.plan.sample_probability
        # The 95% interval of the weighted users given the release (count >= tau).
        assert entry["interval"] == list(estimate_interval(entry["count"], state.plan.sample_probability,
                                                           state.plan.theta))
        assert entry["interval"][0] < entry["estimate"] < entry["interval"][1]
    counts = [entry["count"] for entry in runs["published"]["released"]]
    assert counts == sorted(counts, reverse=True)
    assert runs["published"]["heavy_hitters"] == [entry["item"] for entry in runs["published"]["released"]]


def test_nothing_reported_by_fewer_than_tau_is_anywhere(runs, population, grep_files):
    _, _, users = population
    root = runs["root"]
    encoder = _config(runs["records"], runs["output"]).encoder

    def forms(word):  # as text, and as a state's repeated-bytes units (one character each here)
        return word.encode(), b"".join(b"\n\x01" + ch.encode() for ch in word)

    # Each run (its own output: its own identity, its own draws) with what it printed.
    for name, printed in (("out", runs["events"]), ("text-out", runs["text"])):
        state = StateStore(str(root / f"{name}.state")).load()
        tally = _full_tally(users, encoder, state.plan.sample_probability, SEED, keyed_identity(state))
        below = {w for w, c in tally.items() if c < state.plan.theta}
        above = {w for w, c in tally.items() if c >= state.plan.theta}
        assert below and above, "the population must have items reported below and above tau"
        for directory in (name, f"{name}.state", "ledger"):
            for word in below:
                for needle in forms(word):
                    assert grep_files(root / directory, needle) == [], (directory, word)
        for word in below:  # progress lines and JSON events, verbose (exact private totals) included
            assert word not in printed
        # ...while the released items are there (the grep finds what is there).
        for word in above:
            text, units = forms(word)
            assert grep_files(root / name, text) and grep_files(root / f"{name}.state", units) and word in printed
    state = runs["state"]
    above = set(runs["published"]["heavy_hitters"])
    # The pass's counters are totals of the read and the release, none per item.
    names = set(state.release.counters)
    assert names <= {"files_read", "records_read", "records_ranked", "round1.items_too_long",
                     "round1.items_unencodable", "users_sampled", "users_without_items", "whole_item_reports",
                     "items_released"}, names
    report = json.loads((root / "out.state" / "operator_report.json").read_text())
    assert report["release"]["items_released"] == len(above)
    assert not (root / "out" / "trie.pb").exists()


def test_the_published_document_and_the_ledger(runs):
    state, published = runs["state"], runs["published"]
    privacy = published["privacy"]
    assert privacy["protocol"] == "sample-threshold" and "population" not in privacy
    assert (privacy["tau"], privacy["alpha"], privacy["sample_probability"]) == (
        state.plan.theta, state.plan.alpha, state.plan.sample_probability)
    assert (privacy["epsilon"], privacy["delta"]) == (state.plan.epsilon, state.plan.delta)
    assert privacy["epsilon"] <= EPSILON and privacy["delta"] <= DELTA
    assert "sample-and-threshold" in privacy["guarantee"] and "one release" in privacy["guarantee"]
    # Planned under the default accounting, exact: recorded in the plan, the ledger and the
    # document, and delta is the exact accountant's at the plan's (epsilon, p_s, tau).
    assert state.plan.accounting == privacy["accounting"] == "exact"
    assert privacy["accounting_note"] == ACCOUNTING_NOTES["exact"] and "C_alpha" not in privacy["guarantee"]
    assert privacy["delta"] == release_delta(EPSILON, state.plan.sample_probability, state.plan.theta).delta
    assert privacy["basic_delta"] == privacy["delta"] and privacy["composition"] == "basic"
    assert published["frequent_prefixes"] == [] and published["rounds_run"] == 1
    assert "biased upward" in published["estimate_note"]
    assert published["estimates"]["quantity"].startswith("weighted users")
    assert published["estimates"]["level"] == 0.95 and "given that the item was released" in (
        published["estimates"]["interval_note"])
    [record] = runs["ledger"]
    assert record["record_id"] == state.ledger_record and record["protocol"] == "sample-threshold"
    assert (record["epsilon"], record["delta"]) == (state.plan.epsilon, state.plan.delta)
    assert (record["tau"], record["alpha"], record["sample_probability"]) == (
        state.plan.theta, state.plan.alpha, state.plan.sample_probability)
    assert record["accounting"] == "exact"
    assert f"{N_USERS:,}" not in runs["text"].split("[private")[0]  # n only in private parts


def test_the_budget_is_charged_before_the_release_pass_runs(population, tmp_path):
    records, _, _ = population
    output = tmp_path / "out"
    config = _config(records, output, ledger_dir=str(tmp_path / "ledger"))
    seen = {}

    def progress(line):
        if line.startswith("release: sampling"):
            ledger = tmp_path / "ledger" / "ledger.jsonl"
            seen["ledger"] = ledger.read_text() if ledger.exists() else ""
            seen["output"] = output.exists()
            seen["state"] = StateStore(config.resolved_state_dir).load()

    run_discovery(config, progress=progress)
    [record] = [json.loads(line) for line in seen["ledger"].splitlines()]
    assert record["protocol"] == "sample-threshold" and record["record_id"] == seen["state"].ledger_record
    assert seen["output"] is False and not seen["state"].HasField("release")
    assert seen["state"].plan.theta == plan_whole_items(EPSILON, DELTA).tau  # the plan was committed first


def test_show_lists_the_released_items_with_their_counts_and_estimates(runs):
    from triehh_beam.present.result import load_result
    from triehh_beam.present.show import render_text

    published = runs["published"]
    text = render_text(load_result(str(runs["output"])))
    assert f"tau={published['privacy']['tau']}" in text and "whole-item sample-and-threshold" in text
    assert f"{len(published['released'])} items released (most reported first):" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("  ") and line.split()[0].isdigit()]
    assert [(r[1], int(r[2].replace(",", ""))) for r in rows] == [
        (e["item"], e["count"]) for e in published["released"]]
    assert [(int(r[4].replace(",", "")), int(r[6].replace(",", ""))) for r in rows] == [
        tuple(e["interval"]) for e in published["released"]]
    assert "95% interval" in text and "estimates: weighted users: the sum over users" in text
    assert "biased upward" in text and "trie" not in text.split("released")[-1].split("count:")[0]


def test_a_finished_job_rerun_publishes_the_same_release_without_reading(runs, population):
    _, seed_file, _ = population
    before = (runs["output"] / "heavy_hitters.json").read_bytes()
    code, stdout, err = _discover(runs["records"], runs["output"], "--seed-file", seed_file, "--protocol",
                                  "sample-threshold", "--ledger", str(runs["root"] / "ledger"))
    assert code == 0, err
    assert "resuming job" in stdout and "(finished)" in stdout
    assert "census:" not in stdout and "release: sampling" not in stdout
    assert (runs["output"] / "heavy_hitters.json").read_bytes() == before
    assert len((runs["root"] / "ledger" / "ledger.jsonl").read_text().splitlines()) == 1  # charged once


def _die_before_the_release(config, monkeypatch):
    """Runs ``config`` until its plan is committed and charged, then loses the worker."""
    def die(*args, **kwargs):
        raise RuntimeError("worker lost")

    with monkeypatch.context() as patch:
        patch.setattr(graphs, "build_whole_item_release", die)
        with pytest.raises(RuntimeError, match="worker lost"):
            run_discovery(config)


def test_a_run_that_died_after_its_plan_releases_the_same_draws(population, tmp_path, monkeypatch):
    records, _, users = population
    config = _config(records, tmp_path / "out", ledger_dir=str(tmp_path / "ledger"))
    _die_before_the_release(config, monkeypatch)
    state = StateStore(config.resolved_state_dir).load()
    assert state is not None and not state.finished and not (tmp_path / "out").exists()
    result = run_discovery(config)
    assert result.resumed_from_round == 0
    state = StateStore(config.resolved_state_dir).load()
    simulated = simulate_whole_items(users, config.encoder, state.plan.sample_probability, state.plan.theta, SEED,
                                     identity=keyed_identity(state))
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    assert {e["item"]: e["count"] for e in published["released"]} == dict(simulated.items)
    assert len((tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize("extra,needle", [
    (["--epsilon", "2", "--accounting", "bound"], "epsilon <= 1"),
    (["--epsilon", "1.5", "--accounting", "bound"], "--epsilon 1"),
    (["--theta", "5", "--batch-size", "100"], "--theta fixes TrieHH's parameters"),
    (["--rule", "corollary1"], "--rule chooses TrieHH's theta"),
    (["--truncate-long-items"], "--truncate-long-items cuts long items to prefixes"),
    (["--estimate-frequencies", "1"], "the release already carries each item's count"),
    (["--rounds-per-job", "1"], "--rounds-per-job groups a trie's rounds"),
    (["--keep-samples"], "--keep-samples keeps the samples"),
])
def test_refusals_come_before_any_record_is_read_and_before_the_ledger(population, tmp_path, extra, needle):
    records, _, _ = population
    code, stdout, err = _discover(records, tmp_path / "out", "--protocol", "sample-threshold",
                                  "--ledger", str(tmp_path / "ledger"), *extra)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert "census" not in stdout
    assert not (tmp_path / "ledger" / "ledger.jsonl").exists()
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.state" / "MANIFEST").exists()


def test_a_resume_under_another_protocol_is_refused(runs, population):
    _, seed_file, _ = population
    code, stdout, err = _discover(runs["records"], runs["output"], "--seed-file", seed_file, "--protocol", "triehh++",
                                  "--ledger", str(runs["root"] / "ledger"))
    assert code == 2 and "census" not in stdout
    assert "protocol (state has 'sample-threshold', asked 'triehh++')" in err


def test_a_dry_run_shows_the_plan_and_charges_nothing(population, tmp_path):
    records, _, _ = population
    code, stdout, err = _discover(records, tmp_path / "out", "--protocol", "sample-threshold", "--dry-run",
                                  "--ledger", str(tmp_path / "ledger"))
    assert code == 0, err
    plan = plan_whole_items(EPSILON, DELTA)
    assert f"tau={plan.tau}" in stdout and "whole items, one release" in stdout
    assert not (tmp_path / "ledger" / "ledger.jsonl").exists() and not (tmp_path / "out").exists()


def test_an_epsilon_above_one_is_a_plan_under_exact_accounting(population, tmp_path):
    records, _, _ = population
    code, stdout, err = _discover(records, tmp_path / "out", "--protocol", "sample-threshold", "--epsilon", "2",
                                  "--dry-run", "--ledger", str(tmp_path / "ledger"))
    assert code == 0, err
    plan = plan_whole_items(2, DELTA)
    assert plan.feasible and plan.accounting == "exact"
    assert plan.delta == release_delta(2.0, plan.sampling_probability, plan.tau).delta <= DELTA
    assert f"tau={plan.tau} p_s={100 * plan.sampling_probability:.6g}%" in stdout and "exact accounting" in stdout
    assert not (tmp_path / "ledger" / "ledger.jsonl").exists() and not (tmp_path / "out").exists()

