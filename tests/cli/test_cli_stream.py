"""``triehh stream``'s arguments: a mistake is one line naming the flag (exit code 2, no
traceback) before any job is built or any directory made. The stream itself runs end to end
in tests/e2e/test_stream_emulator.py."""

import pytest

from triehh_beam.cli.dispatch import main

SUBSCRIPTION = "projects/p/subscriptions/records"
TARGET = ["--epsilon", "4", "--delta", "1e-8", "--max-length", "6"]
DECLARED = ["--windows", "2025-11-23T10:00:00Z..2025-11-24T00:00:00Z", "--population", "50000"]


@pytest.mark.parametrize("flags, message", [
    ([], "--window is required"),
    (["--window", "soon"], "not a duration: 'soon'"),
    (["--window", "0"], "--window must be at least 1 second"),
    (["--window", "1h", "--allowed-lateness=-5m"], "not a duration: '-5m'"),
    (["--window", "1h", "--stop-after-windows", "0"], "--stop-after-windows must be >= 1, got 0"),
    (["--window", "1h", "--budget_epsilon", "5"], "--budget_epsilon"),
    (["--window", "1h", "--population", "5000"], "--window needs --windows FROM..TO"),
    (["--window", "1h", "--windows", "2025-11-23T10:00:00Z..2025-11-24T00:00:00Z"],
     "need --population N, a public lower bound of every window's users"),
    (["--window", "1h", "--windows", "2025-11-23T10:00:00Z..2025-11-23T10:30:00Z"], "not a window boundary"),
    (["--window", "1h", "--windows", "2025-11-23T10:00Z"], "not a range of windows"),
    (["--window", "1h", *DECLARED, "--stop-after-windows", "15"],
     "--stop-after-windows 15 is more than the 14 windows --windows declares"),
    # issue 41: central and batch only
    (["--window", "1h", *DECLARED, "--protocol", "noisy-rounds"], "--protocol noisy-rounds: --window is not available"),
])
def test_a_mistake_is_one_line_naming_the_flag_and_nothing_is_made(tmp_path, capsys, flags, message):
    code = main(["stream", "--protocol", "triehh", "--subscription", SUBSCRIPTION, "--output", str(tmp_path / "out"),
                 "--state-dir", str(tmp_path / "state"), *TARGET, *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flags, message", [
    (["--subscription", "projects/p/topics/records"], "--subscription must be projects/PROJECT/subscriptions/NAME"),
    (["--subscription", SUBSCRIPTION, "--message-format", "xml"], "--message-format"),
    (["--subscription", SUBSCRIPTION, "--input", "records.jsonl"], "--input"),
])
def test_the_source_is_a_subscription_and_a_known_message_format(tmp_path, capsys, flags, message):
    try:
        code = main(["stream", "--protocol", "triehh", "--output", str(tmp_path / "out"), "--window", "1h", *TARGET, *flags])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_subscription_beam_refuses_is_one_line_too(tmp_path, capsys):
    # Our check accepts the shape; Beam's refuses a project id of one letter.
    code = main(["stream", "--protocol", "triehh", "--subscription", "projects/p/subscriptions/s", "--output", str(tmp_path / "out"),
                 "--state-dir", str(tmp_path / "state"), "--window", "1h", *TARGET, *DECLARED])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "project" in err.lower()
    assert list(tmp_path.iterdir()) == []


def test_the_stream_takes_no_whole_input_refusals(tmp_path, capsys):
    for flag in ("--max-bad-fraction", "--max-unusable-fraction"):
        code = main(["stream", "--protocol", "triehh", "--subscription", SUBSCRIPTION, "--output", str(tmp_path / "out"), "--window", "1h",
                     *TARGET, flag, "0.1"])
        assert code == 2 and flag in capsys.readouterr().err
