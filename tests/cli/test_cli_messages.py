"""The refusals a new user meets, one per subcommand: exit code 2 and one line on stderr that
names the flag as typed and says what to do (issue 26: a directory as ``--input``, ``--epsilon
inf``, an empty input, a mistyped or abbreviated flag)."""

import pytest

from triehh_beam.cli import main

TARGET = ["--epsilon", "4", "--delta", "1e-6", "--max-length", "4"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("argv, expected", [
    (["discover", "--input", "a.jsonl", "--output", "o", "--epsilon", "inf", "--delta", "1e-6", "--max-length", "4"],
     "argument --epsilon: must be finite, got 'inf'"),
    (["discover", "--input", "a.jsonl", "--output", "o", "--epsilon", "4", "--delta", "nan", "--max-length", "4"],
     "argument --delta: must be finite, got 'nan'"),
    (["discover", "--input", "a.jsonl", "--output", "o", "--epsilom", "4", "--delta", "1e-6", "--max-length", "4"],
     "unknown argument --epsilom (did you mean --epsilon?)"),
    (["discover", "--input", "a.jsonl", "--output", "o", "--eps", "4", "--delta", "1e-6", "--max-length", "4"],
     "unknown argument --eps (did you mean --epsilon?)"),
    (["discover", "--input", "a.jsonl", "--output", "o", *TARGET, "--max-bad-fraction=-inf"],
     "argument --max-bad-fraction: must be finite, got '-inf'"),
    (["demo", "--epsilom", "3"], "unknown argument --epsilom (did you mean --epsilon?)"),
    (["demo", "--epsilon", "inf"], "argument --epsilon: must be finite, got 'inf'"),
    (["plan", "-n", "1000", "--epsilon", "nan", "--delta", "1e-6", "--max-length", "4"],
     "argument --epsilon: must be finite, got 'nan'"),
    (["plan", "-n", "1000", "--epsilon", "4", "--delta", "1e-6", "--max-lenght", "4"],
     "unknown argument --max-lenght (did you mean --max-length?)"),
    (["plan", "-n", "1000", *TARGET, "--colour"], "unrecognized arguments: --colour"),
    (["ledger", "--ledgr", "x"], "unknown argument --ledgr (did you mean --ledger?)"),
    (["ledger", "--ledger", "/no/such/ledger"], "--ledger /no/such/ledger: no such directory"),
    (["ledger", "--state", "/no/such/state"], "--state /no/such/state: no such directory"),
    (["stream", "--epsilon", "inf"], "argument --epsilon: must be finite, got 'inf'"),
    (["stream", "--output", "o", *TARGET, "--subscriptoin", "x"],
     "unknown argument --subscriptoin (did you mean --subscription?)"),
    (["federated", "serve", "--epsilom", "3"], "unknown argument --epsilom (did you mean --epsilon?)"),
    (["scheduled", "--confg", "x.toml"], "unknown argument --confg (did you mean --config?)"),
    # A Beam flag's typo, also when argparse fails first (here: no --max-length): Beam's flags are
    # candidates (it used to suggest triehh's --rule), and a Beam flag is never taken for a typo.
    (["discover", "--input", "a.jsonl", "--output", "o", "--epsilon", "1", "--runer=DataflowRunner"],
     "unknown argument --runer (did you mean --runner, a Beam pipeline option?)"),
    (["discover", "--input", "a.jsonl", "--output", "o", "--epsilon", "1", "--runer", "DataflowRunner"],
     "unknown argument --runer (did you mean --runner, a Beam pipeline option?)"),
    (["stream", "--output", "o", "--runer=DataflowRunner"],
     "unknown argument --runer (did you mean --runner, a Beam pipeline option?)"),
    (["discover", "--input", "a.jsonl", "--output", "o", "--epsilon", "1", "--runner=DataflowRunner"],
     "the following arguments are required: --delta, --max-length"),
])
def test_a_bad_flag_is_refused_in_one_line_naming_it(argv, expected, capsys):
    assert main(argv) == 2
    line = _one_line(capsys)
    assert line.startswith(f"triehh {argv[0]}")
    assert expected in line


def test_a_beam_option_close_to_a_flag_is_not_taken_for_a_typo(capsys):
    # --update is Beam's (streaming update), one edit from scheduled's --date: no "did you mean".
    assert main(["scheduled", "--config", "x.toml", "--date", "2026-01-02", "--update"]) == 2
    line = _one_line(capsys)
    assert "did you mean" not in line and "--update" in line


def test_a_directory_as_input_asks_for_a_pattern_of_its_files(tmp_path, capsys):
    (tmp_path / "records").mkdir()
    assert main(["discover", "--input", str(tmp_path / "records"), "--output", str(tmp_path / "o"), *TARGET]) == 2
    line = _one_line(capsys)
    assert f"--input {tmp_path / 'records'} is a directory" in line
    assert f"--input '{tmp_path / 'records'}/*.jsonl'" in line
    assert not (tmp_path / "o").exists()


def test_an_unknown_extension_names_the_format_flag(tmp_path, capsys):
    path = tmp_path / "records.txt"
    path.write_text('{"user": "a", "item": "x"}\n')
    assert main(["discover", "--input", str(path), "--output", str(tmp_path / "o"), *TARGET]) == 2
    line = _one_line(capsys)
    assert f"cannot tell the format of {path}" in line and "pass --format jsonl, csv or parquet" in line
    assert "format=" not in line


@pytest.mark.parametrize("content", ["", "\n\n"], ids=["empty", "blank-lines"])
def test_an_input_without_records_says_so_and_names_it(tmp_path, capsys, content):
    path = tmp_path / "records.jsonl"
    path.write_text(content)
    assert main(["discover", "--input", str(path), "--output", str(tmp_path / "o"), *TARGET]) == 2
    line = _one_line(capsys)
    assert f"the input {path} holds no usable records" in line
    assert "population" not in line
    assert not (tmp_path / "o" / "heavy_hitters.json").exists()


def test_records_without_the_named_column_point_at_the_column_flags(tmp_path, capsys):
    path = tmp_path / "records.csv"
    path.write_text("a,b\n1,2\n")
    assert main(["discover", "--input", str(path), "--output", str(tmp_path / "o"), *TARGET]) == 2
    line = _one_line(capsys)
    assert f"{path}: no user id column 'user_id'" in line and "--user-column" in line


def test_a_missing_seed_file_names_the_flag(tmp_path, capsys):
    missing = tmp_path / "no-seed.bin"
    assert main(["discover", "--input", "a.jsonl", "--output", str(tmp_path / "o"), *TARGET,
                 "--seed-file", str(missing)]) == 2
    line = _one_line(capsys)
    assert line == f"triehh: error: --seed-file {missing}: cannot read it (No such file or directory)"


@pytest.mark.parametrize("value", ["inf", '"nan"'])
def test_a_scheduled_config_refuses_a_non_finite_number_naming_its_key(tmp_path, capsys, value):
    config = tmp_path / "job.toml"
    config.write_text(f'[discovery]\ninput = "{tmp_path}/r.jsonl"\noutput_root = "{tmp_path}/runs"\n'
                      f'epsilon = {value}\ndelta = 1e-6\nmax_length = 4\n')
    assert main(["scheduled", "--config", str(config), "--date", "2026-01-02"]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"triehh scheduled: error: {config}: [discovery] epsilon must be a finite number, got ")
    assert not (tmp_path / "runs").exists()
