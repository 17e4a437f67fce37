"""``triehh discover --window --timestamp-column``: the bounded replay from files, through the
command line, equals the keyed simulation of each window's records alone."""

import json

import numpy as np
import pytest

from triehh_beam.cli.main import main
from triehh_beam.evaluation.simulation import simulate
from triehh_beam.job import windowed
from triehh_beam.job.config import DiscoveryConfig
from triehh_beam.protocol import planner
from triehh_beam.protocol.sampling import Sampler
from triehh_beam.protocol.trie import Trie
from tests.job.test_windowed import HOUR, SEED, T0, _population


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
    first, second = _population(3000, 1, "a"), _population(2600, 2, "b")
    records = tmp_path / "records.jsonl"
    _write_jsonl(records, [(T0, first), (T0 + HOUR, second)], rng)
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(SEED)
    out = tmp_path / "out"
    args = ["discover", "--input", str(records), "--output", str(out), "--epsilon", "4", "--delta", "1e-5",
            "--max-length", "6", "--window", "1h", "--timestamp-column", "ts", "--seed-file", str(seed_file)]
    assert main(args) == 0
    config = DiscoveryConfig(input_pattern=str(records), output_dir=str(out), epsilon=4.0, delta=1e-5,
                             max_length=6, window=3600, timestamp_column="ts", seed=SEED)
    window_keys = Sampler(SEED, config.window_identity()).window_keys()
    for start, population in ((T0, first), (T0 + HOUR, second)):
        released = out / windowed.window_dir_name(start)
        assert (released / windowed.RELEASED_MARKER).exists()
        plan = planner.plan(len(population), 4.0, 1e-5, 6)
        expected = simulate(population, config.encoder, plan.theta, plan.batch_size, window_keys.sampler(start))
        trie = Trie.from_bytes((released / "trie.pb").read_bytes())
        assert [set(level) for level in trie.levels] == [set(level) for level in expected.levels]
    assert sorted(p.name for p in out.iterdir()) == [windowed.window_dir_name(T0), windowed.window_dir_name(T0 + HOUR)]


@pytest.mark.parametrize("flags, message", [
    (["--window", "1h"], "--window and --timestamp-column go together"),
    (["--timestamp-column", "ts"], "--window and --timestamp-column go together"),
    (["--window", "1h", "--timestamp-column", "ts", "--dry-run"], "a windowed discovery plans each window"),
    (["--window", "soon", "--timestamp-column", "ts"], "--window"),
])
def test_discover_window_refuses_what_it_cannot_do(tmp_path, capsys, flags, message):
    records = tmp_path / "records.jsonl"
    records.write_text('{"user_id": "u", "item": "the", "ts": 0}\n')
    code = main(["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
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
    args = ["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
            "--delta", "1e-5", "--max-length", "6", "--window", "1h", "--timestamp-column", "ts",
            "--max-bad-fraction", "1", "--dead-letter", str(tmp_path / "dead.jsonl")]
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
    good = _population(3000, 1, "a")
    lines = []
    for k, (user, items) in enumerate(good.items()):
        item = items[0] if case == "bad rows" else "a-much-longer-item-than-six"
        lines.append(json.dumps({"user_id": user, "item": item, "ts": T0 // 1000 + k}))
    if case == "bad rows":
        lines += ["{broken"] * 2000  # 40% of the rows
    rng.shuffle(lines)
    records.write_text("\n".join(lines) + "\n")
    args = ["discover", "--input", str(records), "--output", str(tmp_path / "out"), "--epsilon", "4",
            "--delta", "1e-5", "--max-length", "6", "--window", "1h", "--timestamp-column", "ts",
            "--ledger", str(tmp_path / "ledger"), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "no budget was spent" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.jsonl"]  # no output, state or ledger
