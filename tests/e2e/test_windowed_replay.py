"""``triehh discover --window --timestamp-column --windows``: the bounded replay from files,
through the command line, equals the keyed simulation of each window's records alone with the
keys of the window's committed release (with ``--estimate-frequencies``, each window's estimates
the per-user reference with those keys); every replay of a window is another release, charged."""

import json
import re

import numpy as np
import pytest

from triehh_beam.beam.windows.windowed_estimates import window_estimate_keys
from triehh_beam.cli.dispatch import main
from triehh_beam.evaluation.estimates_eval import simulate_estimates
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.job.windows import windowed
from triehh_beam.protocol.estimates.frequency_estimates import EstimateKeys, EstimateTargets, user_choice
from triehh_beam.protocol.planning import planner
from triehh_beam.protocol.planning.sample_threshold_planner import plan_sample_threshold
from triehh_beam.protocol.randomness.sampling import Sampler
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate, simulate_sample_threshold
from tests.windowed_jobs import HOUR, SEED, T0, one_word_population, fixed_nonces  # noqa: F401 (fixture)

# Two declared windows from T0 (2025-11-23T10:00:00Z); TrieHH's planned for 2,500 users.
DECLARED = ["--windows", "2025-11-23T10:00:00Z..2025-11-23T12:00:00Z"]
TRIEHH_WINDOWS = DECLARED + ["--population", "2500"]
WINDOWS = (T0, T0 + 2 * HOUR)


def _nonce(state_dir, start):
    """The release nonce the window's state committed."""
    return StateStore(str(state_dir / "windows" / windowed.window_dir_name(start))).load().release_nonce


def _window_sampler(config, state_dir, start):
    return Sampler(SEED, config.window_identity()).window_keys().sampler(start, _nonce(state_dir, start))


def _write_jsonl(path, windows, rng):
    lines = []
    for start, population in windows:
        for user, items in population.items():
            for item in items:
                ms = (start + int(rng.integers(0, HOUR))) // 1000
                stamp = np.datetime64(ms, "ms").astype(str) + "Z"
                lines.append(json.dumps({"user_id": user, "item": item, "ts": stamp}))
    rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n")


def test_discover_window_releases_each_window_as_its_own_discovery(tmp_path):
    rng = np.random.default_rng(11)
    first, second = one_word_population(3000, 1, "a"), one_word_population(2600, 2, "b")
    records = tmp_path / "records.jsonl"
    _write_jsonl(records, [(T0, first), (T0 + HOUR, second)], rng)
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    out = tmp_path / "out"
    args = ["discover", "--protocol", "triehh", "--input", str(records), "--output", str(out), "--epsilon", "4", "--delta", "1e-5",
            "--max-length", "6", "--window", "1h", "--timestamp-column", "ts", "--seed-file", str(seed_file),
            *TRIEHH_WINDOWS]
    assert main(args) == 0
    config = DiscoveryConfig(input_pattern=str(records), output_dir=str(out), epsilon=4.0, delta=1e-5,
                             max_length=6, window=3600, timestamp_column="ts", seed=SEED, windows=WINDOWS,
                             population=2500, protocol="triehh")
    plan = planner.plan(2500, 4.0, 1e-5, 6)
    for start, population in ((T0, first), (T0 + HOUR, second)):
        released = out / windowed.window_dir_name(start)
        assert (released / windowed.RELEASED_MARKER).exists()
        expected = simulate(population, config.encoder, plan.theta, plan.batch_size,
                            _window_sampler(config, tmp_path / "out.state", start))
        trie = Trie.from_bytes((released / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels]
    assert sorted(p.name for p in out.iterdir()) == [windowed.window_dir_name(T0), windowed.window_dir_name(T0 + HOUR)]


def test_discover_window_with_triehh_plus_plus_releases_each_window_as_its_keyed_simulation(tmp_path, capsys):
    rng = np.random.default_rng(12)
    first, second = one_word_population(3000, 1, "a"), one_word_population(2600, 2, "b")
    records = tmp_path / "records.jsonl"
    _write_jsonl(records, [(T0, first), (T0 + HOUR, second)], rng)
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    out = tmp_path / "out"
    args = ["discover", "--protocol", "triehh", "--input", str(records), "--output", str(out), "--epsilon", "4", "--delta", "1e-5",
            "--max-length", "6", "--window", "1h", "--timestamp-column", "ts", "--seed-file", str(seed_file),
            "--protocol", "triehh++", *DECLARED]
    assert main(args) == 0
    assert "2 windows, 2 released" in capsys.readouterr().out
    config = DiscoveryConfig(input_pattern=str(records), output_dir=str(out), epsilon=4.0, delta=1e-5,
                             max_length=6, window=3600, timestamp_column="ts", seed=SEED, protocol="triehh++",
                             windows=WINDOWS)
    chosen = plan_sample_threshold(4.0, 1e-5, 6)
    for start, population in ((T0, first), (T0 + HOUR, second)):
        released = out / windowed.window_dir_name(start)
        assert (released / windowed.RELEASED_MARKER).exists()
        expected = simulate_sample_threshold(population, config.encoder, chosen.tau, chosen.sampling_probability,
                                             _window_sampler(config, tmp_path / "out.state", start))
        trie = Trie.from_bytes((released / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels]
        assert len(expected.heavy_hitters) >= 2
        privacy = json.loads((released / "heavy_hitters.json").read_text())["privacy"]
        assert privacy["protocol"] == "triehh++" and privacy["tau"] == chosen.tau


def test_discover_window_with_triehh_plus_plus_refuses_an_infeasible_target_unread(tmp_path, capsys):
    # Infeasible under the bound (eps_r > 1); under exact accounting the same target is a plan
    # (tests/job/windows/test_windowed.py).
    records = tmp_path / "records.jsonl"
    records.write_text('{"user_id": "u", "item": "the", "ts": 0}\n')
    code = main(_replay_args(records, tmp_path / "out", "--protocol", "triehh++", "--epsilon", "8",
                             "--accounting", "bound"))
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "eps_r = epsilon/L <= 1" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.jsonl"]  # no output, state or ledger


@pytest.mark.parametrize("flags, message", [
    (["--window", "1h"], "--window and --timestamp-column go together"),
    (["--timestamp-column", "ts"], "--window and --timestamp-column go together"),
    (["--window", "1h", "--timestamp-column", "ts", "--dry-run"], "a windowed discovery plans each window"),
    (["--window", "soon", "--timestamp-column", "ts"], "--window"),
    (["--window", "1h", "--timestamp-column", "ts", "--population", "100"], "--window needs --windows FROM..TO"),
    (["--window", "1h", "--timestamp-column", "ts", *DECLARED], "need --population N"),
    (["--window", "1h", "--timestamp-column", "ts", "--population", "100",
      "--windows", "2025-11-23T10:30:00Z..2025-11-23T12:00:00Z"], "not a window boundary of --window 3600s"),
    (["--window", "1h", "--timestamp-column", "ts", "--population", "100",
      "--windows", "2025-11-23T10:00:00+01:00..2025-11-23T12:00:00Z"], "is not in UTC"),
])
def test_discover_window_refuses_what_it_cannot_do(tmp_path, capsys, flags, message):
    records = tmp_path / "records.jsonl"
    records.write_text('{"user_id": "u", "item": "the", "ts": 0}\n')
    code = main(["discover", "--protocol", "triehh", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
                 "--delta", "1e-5", "--max-length", "6"] + flags)
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("verbose", [False, True])
def test_discover_window_names_its_dead_letters_by_kind_counts_only_when_verbose(tmp_path, capsys, verbose):
    records = tmp_path / "records.jsonl"
    good = [json.dumps({"user_id": f"u{i}", "item": "the", "ts": 1000 * i}) for i in range(40)]
    bad = ["{not json", json.dumps({"user_id": "v", "item": "the", "count": -1, "ts": 5}),
           json.dumps({"user_id": "w", "item": "the", "count": "x", "ts": 6})]
    records.write_text("\n".join(good + bad) + "\n")
    args = ["discover", "--protocol", "triehh", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
            "--delta", "1e-5", "--max-length", "6", "--window", "1h", "--timestamp-column", "ts",
            "--max-bad-fraction", "1", "--dead-letter", str(tmp_path / "dead.jsonl"), "--protocol", "triehh++",
            "--windows", "1970-01-01T00:00:00Z..1970-01-01T01:00:00Z"]
    assert main(args + (["--verbose"] if verbose else [])) == 0
    summary = [line for line in capsys.readouterr().out.splitlines() if "dead letters:" in line]
    assert len(summary) == 1, summary
    # Kinds most first; the exact counts (private operator data) only with --verbose.
    assert "dead letters: bad_count, malformed " in summary[0]
    assert ("[private: 2 bad_count, 1 malformed]" in summary[0]) == verbose
    assert str(tmp_path / "dead.jsonl") in summary[0]


@pytest.mark.parametrize("case, extra, message", [
    ("bad rows", [], "of the records are bad, more than --max-bad-fraction 0.05"),
    ("unusable items", ["--max-bad-fraction", "1"], "hold no usable item"),
])
def test_discover_window_refuses_bad_input_before_any_window_is_charged(tmp_path, capsys, case, extra, message):
    records = tmp_path / "records.jsonl"
    rng = np.random.default_rng(3)
    good = one_word_population(3000, 1, "a")
    lines = []
    for k, (user, items) in enumerate(good.items()):
        item = items[0] if case == "bad rows" else "a-much-longer-item-than-six"
        lines.append(json.dumps({"user_id": user, "item": item, "ts": T0 // 1000 + k}))
    if case == "bad rows":
        lines += ["{broken"] * 2000  # 40% of the rows
    rng.shuffle(lines)
    records.write_text("\n".join(lines) + "\n")
    args = ["discover", "--protocol", "triehh", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
            "--delta", "1e-5", "--max-length", "6", "--window", "1h", "--timestamp-column", "ts",
            "--ledger", str(tmp_path / "ledger"), *TRIEHH_WINDOWS, *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "no budget was spent" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.jsonl"]  # no output, state or ledger


def _replay_args(records, out, *extra):
    return ["discover", "--protocol", "triehh", "--input", str(records), "--output", str(out), "--epsilon", "4", "--delta", "1e-5",
            "--max-length", "6", "--window", "1h", "--timestamp-column", "ts", *TRIEHH_WINDOWS, *extra]


def _one_window(tmp_path, name="records.jsonl", zero_users=0):
    records = tmp_path / name
    population = one_word_population(3000, 1, "a")
    lines = [json.dumps({"user_id": u, "item": items[0], "ts": T0 // 1000 + k})
             for k, (u, items) in enumerate(population.items())]
    lines += [json.dumps({"user_id": f"z{k}", "item": "zero", "count": 0, "ts": T0 // 1000 + k})
              for k in range(zero_users)]
    records.write_text("\n".join(lines) + "\n")
    return records, population


def test_every_release_is_charged_once_per_output_and_input(tmp_path):
    # One seed file and one ledger: the same window released to two outputs is two releases,
    # each charged; the same command again releases and charges nothing more.
    records, _ = _one_window(tmp_path)
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    shared = ["--seed-file", str(seed_file), "--ledger", str(tmp_path / "ledger")]
    for out in ("out-a", "out-b", "out-a"):
        assert main(_replay_args(records, tmp_path / out, *shared)) == 0
    from triehh_beam.job.state.ledger import Ledger

    charges = [c for c in Ledger(str(tmp_path / "ledger")).records() if c["window_start"] == windowed.rfc3339(T0)]
    assert len(charges) == 2 and len({c["record_id"] for c in charges}) == 2
    for out in ("out-a", "out-b"):
        marker = json.loads((tmp_path / out / windowed.window_dir_name(T0) / windowed.RELEASED_MARKER).read_text())
        assert marker["job_id"].split("-window=")[0] in {c["record_id"].split("/")[0] for c in charges}


def test_without_a_seed_file_a_rerun_keeps_its_first_seed(tmp_path, capsys):
    records, _ = _one_window(tmp_path)
    ledger = ["--ledger", str(tmp_path / "ledger")]
    assert main(_replay_args(records, tmp_path / "out", *ledger)) == 0
    seed = tmp_path / "out.state" / "windowed_seed"
    assert seed.exists() and oct(seed.stat().st_mode & 0o777) == "0o600" and len(seed.read_bytes()) == 32
    trie = (tmp_path / "out" / windowed.window_dir_name(T0) / "trie.pb").read_bytes()
    capsys.readouterr()
    assert main(_replay_args(records, tmp_path / "out", *ledger)) == 0
    assert "already released" in capsys.readouterr().out
    from triehh_beam.job.state.ledger import Ledger

    charges = Ledger(str(tmp_path / "ledger")).records()  # the records' window and the empty one
    assert sorted(c["window_start"] for c in charges) == ["2025-11-23T10:00:00Z", "2025-11-23T11:00:00Z"]
    # (not charged again under a new seed)
    assert (tmp_path / "out" / windowed.window_dir_name(T0) / "trie.pb").read_bytes() == trie


def test_records_of_count_zero_are_no_records_as_in_discover(tmp_path):
    records, population = _one_window(tmp_path, zero_users=2000)
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    assert main(_replay_args(records, tmp_path / "out", "--seed-file", str(seed_file))) == 0
    report = windowed.read_window_reports(windowed.WindowedJob.for_config(
        DiscoveryConfig(input_pattern=str(records), output_dir=str(tmp_path / "out"), epsilon=4.0, delta=1e-5,
                        max_length=6, window=3600, timestamp_column="ts", windows=WINDOWS, population=2500, protocol="triehh"),
        SEED))[0]
    assert report["input"]["distinct_users"] == len(population)  # the 2,000 zero-count users are not n
    assert report["privacy"]["population"] == 2500  # planned for the declared population


def test_discover_window_publishes_each_windows_estimates_and_no_exact_count(tmp_path, capsys):
    rng = np.random.default_rng(13)
    first, second = one_word_population(3000, 1, "a"), one_word_population(2600, 2, "b")
    records = tmp_path / "records.jsonl"
    _write_jsonl(records, [(T0, first), (T0 + HOUR, second)], rng)
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    out, ledger = tmp_path / "out", tmp_path / "ledger"
    assert main(_replay_args(records, out, "--seed-file", str(seed_file), "--ledger", str(ledger),
                             "--estimate-frequencies", "0.5")) == 0
    console = capsys.readouterr()
    assert "each released window also spends epsilon_est=0.5" in console.out
    assert console.out.count("heavy hitters with frequency estimates") == 2
    config = DiscoveryConfig(input_pattern=str(records), output_dir=str(out), epsilon=4.0, delta=1e-5,
                             max_length=6, window=3600, timestamp_column="ts", seed=SEED, estimate_frequencies=0.5,
                             windows=WINDOWS, population=2500, protocol="triehh")
    hidden = set()
    for start, population in ((T0, first), (T0 + HOUR, second)):
        sampler = _window_sampler(config, tmp_path / "out.state", start)
        released = out / windowed.window_dir_name(start)
        trie = Trie.from_bytes((released / "trie.pb").read_bytes())
        expected = simulate_estimates(population, config.encoder, trie, sampler, 0.5).by_target()
        document = json.loads((released / "heavy_hitters.json").read_text())
        assert len(document["heavy_hitters"]) >= 2
        for entry in document["heavy_hitters"]:
            assert entry["estimate"] == expected[config.encoder.encode(entry["item"])]
        for entry in document["frequent_prefixes"]:
            assert entry["estimate"] == expected[tuple(entry["prefix"])]
        published = {n for e in document["heavy_hitters"] + document["frequent_prefixes"]
                     for n in [e["estimate"], *e["interval"]]}
        hidden |= set(_exact_counts(population, config.encoder, trie, sampler)) - published
    assert len(Ledger(str(ledger)).records()) == 2
    assert {r["estimate_epsilon"] for r in Ledger(str(ledger)).records()} == {0.5}
    # The exact counts behind the estimates (distinctive numbers of 3 or 4 digits) appear in no
    # published file, on the default console, in the ledger, or in the private state.
    hidden = {n for n in hidden if n > 100}  # distinctive numbers only (a 2-digit one is anywhere)
    assert len(hidden) >= 4, hidden
    texts = {"console": (console.out + console.err).replace(str(tmp_path), "")}  # (its digits are no counts)
    for root in (out, ledger, tmp_path / "out.state"):
        for path in root.rglob("*"):
            if path.is_file() and path.suffix != ".pb" and path.name != "windowed_seed":
                # Ids (hex digests, nonces, the stream id) are no counts: their digits are left out.
                texts[str(path)] = re.sub(r"[0-9a-f]{16,}", "", path.read_text(encoding="utf-8", errors="replace"))
    assert any("operator_report" in name for name in texts)
    for name, text in texts.items():
        numbers = {int(n) for n in re.findall(r"(?<![\d.])\d+(?![\d.])", text)}
        assert not numbers & hidden, (name, numbers & hidden)


def _exact_counts(population, encoder, trie, sampler):
    """The exact per-leaf counts behind a window's estimates, user by user (never written)."""
    targets = EstimateTargets.from_trie(trie)
    keys = EstimateKeys.derive(sampler.seed, sampler.identity)
    exact = [0] * len(targets)
    ids = sorted(population)
    for user, u in zip(ids, keys.choice_uniforms(ids)):
        chosen = user_choice([(encoder.encode(item), 1) for item in population[user]], targets, float(u))
        if chosen is not None:
            exact[chosen] += 1
    return exact


def test_two_replays_of_one_window_and_one_more_user_are_two_releases_with_their_own_keys(tmp_path):
    # Issue 24, finding 1: the same records, then the same plus one user holding "that", each to
    # its own input and output file, the state deleted between, one seed file and one ledger.
    import shutil

    population = one_word_population(3000, 1, "a")
    lines = [json.dumps({"user_id": u, "item": items[0], "ts": T0 // 1000 + k})
             for k, (u, items) in enumerate(population.items())]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    added = json.dumps({"user_id": "added", "item": "that", "ts": T0 // 1000 + 1})
    (tmp_path / "b.jsonl").write_text("\n".join(lines + [added]) + "\n")
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    shared = ["--seed-file", str(seed_file), "--ledger", str(tmp_path / "ledger"), "--estimate-frequencies", "1",
              "--state-dir", str(tmp_path / "state")]
    nonces, keys = [], []
    for name, out in (("a.jsonl", "out-a"), ("b.jsonl", "out-b")):
        assert main(_replay_args(tmp_path / name, tmp_path / out, *shared)) == 0
        nonces.append(_nonce(tmp_path / "state", T0))
        config = DiscoveryConfig(input_pattern=str(tmp_path / name), output_dir=str(tmp_path / out), epsilon=4.0,
                                 delta=1e-5, max_length=6, window=3600, timestamp_column="ts", seed=SEED,
                                 estimate_frequencies=1.0, windows=WINDOWS, population=2500, protocol="triehh")
        keys.append(window_estimate_keys(Sampler(SEED, config.window_identity()).window_keys(), T0, nonces[-1]))
        shutil.rmtree(tmp_path / "state")
    charges = Ledger(str(tmp_path / "ledger")).records()
    window = [c for c in charges if c["window_start"] == "2025-11-23T10:00:00Z"]
    assert len(window) == 2 and len({c["record_id"] for c in window}) == 2  # both charged
    assert nonces[0] != nonces[1] and keys[0] != keys[1]  # fresh keys: other samples, other noise
    # The window's first-round samples under the two releases' keys: independent draws of m of n.
    m = planner.plan(2500, 4.0, 1e-5, 6).batch_size
    users = sorted(population)
    samples = [set(Sampler(SEED, config.window_identity()).window_keys().sampler(T0, v).sample(1, users, m))
               for v in nonces]
    assert len(samples[0] & samples[1]) < m // 2  # expected overlap m^2/n = 4 of 108


@pytest.mark.parametrize("case", ["output is a file", "state inside the output"])
def test_the_output_and_state_locations_are_checked_before_any_window_is_charged(tmp_path, capsys, case):
    records, _ = _one_window(tmp_path)
    extra = ["--ledger", str(tmp_path / "ledger")]
    if case == "output is a file":
        (tmp_path / "out").write_text("not a directory\n")
    else:
        extra += ["--state-dir", str(tmp_path / "out" / "state")]
    assert main(_replay_args(records, tmp_path / "out", *extra)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert ("is not a directory" if case == "output is a file" else " is inside ") in err
    assert not (tmp_path / "ledger").exists() and not (tmp_path / "out.state").exists()
