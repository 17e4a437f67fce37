"""``triehh discover`` through ``triehh_beam.cli.main``: a run on a small fixture, the one-line
refusals with exit code 2, and Beam options passed through."""

import json

import pytest

from triehh_beam.protocol import planner
from triehh_beam.cli import main

SEED = bytes(range(100, 132))
# 2,000 users (a steep Zipf law over 60 short words) are enough for a planned run at this target
# that finds a few words (theta = 10, m = 126, L = 4); 50 users are too few for the target.
TARGET = ["--epsilon", "4", "--delta", "1e-6", "--max-length", "4"]


@pytest.fixture(scope="module")
def records(tmp_path_factory, make_population):
    directory = tmp_path_factory.mktemp("cli-records")
    return make_population(2000, max_chars=3, vocabulary=60, exponent=1.5).write(directory, name="users")


@pytest.fixture(scope="module")
def few_records(tmp_path_factory, make_population):
    directory = tmp_path_factory.mktemp("cli-few-records")
    return make_population(50, max_chars=3, vocabulary=20).write(directory, name="users")


@pytest.fixture
def seed_file(tmp_path):
    path = tmp_path / "seed.bin"
    path.write_bytes(SEED)
    return str(path)


def _discover(*flags):
    return main(["discover", *flags])


def _one_line_error(capsys) -> str:
    """The stderr of a refused command: exactly one line, no traceback."""
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_discover_runs_and_prints_progress_and_a_summary(records, tmp_path, seed_file, capsys):
    output = tmp_path / "out"
    # --direct_num_workers is a Beam option: unknown to our parser, passed through to Beam.
    code = _discover("--input", records, "--output", str(output), *TARGET, "--seed-file", seed_file,
                     "--direct_num_workers=1")
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"census: counting distinct users in {records}"
    assert "census: 2,000 users; read 2,000 records from 1 file; none dropped" in lines
    plan = planner.plan(2000, 4.0, 1e-6, 4)
    assert f"plan: n=2,000 theta={plan.theta} m={plan.batch_size} L=4 rule=authors: epsilon={plan.epsilon:.4g} " \
           f"delta={plan.delta:.3g}" in lines
    rounds = [line for line in lines if line.startswith("round ")]
    assert rounds and rounds[0].startswith(f"round 1/4: frontier 1, users sampled {plan.batch_size}, ")
    document = json.loads((output / "heavy_hitters.json").read_text(encoding="utf-8"))
    summary = next(i for i, line in enumerate(lines) if line.startswith("discovered "))
    assert lines[summary].startswith(f"discovered {len(document['heavy_hitters'])} heavy hitters in "
                                     f"{document['rounds_run']} rounds ({document['stop_reason']})")
    assert document["heavy_hitters"]
    for item in document["heavy_hitters"]:
        assert f"  {item}" in lines[summary + 1:]
    assert f"privacy: ({plan.epsilon:.4g}, {plan.delta:.3g})-DP, user level, for all 4 rounds; " \
           f"n=2,000, theta={plan.theta}, m={plan.batch_size} per round" in lines
    assert lines[-1] == f"results: {output / 'heavy_hitters.json'}"
    assert (output / "trie.pb").is_file()
    assert "Traceback" not in err


def test_missing_input_is_refused(tmp_path, capsys):
    assert _discover("--output", str(tmp_path / "out"), *TARGET) == 2
    line = _one_line_error(capsys)
    assert "--input" in line and "required" in line


@pytest.mark.parametrize("epsilon", ["0", "-1", "0.0"])
def test_epsilon_at_or_below_zero_is_refused(records, tmp_path, epsilon, capsys):
    code = _discover("--input", records, "--output", str(tmp_path / "out"), f"--epsilon={epsilon}",
                     "--delta", "1e-6", "--max-length", "4")
    assert code == 2
    assert "epsilon must be > 0" in _one_line_error(capsys)
    assert not (tmp_path / "out").exists()  # refused before any job ran


def _infeasible(few_records, tmp_path, seed_file, capsys):
    code = _discover("--input", few_records, "--output", str(tmp_path / "out"), *TARGET, "--seed-file", seed_file)
    out, err = capsys.readouterr()
    return code, out, err


def test_an_infeasible_target_is_refused_with_the_planners_reason(few_records, tmp_path, seed_file, capsys):
    code, out, err = _infeasible(few_records, tmp_path, seed_file, capsys)
    assert code == 2
    assert any(line.startswith("census: 50 users; ") for line in out.splitlines())  # then nothing else
    assert not [line for line in out.splitlines() if line.startswith(("plan:", "round"))]
    assert "Traceback" not in err
    lines = err.splitlines()
    reason = planner.plan(50, 4.0, 1e-6, 4).reason
    assert len(lines) == 1, err
    assert lines[0].startswith(f"triehh: error: privacy target infeasible: {reason}. Alternatives: ")
    assert not (tmp_path / "out.state" / "MANIFEST.json").exists()


def test_an_infeasible_target_is_refused_in_one_line(few_records, tmp_path, seed_file, capsys):
    code, _, err = _infeasible(few_records, tmp_path, seed_file, capsys)
    assert code == 2
    assert len(err.splitlines()) == 1, err


def test_a_pattern_that_matches_nothing_is_refused(tmp_path, capsys):
    pattern = str(tmp_path / "nothing-*.parquet")
    assert _discover("--input", pattern, "--output", str(tmp_path / "out"), *TARGET) == 2
    line = _one_line_error(capsys)
    assert line.startswith("triehh: error: ") and pattern in line


@pytest.mark.parametrize("seed", [b"too short", b"x" * 65, None], ids=["short", "long", "missing"])
def test_a_bad_seed_file_is_refused(records, tmp_path, seed, capsys):
    path = tmp_path / "seed.bin"
    if seed is not None:
        path.write_bytes(seed)
    code = _discover("--input", records, "--output", str(tmp_path / "out"), *TARGET, "--seed-file", str(path))
    assert code == 2
    line = _one_line_error(capsys)
    assert line.startswith("triehh: error: ") and str(path) in line
    if seed is not None:
        assert f"this one {len(seed)}" in line
    assert not (tmp_path / "out").exists()


def test_plan_still_refuses_unknown_flags(capsys):
    code = main(["plan", "--population", "100000", "--epsilon", "4", "--delta", "1e-10", "--max-length", "10",
                 "--direct_num_workers=1"])
    assert code == 2
    line = _one_line_error(capsys)
    assert "unrecognized arguments: --direct_num_workers=1" in line
    assert capsys.readouterr().out == ""


def test_a_corrupt_state_directory_is_refused_naming_the_manifest(records, tmp_path, capsys):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "MANIFEST.json").write_text("{not json")
    code = _discover("--input", records, "--output", str(tmp_path / "out"), *TARGET, "--state-dir", str(state_dir))
    assert code == 2
    assert str(state_dir / "MANIFEST.json") in _one_line_error(capsys)


def test_an_unreadable_file_is_refused_in_one_line_naming_it(records, tmp_path, seed_file, capsys):
    # With worker processes too: the census reports the file as a value, no traceback parsed.
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    code = _discover("--input", f"{records},{broken}", "--output", str(tmp_path / "out"),
                     *TARGET, "--seed-file", seed_file, "--direct_running_mode=multi_processing", "--direct_num_workers=1")
    assert code == 2
    line = _one_line_error(capsys)
    assert f"{broken}: cannot read it as parquet" in line
