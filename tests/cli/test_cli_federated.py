"""``triehh federated``'s arguments: a mistake is one line naming the flag (exit code 2, no
traceback) before any job is built or any directory made. The server and the simulation run
end to end in tests/e2e/test_federated_emulator.py and test_federated_serve.py."""

import pytest

from triehh_beam.cli.dispatch import main

TARGET = ["--epsilon", "8", "--delta", "1e-6", "--max-length", "6"]
SERVE = ["--announce-topic", "projects/p/topics/a", "--reports-subscription", "projects/p/subscriptions/r"]


@pytest.mark.parametrize("flags, message", [
    (["--report-goal", "0"], "--report-goal is a fraction of the selected devices in (0, 1], got 0.0"),
    (["--report-goal", "1.5"], "--report-goal is a fraction"),
    (["--round-deadline", "0"], "--round-deadline must be > 0 and at most 31,622,400 seconds (a year), got 0.0"),
    (["--round-deadline", "inf"], "argument --round-deadline: must be finite, got 'inf'"),
    (["--budget_epsilon", "5"], "--budget_epsilon"),
    (["--estimate-frequencies", "0"], "--estimate-frequencies must be a positive epsilon, got 0.0"),
    (["--report-goal", "0.9"], "--report-goal 0.9 would close a round before its deadline"),
    (["--cohort-size", "50"], "--cohort-size, --cohort-minimum, --cohort-threshold and --secure-alphabet need "
                              "--secure-aggregation"),
    (["--secure-aggregation", "--cohort-minimum", "1"], "min_size 1 must be in [2, max_size // 2 = 250]"),
    (["--secure-aggregation", "--cohort-threshold", "0"], "the cohort threshold 0.0 must be a fraction in (0, 1]"),
    (["--secure-aggregation", "--secure-alphabet", "aba"], "--secure-alphabet must be distinct characters"),
    (["--secure-aggregation", "--case-fold", "--secure-alphabet", "aB"],
     "--secure-alphabet character 'B' is not a unit of this encoding (not normalised)"),
    (["--secure-aggregation", "--unit-size", "2"], "--secure-aggregation needs text items of one-character units"),
    (["--protocol", "noisy-rounds"], "--protocol noisy-rounds is central only"),  # issue 41
    (["--protocol", "partition-selection"], "--protocol partition-selection is central only"),
])
def test_a_serve_mistake_is_one_line_and_nothing_is_made(tmp_path, capsys, flags, message):
    registry = tmp_path / "registry.txt"
    registry.write_text("a\nb\n")
    before = set(tmp_path.iterdir())
    code = main(["federated", "serve", "--protocol", "triehh", "--devices", str(registry), "--output", str(tmp_path / "out"), *SERVE,
                 *TARGET, *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert set(tmp_path.iterdir()) == before


@pytest.mark.parametrize("flags, message", [
    (["--dropout", "1.5"], "--dropout is a probability in [0, 1], got 1.5"),
    (["--latency=-1"], "--latency must be >= 0 seconds"),
    (["--report-goal", "0.5"], "--report-goal 0.5 would close a round before its deadline"),
    (["--secure-alphabet", "ab"], "need --secure-aggregation"),
    (["--protocol", "noisy-rounds"], "--protocol noisy-rounds is central only"),  # issue 41
])
def test_a_simulate_mistake_is_one_line(tmp_path, capsys, flags, message):
    records = tmp_path / "records.jsonl"
    records.write_text('{"user_id": 1, "item": "a"}\n')
    code = main(["federated", "simulate", "--protocol", "triehh", "--input", str(records), "--output", str(tmp_path / "out"), *TARGET,
                 *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_serve_needs_its_registry_and_topics(capsys):
    assert main(["federated", "serve", "--protocol", "triehh", "--output", "out", *TARGET]) == 2
    assert capsys.readouterr().err.strip() == (
        "triehh federated serve: error: the following arguments are required: --devices, --announce-topic, "
        "--reports-subscription (see triehh federated serve --help)")
