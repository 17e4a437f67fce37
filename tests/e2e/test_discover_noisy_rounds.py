"""`triehh discover --protocol noisy-rounds` (issue 41): the pipeline's trie and noisy counts are
exactly those of the in-memory round loop (``simulate_noisy_rounds``) with the release's seed and
keyed identity; the ledger holds the plan's (epsilon, delta) before anything is released; a
prefix below its round's threshold is nowhere (output, state, ledger, events); a run that died
after its first rounds resumes and publishes the same trie and counts; its settings are refused
where they mean nothing."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re

import pytest

from tests.release_keys import keyed_identity
from tests.word_population import write_word_population
from triehh_beam import cli
from triehh_beam.job.batch import noisy_rounds as noisy_job
from triehh_beam.job.batch.driver import run_discovery
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.central.noisy_rounds import plan_noisy_rounds
from triehh_beam.protocol.items.encoding import is_terminated
from triehh_beam.reference.keyed_runs import encode_population
from triehh_beam.reference.noisy_rounds import simulate_noisy_rounds
from triehh_beam.reference.simulation import sampler_for_seed

# Zipf-like made-up words (no token of an event's English); "qu9rtz" has a unit outside the alphabet
# (its round-3 vote counts nowhere).
WORDS = ["aplix", "aprivo", "banzor", "banz", "banzik", "chexy", "chertov", "dolvat", "qu9rtz", "zebrak",
         "zealuq", "mangop", "melopi", "kiwuz", "grapow", "guvax"]
N_USERS = 1200
EPSILON, DELTA, L = 4.0, 1e-6, 8
ALPHABET = "abcdefghijklmnopqrstuvwxyz"
SEED = hashlib.sha256(b"triehh-beam: discover --protocol noisy-rounds").digest()
TARGET = ["--epsilon", str(EPSILON), "--delta", str(DELTA), "--max-length", str(L)]


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """(records path, seed file, users): a quarter of the users hold 2-3 words in different
    counts, so the keyed local-frequency choice decides their vote."""
    return write_word_population(tmp_path_factory.mktemp("noisy-rounds"), WORDS, N_USERS, 1.3, SEED, 41)


def _discover(records, output, *extra):
    out, err = io.StringIO(), io.StringIO()
    argv = ["discover", "--input", records, "--output", str(output), *TARGET, "--protocol", "noisy-rounds", *extra]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def _config(records, output, **kw):
    return DiscoveryConfig(input_pattern=records, output_dir=str(output), seed=SEED, epsilon=EPSILON, delta=DELTA,
                           max_length=L, protocol="noisy-rounds", **kw)


def _simulated(users, state, encoder):
    """The in-memory loop with the job's seed and keyed identity, and a plan made here."""
    plan = plan_noisy_rounds(EPSILON, DELTA, L)
    return simulate_noisy_rounds(encode_population(users, encoder), encoder, sampler_for_seed(SEED, keyed_identity(state)),
                                 plan, ALPHABET)


@pytest.fixture(scope="module")
def run(population, tmp_path_factory):
    records, seed_file, _ = population
    root = tmp_path_factory.mktemp("runs")
    code, stdout, err = _discover(records, root / "out", "--seed-file", seed_file, "--ledger", str(root / "ledger"),
                                  "--log-format", "json", "--verbose")
    assert code == 0, err
    return {"root": root, "records": records, "events": stdout + err,
            "published": json.loads((root / "out" / "heavy_hitters.json").read_text()),
            "state": StateStore(str(root / "out.state")).load(),
            "ledger": [json.loads(x) for x in (root / "ledger" / "ledger.jsonl").read_text().splitlines()]}


def test_the_pipeline_grows_exactly_the_in_memory_loops_trie_and_counts(run, population):
    _, _, users = population
    state, published = run["state"], run["published"]
    encoder = _config(run["records"], "x").encoder
    expected = _simulated(users, state, encoder)
    assert state.plan.round_epsilon == pytest.approx(plan_noisy_rounds(EPSILON, DELTA, L).round_epsilon, rel=1e-12)
    from triehh_beam.protocol.rounds.trie import Trie

    trie = Trie.from_proto(state.trie)
    assert trie.levels == expected.levels
    assert sorted(published["heavy_hitters"]) == sorted(expected.heavy_hitters)
    assert 5 <= len(expected.heavy_hitters) < len(WORDS) - 1  # some found, some not: the threshold bites
    assert "qu9rtz" not in published["heavy_hitters"]
    recorded = noisy_job.released(state, encoder)
    assert recorded == dict(expected.released)
    assert [r.threshold for r in state.noisy_rounds.rounds] == list(expected.thresholds)
    section = published["noisy_rounds"]
    assert {e["item"]: e["noisy_count"] for e in section["heavy_hitters"]} == dict(expected.heavy_hitters)
    assert section["thresholds"] == list(expected.thresholds)
    assert all(c >= expected.thresholds[len(p) - 1] for p, c in expected.released.items())


def test_charged_the_plans_spend_and_nothing_below_a_threshold_is_anywhere(run, population, grep_files):
    _, _, users = population
    state, root = run["state"], run["root"]
    [record] = run["ledger"]
    assert record["record_id"] == state.ledger_record and record["protocol"] == "noisy-rounds"
    assert (record["epsilon"], record["delta"]) == (EPSILON, DELTA)
    privacy = run["published"]["privacy"]
    assert privacy["protocol"] == "noisy-rounds" and "population" not in privacy
    assert privacy["accounting"] in ("pld", "zcdp") and privacy["alphabet"] == ALPHABET
    released = _simulated(users, state, _config(run["records"], "x").encoder).released
    kept = {"".join(p) for p in released if not is_terminated(p)}
    # each word's first prefix not kept (a word whose every prefix is kept is a frequent prefix)
    lost = {w: next((w[:i] for i in range(1, len(w) + 1) if w[:i] not in kept), None) for w in WORDS}
    # (a lost prefix of one unit is a substring of kept words; at least 3 words have longer ones in 100
    # simulated releases of this population)
    checked = [w for w, p in lost.items() if p is not None and len(p) >= 2]
    assert len(checked) >= 2, lost
    tokens = set(re.findall(r"[a-z0-9]+", run["events"]))
    assert {"guarantee", "round"} <= tokens
    for word in checked:
        lost_prefix = lost[word]
        for directory in ("out", "out.state", "ledger"):
            assert grep_files(root / directory, word.encode()) == [], (directory, word)
            units = b"".join(b"\n\x01" + ch.encode() for ch in lost_prefix)  # the state's units
            assert grep_files(root / directory, units) == [], (directory, lost_prefix)
        assert lost_prefix not in tokens and word not in tokens, word
    for summary in state.rounds:  # the runner's metrics of each round: totals only, never n
        assert N_USERS not in {v for k, v in summary.counters.items() if k != "users_sampled"}, dict(summary.counters)


def test_a_run_that_died_after_a_round_resumes_with_the_same_noise(population, tmp_path, monkeypatch):
    records, _, users = population
    config = _config(records, tmp_path / "out", ledger_dir=str(tmp_path / "ledger"))
    real = noisy_job.run_round
    calls = []

    def dies_in_round_3(driver, state, trie, round_index):
        calls.append(round_index)
        if round_index == 3:
            raise RuntimeError("worker lost")
        return real(driver, state, trie, round_index)

    with monkeypatch.context() as patch:
        patch.setattr(noisy_job, "run_round", dies_in_round_3)
        with pytest.raises(RuntimeError, match="worker lost"):
            run_discovery(config)
    state = StateStore(config.resolved_state_dir).load()
    assert state.rounds_completed == 2 and state.release_charged and not (tmp_path / "out").exists()
    [record] = [json.loads(x) for x in (tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()]
    assert record["record_id"] == state.ledger_record and record["epsilon"] == EPSILON  # charged before round 1
    assert [r.round_index for r in state.noisy_rounds.rounds] == [1, 2]
    result = run_discovery(config)
    assert result.resumed_from_round == 2
    state = StateStore(config.resolved_state_dir).load()
    expected = _simulated(users, state, config.encoder)
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    assert sorted(published["heavy_hitters"]) == sorted(expected.heavy_hitters)
    assert noisy_job.released(state, config.encoder) == dict(expected.released)
    assert len((tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()) == 1  # charged once


@pytest.mark.parametrize("extra,needle", [
    (["--accounting", "exact"], "--accounting chooses how sample-and-threshold is certified"),
    (["--estimate-frequencies", "1"], "noisy rounds release every kept prefix"),
    (["--false-prefixes", "0"], "false_prefixes must be > 0"),
    (["--alphabet", "aab"], "the alphabet must be distinct characters"),
    (["--theta", "5", "--batch-size", "50"], "--theta fixes TrieHH's parameters"),
    (["--item-type", "bytes"], "needs text items (its candidates extend by --alphabet)"),
    (["--window", "1h"], "--window is not available: noisy rounds are central and batch only"),
])
def test_refusals_come_before_any_record_is_read(population, tmp_path, extra, needle):
    records, _, _ = population
    code, stdout, err = _discover(records, tmp_path / "out", "--ledger", str(tmp_path / "ledger"), *extra)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert "census" not in stdout and not (tmp_path / "ledger" / "ledger.jsonl").exists()


@pytest.mark.parametrize("flag,value", [("--alphabet", "abc"), ("--false-prefixes", "2")])
def test_its_settings_are_refused_with_another_protocol(population, tmp_path, flag, value):
    records, _, _ = population
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["discover", "--input", records, "--output", str(tmp_path / "o"), *TARGET,
                         "--protocol", "triehh++", flag, value])
    assert code == 2 and f"{flag} is --protocol noisy-rounds's" in err.getvalue(), err.getvalue()


def test_show_lists_the_noisy_counts(run):
    from triehh_beam.present.result import load_result
    from triehh_beam.present.show import render_text

    published = run["published"]
    text = render_text(load_result(str(run["root"] / "out")))
    assert "noisy prefix rounds" in text and "not ranked by the noisy counts" in text
    half = published["noisy_rounds"]["half_width"]
    rows = {r[1]: (int(r[4].replace(",", "")), r[5:8]) for r in (line.split() for line in text.splitlines())
            if len(r) >= 8 and r[0].isdigit() and r[3] == "yes"}
    assert rows == {e["item"]: (e["noisy_count"], [f"{e['noisy_count'] - half:,}", "to", f"{e['noisy_count'] + half:,}"])
                    for e in published["noisy_rounds"]["heavy_hitters"]}


def test_its_release_is_refused_as_a_deny_list(run, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["discover", "--input", run["records"], "--output", str(tmp_path / "o"), *TARGET,
                         "--protocol", "triehh++", "--deny-list", str(run["root"] / "out" / "heavy_hitters.json")])
    assert code == 2 and "a noisy-rounds release is not a deny list yet" in err.getvalue(), err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1
