"""Frequency estimates as a reader sees them: ``heavy_hitters.json``'s entries (built from a state,
every item type), the estimate job's JSON line round trip, ``triehh show`` reading them back,
and ``triehh discover --estimate-frequencies`` printing them on a small population."""

import json

import pytest

from triehh_beam.cli import main
from triehh_beam.job.release import outputs
from triehh_beam.present import result as published
from triehh_beam.present import show
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.estimates.count_intervals import noisy_count_intervals
from triehh_beam.protocol.estimates.frequency_estimates import EstimateTargets, FrequencyEstimates
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.rounds.trie import Trie

SEED = bytes(range(40, 72))
TARGET = ["--epsilon", "4", "--delta", "1e-6", "--max-length", "4"]


def _state(trie, estimates):
    state = state_pb2.JobState(job_id="abc", created_at="2026-11-23T10:00:00+00:00", stop_reason="x",
                               plan=state_pb2.PrivacyPlan(protocol="triehh", rule="authors", target_epsilon=4, target_delta=1e-6,
                                                          theta=10, max_length=trie.encoder.max_length,
                                                          epsilon=3.9, delta=1e-7, estimate_epsilon=0.5))
    released = FrequencyEstimates(EstimateTargets.from_trie(trie), tuple(estimates), 0.5, 6)
    state.estimates.CopyFrom(outputs.estimates_from_json(
        outputs.estimates_to_json(released, trie.encoder).encode(), trie.encoder))
    return state


@pytest.mark.parametrize("kind", ["text", "bytes", "int"])
def test_each_entry_carries_its_estimate_and_show_reads_it_back(kind, tmp_path):
    if kind == "text":
        encoder = ItemEncoder(ItemKind.TEXT, max_length=4)
        leaves = [encoder.encode("ab"), encoder.encode("b"), ("c", "d")]
    elif kind == "bytes":
        encoder = ItemEncoder(ItemKind.BYTES, max_length=4)
        leaves = [encoder.encode(b"\x01\x02"), (b"\x03",)]
    else:
        encoder = ItemEncoder(ItemKind.INT, unit_size=4, max_length=3, int_bits=8)
        leaves = [encoder.encode(5), (b"1111",)]
    depth = max(len(s) for s in leaves)
    trie = Trie(encoder, [{s[:r] for s in leaves if len(s) >= r} for r in range(1, depth + 1)])
    targets = EstimateTargets.from_trie(trie)
    values = [100 * (i + 1) - 7 for i in range(len(targets))]  # distinct
    values[-1] = -3  # an estimate may be negative: published raw
    state = _state(trie, values)
    document = outputs.published_document(state, trie)
    expected = dict(zip(targets.sequences, values))
    for entry in document["heavy_hitters"]:
        sequence = published.item_sequence(entry, encoder)
        assert entry["estimate"] == expected[sequence]
        assert entry["interval"] == list(noisy_count_intervals([entry["estimate"]], 0.5)[0])
    for entry in document["frequent_prefixes"]:
        assert entry["estimate"] == expected[published.prefix_sequence(entry, encoder)]
    assert -3 in [e["estimate"] for e in document["heavy_hitters"] + document["frequent_prefixes"]]
    block = document["frequency_estimates"]
    assert block["epsilon"] == 0.5 and block["half_width"] == 6 and block["level"] == 0.95
    assert "negative" in block["note"] and block["quantity"].startswith("weighted users")
    assert "noise's alone" in block["interval_note"]
    assert document["privacy"]["estimate_epsilon"] == 0.5
    # Read back by triehh show, as a document alone and beside trie.pb.
    (tmp_path / "heavy_hitters.json").write_text(json.dumps(document))
    (tmp_path / "trie.pb").write_bytes(trie.to_bytes())
    result = published.load_result(str(tmp_path))
    assert result.trie == trie
    intervals = dict(zip(expected, noisy_count_intervals(list(expected.values()), 0.5)))
    assert result.estimates() == {s: (v, *intervals[s]) for s, v in expected.items()}
    assert intervals[targets.sequences[-1]] == (0, intervals[targets.sequences[-1]][1])  # -3: f >= 0
    text = show.render_text(result, tree=False)
    assert "95% interval" in text and "epsilon_est=0.5" in text and "weighted users" in text
    assert "covers the noise alone" not in text
    assert published.trie_from_document(document) == trie


def test_show_says_an_older_results_interval_covers_the_noise_alone(tmp_path):
    # Published before the intervals counted the users' draws: no "quantity", estimate +- k.
    encoder = ItemEncoder(ItemKind.TEXT, max_length=4)
    trie = Trie(encoder, [{("a",), ("b",)}, {("a", ""), ("b", "")}])
    document = outputs.published_document(_state(trie, [120, 40]), trie)
    del document["frequency_estimates"]["quantity"], document["frequency_estimates"]["interval_note"]
    for entry in document["heavy_hitters"]:
        entry["interval"] = [entry["estimate"] - 6, entry["estimate"] + 6]
    (tmp_path / "heavy_hitters.json").write_text(json.dumps(document))
    result = published.load_result(str(tmp_path / "heavy_hitters.json"))
    assert result.estimates()[encoder.encode("a")] == (120, 114, 126)
    text = show.render_text(result, tree=False)
    assert "covers the noise alone" in text and "114 to 126" in text


def test_without_estimates_the_document_is_unchanged():
    encoder = ItemEncoder(ItemKind.TEXT, max_length=4)
    trie = Trie(encoder, [{("a",)}, {("a", "")}])
    state = state_pb2.JobState(plan=state_pb2.PrivacyPlan(protocol="triehh", target_epsilon=4, target_delta=1e-6,
                                                         max_length=4))
    document = outputs.published_document(state, trie)
    assert document["heavy_hitters"] == ["a"] and "frequency_estimates" not in document
    assert "estimate_epsilon" not in document["privacy"]
    assert published.PublishedResult(trie, document, ()).estimates() == {}


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_discover_prints_the_estimates_and_show_tables_them(tmp_path, make_population, capsys):
    records = make_population(2000, max_chars=3, vocabulary=60, exponent=1.5).write(tmp_path, name="users")
    seed = tmp_path / "seed.bin"
    seed.write_bytes(SEED)
    out = tmp_path / "out"
    code = main(["discover", "--protocol", "triehh", "--input", records, "--output", str(out), *TARGET, "--seed-file", str(seed),
                 "--estimate-frequencies", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "frequency estimates epsilon_est=2: total target epsilon=6" in printed  # the plan line
    assert ("(estimate: weighted users, each user counted once for one of its discovered entries, by its share "
            "of its records: the holders when each holds one, fewer when holders hold several; ") in printed
    assert "frequency estimates: + epsilon_est=2" in printed
    document = json.loads((out / "heavy_hitters.json").read_text())
    first = document["heavy_hitters"][0]
    assert set(first) == {"item", "estimate", "interval"}
    assert f"{first['estimate']:,}  ({first['interval'][0]:,} to {first['interval'][1]:,})" in printed
    assert main(["show", str(out), "--no-tree"]) == 0
    shown = capsys.readouterr().out
    assert "estimate  95% interval" in shown and "+ frequency estimates, epsilon_est=2" in shown
    # The ledger names the parts of the spend.
    assert main(["ledger", "--state", f"{out}.state"]) == 0
    assert "estimate" in capsys.readouterr().out


def test_plan_shows_the_estimates_interval_and_the_total(capsys):
    base = ["plan", "--protocol", "triehh", "--population", "200000", "--epsilon", "4", "--delta", "1e-10", "--max-length", "10"]
    assert main(base + ["--estimate-frequencies", "1"]) == 0
    text = capsys.readouterr().out
    assert "total target epsilon      5 (epsilon + estimate epsilon" in text
    assert "noise alone               estimate +- 3 (covers 97.32%)" in text
    assert "95% interval              at an estimate of 10: 4 to 19, 100: 81 to 122" in text
    assert main(base + ["--estimate-frequencies", "0.1", "--json"]) == 0
    block = json.loads(capsys.readouterr().out)["frequency_estimates"]
    assert block["half_width"] == 30 and block["total_target_epsilon"] == pytest.approx(4.1)
    assert block["intervals"]["100"] == list(noisy_count_intervals([100], 0.1)[0])
    assert main(base[:-2] + ["--max-length", "4", "--protocol", "triehh++", "--estimate-frequencies", "0.5"]) == 0
    assert "estimate +- 6 (covers" in capsys.readouterr().out
    assert main(base + ["--estimate-frequencies", "1", "--compare-units"]) == 2
    assert "--estimate-frequencies" in capsys.readouterr().err
    assert main(base) == 0
    assert "Frequency estimates" not in capsys.readouterr().out
