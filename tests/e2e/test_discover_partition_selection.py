"""`triehh discover --protocol partition-selection` (issue 41): the pipeline's release equals a
per-user simulation's (each user's up to k items drawn one by one with ``choose_sequence`` and its
keyed uniforms, counted in a plain dict, then the release's coins and noise), items AND noisy
counts; the ledger holds the spend (selection + counts = the target) before anything is
released; an item not kept is nowhere (output, state, ledger, progress and JSON events); a
finished job re-run publishes the same release without reading, and a run that died after its
plan releases the same draws; its settings are refused where they mean nothing."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json

import numpy as np
import pytest

from tests.release_keys import keyed_identity
from tests.word_population import write_word_population
from triehh_beam import cli
from triehh_beam.job.batch import graphs
from triehh_beam.job.batch.driver import run_discovery
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.central.partition_release import PartitionCounter, SelectionKeys, more_uniforms
from triehh_beam.protocol.central.partition_selection import PartitionSelectionPlan
from triehh_beam.protocol.rounds.vote import choose_sequence
from triehh_beam.reference.simulation import sampler_for_seed

WORDS = ["quokkaps", "zorbips", "plimsops", "wendraps", "tovalips", "gravunps", "snerdips", "yolpazps",
         "mirvotps", "dagrenps", "fulbizps", "hextrops", "jaxumeps", "korplips", "vuzzlaps", "brimpops"]
N_USERS = 1500
EPSILON, DELTA, L = 1.0, 1e-5, 9
SEED = hashlib.sha256(b"triehh-beam: discover --protocol partition-selection").digest()
TARGET = ["--epsilon", str(EPSILON), "--delta", str(DELTA), "--max-length", str(L)]


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """(records path, seed file, users): Zipf-like words, a third of the users with 2-3 items in
    different counts (so the keyed draws decide what they contribute)."""
    return write_word_population(tmp_path_factory.mktemp("partition-selection"), WORDS, N_USERS, 2.0, SEED, 41,
                                 single=0.66)


def _discover(records, output, *extra):
    out, err = io.StringIO(), io.StringIO()
    argv = ["discover", "--input", records, "--output", str(output), *TARGET, "--protocol", "partition-selection",
            *extra]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def _tally(users, encoder, k, identity):
    """Every item's contributing users, the test's own count: each user's k draws one by one."""
    sampler = sampler_for_seed(SEED, identity)
    tally = {}
    for user, items in users.items():
        weighted = sorted((encoder.encode(w), c) for w, c in items.items())
        u = np.array([sampler.choice_uniform(1, user.encode())])
        for draw in range(k):
            if not weighted:
                break
            chosen = choose_sequence(tuple(weighted), float(more_uniforms(u, draw)[0]))
            tally[chosen] = tally.get(chosen, 0) + 1
            weighted = [(s, c) for s, c in weighted if s != chosen]
    return tally


def _simulated(users, state, encoder):
    plan = state.plan
    k = plan.max_items_per_user
    counter = PartitionCounter(PartitionSelectionPlan(EPSILON, DELTA, k, plan.selection_share),
                               SelectionKeys.derive(SEED, keyed_identity(state)))
    tally = _tally(users, encoder, k, keyed_identity(state))
    return tally, {encoder.decode(s): c for s, c in counter.extract_released(tally)}


@pytest.fixture(scope="module")
def runs(population, tmp_path_factory):
    records, seed_file, _ = population
    root = tmp_path_factory.mktemp("runs")
    result = {"root": root, "records": records}
    for name, extra in (("one", []), ("two", ["--max-items-per-user", "2", "--selection-share", "1"])):
        code, stdout, err = _discover(records, root / name, "--seed-file", seed_file, "--ledger",
                                      str(root / f"{name}-ledger"), "--log-format", "json", "--verbose", *extra)
        assert code == 0, err
        result[name] = {"output": root / name, "events": stdout,
                        "published": json.loads((root / name / "heavy_hitters.json").read_text()),
                        "state": StateStore(str(root / f"{name}.state")).load(),
                        "ledger": [json.loads(x) for x in (root / f"{name}-ledger" / "ledger.jsonl").read_text()
                                   .splitlines()]}
    return result


def _encoder(records):
    return DiscoveryConfig(input_pattern=records, output_dir="x", seed=SEED, epsilon=EPSILON, delta=DELTA,
                           max_length=L, protocol="partition-selection").encoder


@pytest.mark.parametrize("name", ["one", "two"])
def test_the_pipeline_releases_exactly_the_simulations_items_and_counts(runs, population, name):
    _, _, users = population
    run = runs[name]
    tally, simulated = _simulated(users, run["state"], _encoder(runs["records"]))
    published = {e["item"]: e.get("count") for e in run["published"]["released"]}
    assert published == simulated
    assert 3 <= len(published) < len(tally)  # some kept, some not: the selection bites
    if name == "one":
        assert all(isinstance(c, int) for c in published.values())
        half = run["published"]["estimates"]["half_width"]
        assert all(e["interval"] == [e["count"] - half, e["count"] + half] for e in run["published"]["released"])
    else:  # k = 2, whole epsilon on the selection: items only
        assert set(published.values()) == {None} and "estimates" not in run["published"]
        assert sum(tally.values()) > N_USERS  # users with several items contributed two


def test_nothing_not_kept_is_anywhere(runs, population, grep_files):
    _, _, users = population
    root = runs["root"]
    for name in ("one", "two"):
        run = runs[name]
        tally, simulated = _simulated(users, run["state"], _encoder(runs["records"]))
        dropped = {w for w in WORDS if w not in simulated}
        assert dropped and simulated
        for directory in (name, f"{name}.state", f"{name}-ledger"):
            for word in dropped:
                assert grep_files(root / directory, word.encode()) == [], (directory, word)
                # the state's units (one character each): repeated bytes fields
                units = b"".join(b"\n\x01" + ch.encode() for ch in word)
                assert grep_files(root / directory, units) == [], (directory, word)
        for word in dropped:
            assert word not in run["events"]
        for word in simulated:
            assert grep_files(root / name, word.encode()) and word in run["events"]
        counters = dict(run["state"].release.counters)  # the runner's metrics, as the pass read them
        assert set(counters) <= {"files_read", "records_read", "records_ranked", "round1.items_too_long",
                                 "round1.items_unencodable", "items_released"}, counters
        # n is private (the census never makes it a metric): no counter of the pass equals it.
        assert N_USERS not in counters.values() and run["state"].release.users_sampled == N_USERS, counters
        assert not (root / name / "trie.pb").exists()


def test_the_published_plan_and_the_ledger(runs):
    run = runs["one"]
    privacy, state = run["published"]["privacy"], run["state"]
    assert privacy["protocol"] == "partition-selection" and "population" not in privacy
    assert (privacy["selection_epsilon"], privacy["count_epsilon"], privacy["epsilon"]) == (0.5, 0.5, EPSILON)
    assert (privacy["item_epsilon"], privacy["item_delta"], privacy["max_items_per_user"]) == (0.5, DELTA, 1)
    assert "optimal partition selection" in privacy["guarantee"] and privacy["trust_model"].startswith("central")
    [record] = run["ledger"]
    assert record["record_id"] == state.ledger_record and record["protocol"] == "partition-selection"
    assert record["epsilon"] == pytest.approx(EPSILON) and record["delta"] == DELTA
    two = runs["two"]["published"]["privacy"]
    assert (two["selection_epsilon"], two["count_epsilon"], two["item_epsilon"], two["item_delta"]) == (
        EPSILON, 0.0, EPSILON / 2, DELTA / 2)
    assert runs["two"]["ledger"][0]["epsilon"] == EPSILON


def test_show_lists_the_released_items(runs):
    from triehh_beam.present.result import load_result
    from triehh_beam.present.show import render_text

    published = runs["one"]["published"]
    text = render_text(load_result(str(runs["one"]["output"])))
    assert "one partition-selection release" in text and "noisy count" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("  ") and line.split()[0].isdigit()]
    assert [(r[1], int(r[2].replace(",", ""))) for r in rows] == [(e["item"], e["count"]) for e in published["released"]]


def _config(records, output, **kw):
    return DiscoveryConfig(input_pattern=records, output_dir=str(output), seed=SEED, epsilon=EPSILON, delta=DELTA,
                           max_length=L, protocol="partition-selection", **kw)


def test_charged_before_the_release_and_a_dead_run_releases_the_same_draws(population, tmp_path, monkeypatch):
    records, _, users = population
    config = _config(records, tmp_path / "out", ledger_dir=str(tmp_path / "ledger"))

    def die(*args, **kwargs):
        raise RuntimeError("worker lost")

    with monkeypatch.context() as patch:
        patch.setattr(graphs, "build_whole_item_release", die)
        with pytest.raises(RuntimeError, match="worker lost"):
            run_discovery(config)
    [record] = [json.loads(x) for x in (tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()]
    state = StateStore(config.resolved_state_dir).load()
    assert record["record_id"] == state.ledger_record and not state.HasField("release")
    assert not (tmp_path / "out").exists()
    run_discovery(config)
    state = StateStore(config.resolved_state_dir).load()
    _, simulated = _simulated(users, state, config.encoder)
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    assert {e["item"]: e["count"] for e in published["released"]} == simulated
    assert len((tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()) == 1
    before = (tmp_path / "out" / "heavy_hitters.json").read_bytes()
    run_discovery(config)  # finished: published again, not re-read, not re-charged
    assert (tmp_path / "out" / "heavy_hitters.json").read_bytes() == before
    assert len((tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize("extra,needle", [
    (["--accounting", "exact"], "keeps each item with the optimal probability"),
    (["--selection-share", "0"], "selection share must be in (0, 1]"),
    (["--max-items-per-user", "0"], "items per user must be an integer >= 1"),
    (["--estimate-frequencies", "1"], "adds noisy counts to a trie's items"),
])
def test_refusals_come_before_any_record_is_read(population, tmp_path, extra, needle):
    records, _, _ = population
    code, stdout, err = _discover(records, tmp_path / "out", "--ledger", str(tmp_path / "ledger"), *extra)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert "census" not in stdout and not (tmp_path / "ledger" / "ledger.jsonl").exists()


def test_its_settings_are_refused_with_another_protocol(population, tmp_path):
    records, _, _ = population
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["discover", "--input", records, "--output", str(tmp_path / "o"), *TARGET,
                         "--protocol", "triehh++", "--max-items-per-user", "2"])
    assert code == 2 and "--max-items-per-user is --protocol partition-selection's" in err.getvalue()
