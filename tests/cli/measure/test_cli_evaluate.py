"""``triehh evaluate`` keeps an earlier evaluation unless told: refused before anything runs,
overwritten with ``--force``."""

import json

from triehh_beam.cli import main
from triehh_beam.io.write import write_records


def _evaluate(path, output, *extra):
    return main(["evaluate", "--input", path, "--epsilon", "8", "--delta", "1e-3", "--max-length", "4",
                 "--runs", "1", "--top-k", "2", "--rivals", "exact", "--engine", "simulate",
                 "--no-progress", "--output", str(output), *extra])


def test_an_earlier_evaluation_is_kept_unless_forced(tmp_path, capsys):
    path = str(tmp_path / "records.jsonl")
    rows, user = [], 0
    for item, holders in {"aa": 400, "ab": 300, "b": 200}.items():
        rows += [(user + i, item) for i in range(holders)]
        user += holders
    write_records(path, rows)
    output = tmp_path / "eval"
    assert _evaluate(path, output) == 0
    first = (output / "evaluation.json").read_bytes()
    capsys.readouterr()

    # Refused, in one line, before any run: the earlier files are untouched.
    assert _evaluate(path, output, "--runs", "2") == 2
    captured = capsys.readouterr()
    assert captured.err == (f"triehh evaluate: error: {output} already holds an evaluation "
                            "(evaluation.json, report.html): give --force to overwrite it, or another --output\n")
    assert captured.out == ""
    assert (output / "evaluation.json").read_bytes() == first

    assert _evaluate(path, output, "--runs", "2", "--force") == 0
    assert json.loads((output / "evaluation.json").read_text(encoding="utf-8"))["parameters"]["runs"] == 2


def test_max_length_counts_units_as_in_discover(tmp_path):
    """The same --unit-size and --max-length give the same L, in units, to evaluate and discover
    (--unit-size 3 --max-length 10 was 10 rounds in discover and 4 in evaluate); with several unit
    sizes L counts units of the smallest and each other one fits the same characters."""
    import argparse

    from triehh_beam.cli import argtypes, discover
    from triehh_beam.cli.measure import evaluate

    flags = ["--input", str(tmp_path / "records.csv"), "--epsilon", "8", "--delta", "1e-3",
             "--max-length", "10", "--unit-size", "3"]
    parser = argtypes.ArgumentParser()
    discover.add_discover_arguments(parser)
    found = discover.config_from_args(parser.parse_known_args(flags + ["--output", str(tmp_path / "d")])[0])
    parser = argparse.ArgumentParser()
    evaluate.add_evaluate_arguments(parser)
    config = evaluate.config_from_args(parser.parse_args(flags + ["--output", str(tmp_path / "e")]))
    assert found.encoder.max_length == config.encoder(3).max_length == 10
    assert config.max_characters == 27 == (found.encoder.max_length - 1) * found.encoder.unit_size

    parser = argparse.ArgumentParser()
    evaluate.add_evaluate_arguments(parser)
    several = evaluate.config_from_args(parser.parse_args(
        flags[:-1] + ["2,3", "--output", str(tmp_path / "e")]))
    assert several.max_characters == 18  # 9 units of 2 characters
    assert [several.encoder(k).max_length for k in (2, 3)] == [10, 7]  # ceil(18 / 3) + 1


def test_help_says_its_runs_are_measurements_not_private_releases(capsys):
    # issue 38: evaluate uses a public seed, a fixed nonce and no charge on any input.
    assert main(["evaluate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "measurements, not private releases" in text and "no ledger charge" in text
