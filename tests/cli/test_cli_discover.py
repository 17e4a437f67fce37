"""``triehh discover`` through ``triehh_beam.cli.dispatch``: a run on a small fixture, the one-line
refusals with exit code 2, and Beam options passed through."""

import json
import re

import pytest

from triehh_beam.cli import main
from triehh_beam.protocol.planning import planner

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
    return main(["discover", "--protocol", "triehh", *flags])


def _one_line_error(capsys) -> str:
    """The stderr of a refused command: exactly one line, no traceback."""
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _counts_in(line: str, plan) -> list:
    """The exact private figures of the 2,000-user run that appear in ``line``."""
    figures = ["2,000", f"m={plan.batch_size}", f"sampled {plan.batch_size}", "votes ",
               f"{plan.epsilon:.4g}", "records from", "dropped"]
    return [figure for figure in figures if figure in line]


def test_discover_prints_progress_and_a_summary_without_a_private_count(records, tmp_path, seed_file, capsys):
    output = tmp_path / "out"
    # --direct_num_workers is a Beam option: unknown to our parser, passed through to Beam.
    code = _discover("--input", records, "--output", str(output), *TARGET, "--seed-file", seed_file,
                     "--direct_num_workers=1")
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"census: counting distinct users in {records}, and keeping every round's candidates in the same read"
    assert lines[1] == "census: done"  # its duration depends on the records: only with --verbose (issue 38)
    assert not [line for line in lines if re.search(r"\b[0-9]+\.[0-9] s\b", line)]  # no duration at all
    plan = planner.plan(2000, 4.0, 1e-6, 4)
    assert f"plan: theta={plan.theta} L=4 rule=authors: target epsilon=4 delta=1e-06" in lines
    rounds = [line for line in lines if line.startswith("round ")]
    assert rounds and rounds[0].startswith("round 1/4: frontier 1, kept ")
    document = json.loads((output / "heavy_hitters.json").read_text(encoding="utf-8"))
    summary = next(i for i, line in enumerate(lines) if line.startswith("discovered "))
    assert lines[summary].startswith(f"discovered {len(document['heavy_hitters'])} heavy hitters in "
                                     f"{document['rounds_run']} rounds ({document['stop_reason']})")
    assert document["heavy_hitters"]
    # Listed in the order `triehh show` documents: round found (length + 1), then ignoring case.
    listed = lines[summary + 1:summary + 1 + len(document["heavy_hitters"])]
    assert listed == [f"  {item}" for item in
                      sorted(document["heavy_hitters"], key=lambda w: (len(w) + 1, w.casefold(), w))]
    assert f"privacy: within the target (4, 1e-06)-DP, user level, for all 4 rounds; theta={plan.theta}" in lines
    assert lines[-3] == f"results (publishable): {output / 'heavy_hitters.json'}"
    assert lines[-2] == f"operator report (private, every count; never publish): " \
                        f"{output}.state/operator_report.json"
    assert lines[-1] == f"see the result as tables and a tree: triehh show {output}"
    assert (output / "trie.pb").is_file()
    assert "Traceback" not in err
    # No exact count of the population (users, records, votes, m, the achieved epsilon).
    assert [(line, _counts_in(line, plan)) for line in lines if _counts_in(line, plan)] == []


def test_verbose_progress_shows_the_exact_counts_marked_private(records, tmp_path, seed_file, capsys):
    output = tmp_path / "out"
    code = _discover("--input", records, "--output", str(output), *TARGET, "--seed-file", seed_file,
                     "--verbose")
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    plan = planner.plan(2000, 4.0, 1e-6, 4)
    census = next(line for line in lines if line.startswith("census: done"))
    assert re.fullmatch(r"census: done \[private: [0-9.]+ s; 2,000 users; read 2,000 records from 1 file; "
                        r"none dropped\]", census), census
    assert f"[private: n=2,000 theta={plan.theta} m={plan.batch_size} L=4 rule=authors: " \
           f"epsilon={plan.epsilon:.4g} delta={plan.delta:.3g}]" in next(l for l in lines if l.startswith("plan: "))
    rounds = [line for line in lines if line.startswith("round ")]
    assert f"[private: users sampled {plan.batch_size}, votes " in rounds[0]
    # Every line that holds a private figure says so.
    assert [line for line in lines if _counts_in(line, plan) and "private" not in line] == []


def test_missing_input_is_refused(tmp_path, capsys):
    assert _discover("--output", str(tmp_path / "out"), *TARGET) == 2
    line = _one_line_error(capsys)
    assert "--input" in line and "required" in line


@pytest.mark.parametrize("epsilon", ["0", "-1", "0.0"])
def test_epsilon_at_or_below_zero_is_refused(records, tmp_path, epsilon, capsys):
    code = _discover("--input", records, "--output", str(tmp_path / "out"), f"--epsilon={epsilon}",
                     "--delta", "1e-6", "--max-length", "4")
    assert code == 2
    assert _one_line_error(capsys) == f"triehh: error: --epsilon must be > 0, got {float(epsilon)}"
    assert not (tmp_path / "out").exists()  # refused before any job ran


@pytest.mark.parametrize("flags, message", [
    (["--delta", "2"], "--delta must be in (0, 1), got 2.0"),
    (["--theta", "5"], "--theta and --batch-size override the planner together: give both or neither"),
    (["--theta", "0", "--batch-size", "3"], "--theta and --batch-size must be >= 1"),
    (["--population", "0"], "--population must be >= 1, got 0"),
    (["--max-bad-fraction", "1.5"], "--max-bad-fraction must be in [0, 1], got 1.5"),
    (["--lease-seconds", "0"], "--lease-seconds must be > 0, got 0.0"),
    (["--ledger", "l", "--budget-epsilon", "-1"], "--budget-epsilon must be a positive number, got -1.0"),
    (["--ledger", "l", "--budget-delta", "1"], "--budget-delta must be in (0, 1), got 1.0"),
])
def test_a_bad_value_is_refused_naming_the_flag_as_typed(records, tmp_path, flags, message, capsys):
    code = _discover("--input", records, "--output", str(tmp_path / "out"), *TARGET, *flags)
    assert code == 2
    assert _one_line_error(capsys) == f"triehh: error: {message}"
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.state").exists()


def _infeasible(few_records, tmp_path, seed_file, capsys):
    code = _discover("--input", few_records, "--output", str(tmp_path / "out"), *TARGET, "--seed-file", seed_file)
    out, err = capsys.readouterr()
    return code, out, err


def test_an_infeasible_target_is_refused_with_the_planners_reason(few_records, tmp_path, seed_file, capsys):
    code, out, err = _infeasible(few_records, tmp_path, seed_file, capsys)
    assert code == 2
    assert any(line.startswith("census: done") for line in out.splitlines())  # then nothing else
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


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["run", "dry-run"])
@pytest.mark.parametrize(
    "fixed, over",
    [
        (["--theta", "10", "--batch-size", "180"], "epsilon = 9.21034 > 4"),
        (["--theta", "10", "--batch-size", "126", "--delta", "1e-9"], "delta = 3.149e-07 > 1e-09"),
    ],
    ids=["epsilon", "delta"],
)
def test_fixed_theta_and_batch_size_over_the_target_are_refused_before_any_round(
    records, tmp_path, fixed, over, dry_run, capsys
):
    # Theorem 1 applies (gamma <= sqrt(n)/(theta+1)) but gives more than the target: the job
    # used to record and charge the larger spend, noticed only in the ledger.
    code = _discover("--input", records, "--output", str(tmp_path / "out"), *TARGET, *fixed, *dry_run)
    assert code == 2
    line = _one_line_error(capsys)
    assert f"fixed theta = 10 and m = {fixed[3]} exceed the target: Theorem 1 gives {over}" in line
    if over.startswith("delta"):  # the target itself: theta = 13, m = 97 fail the crowding guard at n = 2000
        assert "for n = 2000, L = 4; and the target itself: " in line and "crowding guard fails" in line
    else:
        assert "for n = 2000, L = 4; the planner meets the target with theta = " in line
    assert not (tmp_path / "out" / "state" / "MANIFEST.json").exists()
    assert not (tmp_path / "out" / "state" / "ledger.jsonl").exists()
    assert not (tmp_path / "out" / "state" / "rounds").exists()


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


@pytest.mark.parametrize(
    "flags, named, hint",
    [
        (["--ledger-dir", "private/ledger"], "unknown argument --ledger-dir", "did you mean --ledger?"),
        (["--budget_epsilon=5"], "unknown argument --budget_epsilon", "did you mean --budget-epsilon?"),
        (["--max-lenght", "4"], "unknown argument --max-lenght", "did you mean --max-length?"),
        (["--runner=DirectRunner", "--no_such_beam_flag=1"], "unknown argument --no_such_beam_flag", ""),
        # Closer to Beam's --runner than to triehh's --rule, which it used to suggest.
        (["--runer=DataflowRunner"], "unknown argument --runer", "did you mean --runner, a Beam pipeline option?"),
    ],
    ids=["typo-ledger", "beam-spelling-of-a-setting", "typo-setting", "after-a-beam-flag", "typo-beam-flag"],
)
def test_an_argument_neither_triehh_nor_beam_defines_is_refused(records, tmp_path, flags, named, hint, capsys):
    # Beam used to drop these with a warning and the job ran without them (here: its budget).
    code = _discover("--input", records, "--output", str(tmp_path / "out"), *TARGET, *flags)
    assert code == 2
    line = _one_line_error(capsys)
    assert named in line and hint in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option, named", [
    ("--ledger_dir=x", "unknown argument --ledger_dir"),
    # Beam's options are candidates beside triehh's settings: --runer is Beam's --runner.
    ("--runer=DirectRunner", "unknown argument --runer: neither triehh nor Beam's pipeline options define it "
                             "(did you mean --runner, a Beam pipeline option?)"),
], ids=["a-setting-as-a-beam-option", "a-mistyped-beam-option"])
def test_scheduled_refuses_an_unknown_beam_option_in_its_config(records, tmp_path, option, named, capsys):
    config = tmp_path / "job.toml"
    config.write_text(
        f'[discovery]\ninput = "{records}"\noutput_root = "{tmp_path / "runs"}"\nepsilon = 4\n'
        f'delta = 1e-6\nmax_length = 4\n\n[beam]\noptions = ["--direct_num_workers=1", "{option}"]\n')
    assert main(["scheduled", "--config", str(config), "--date", "2026-01-02"]) == 2
    assert named in _one_line_error(capsys)
    assert not (tmp_path / "runs" / "2026-01-02" / "heavy_hitters.json").exists()


def test_plan_still_refuses_unknown_flags(capsys):
    code = main(["plan", "--protocol", "triehh", "--population", "100000", "--epsilon", "4", "--delta", "1e-10", "--max-length", "10",
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


def test_a_round_that_keeps_one_prefix_says_prefix(tmp_path, seed_file, capsys):
    # 2,000 users who all hold "ab": each round keeps exactly one prefix (a, ab, then ab's end).
    records = tmp_path / "same.jsonl"
    records.write_text("".join(f'{{"user_id": {u}, "item": "ab"}}\n' for u in range(2000)), encoding="utf-8")
    assert _discover("--input", str(records), "--output", str(tmp_path / "out"), *TARGET,
                     "--seed-file", seed_file) == 0
    rounds = [line for line in capsys.readouterr().out.splitlines() if line.startswith("round ")]
    # Every round ran in the job that drew the samples (the default): the lines claim no time.
    assert rounds == ["round 1/4: frontier 1, kept 1 prefix (run in the samples' job)",
                      "round 2/4: frontier 1, kept 1 prefix (run in the samples' job)",
                      "round 3/4: frontier 1, kept 1 prefix (run in the samples' job)"]
