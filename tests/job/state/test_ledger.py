"""The privacy ledger and lifetime budgets, `triehh ledger`, `triehh scheduled` and --dry-run."""

import json
import math
import multiprocessing
import os

import numpy as np
import pytest

from triehh_beam import cli
from triehh_beam.io.write import write_records
from triehh_beam.job.state import ledger
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.accounting.composition import basic_composition

WORDS = ["sun", "star", "moon", "sky", "sea"]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    rng = np.random.default_rng(5)
    words = rng.choice(WORDS, size=3000, p=[0.4, 0.25, 0.2, 0.1, 0.05])
    path = root / "records.jsonl"
    write_records(str(path), [(i, str(w), 1) for i, w in enumerate(words)])
    return str(path)


# ---- the ledger itself -------------------------------------------------------------------------


def test_the_ledger_composes_with_the_accountants_sum():
    # Ten spends of 0.1: basic_composition (what privacy.compose and the planners use) gives 1.0;
    # the old ledger summed left to right and gave 0.9999999999999999.
    tenths = [(0.1, 1e-9)] * 10
    assert ledger.Ledger.total({"epsilon": e, "delta": d} for e, d in tenths) == basic_composition(tenths)
    assert ledger.Ledger.total({"epsilon": e, "delta": d} for e, d in tenths).epsilon == 1.0
    no_guarantee = [{"epsilon": 1.0, "delta": 1e-9}, {"epsilon": None, "delta": None}]
    assert ledger.Ledger.total(no_guarantee) == (math.inf, math.inf)


def test_a_job_is_charged_once_and_spends_compose(tmp_path):
    book = ledger.Ledger(str(tmp_path), ledger.Budget(epsilon=5.0))
    book.charge("job-a", ledger.Spend(2.0, 1e-9), {"input": "x"})
    book.charge("job-a", ledger.Spend(2.0, 1e-9), {"input": "x"})  # a resume: no second charge
    book.charge("job-b", ledger.Spend(1.5, 2e-9), {"input": "x"})
    assert [r["record_id"] for r in book.records()] == ["job-a", "job-b"]
    assert book.spent() == pytest.approx((3.5, 3e-9))
    with pytest.raises(ledger.BudgetExceededError, match=r"epsilon 1\.5"):
        book.check(ledger.Spend(2.0, 0.0))
    book.check(ledger.Spend(2.0, 0.0), job_id="job-a")  # already charged: passes
    with pytest.raises(ledger.BudgetExceededError):
        book.charge("job-c", ledger.Spend(1.6, 0.0), {})
    assert len(book.records()) == 2


DAY = 86400 * 1_000_000


def test_a_period_budget_holds_for_every_period_a_release_touches(tmp_path):
    book = ledger.Ledger(str(tmp_path), ledger.Budget(epsilon=3.0, period=86400))
    hour = 3600 * 1_000_000
    for i in range(3):  # three 1-hour windows of day 0, one epsilon each
        book.charge(f"w{i}", ledger.Spend(1.0, 0.0), {}, interval=(i * hour, (i + 1) * hour))
    with pytest.raises(ledger.BudgetExceededError, match="budget per day for the day from 1970-01-01T00:00:00Z"):
        book.charge("w3", ledger.Spend(1.0, 0.0), {}, interval=(3 * hour, 4 * hour))
    book.charge("w24", ledger.Spend(1.0, 0.0), {}, interval=(DAY, DAY + hour))  # day 1 has room
    # A window across midnight counts in both days: day 0 is full.
    assert not book.fits(ledger.Spend(1.0, 0.0), (DAY - hour, DAY + hour))
    assert book.fits(ledger.Spend(2.0, 0.0), (DAY + hour, DAY + 2 * hour))
    assert book.spent_per_period(book.records()) == [(0, (3.0, 0.0)), (1, (1.0, 0.0))]
    assert book.spent() == (4.0, 0.0)  # the lifetime total is over the daily budget: it is no lifetime one


def test_a_record_without_an_interval_counts_in_every_period_and_a_batch_charge_in_its_own(tmp_path):
    book = ledger.Ledger(str(tmp_path), ledger.Budget(epsilon=3.0, period=86400))
    record_log = tmp_path / ledger.LEDGER_NAME
    record_log.write_text(json.dumps({"record_id": "old", "epsilon": 2.0, "delta": 0.0}) + "\n")
    assert not book.fits(ledger.Spend(1.5, 0.0), (5 * DAY, 5 * DAY + 1))
    book.charge("batch", ledger.Spend(1.0, 0.0), {})  # no interval: the instant of the charge
    (record,) = [r for r in book.records() if r["record_id"] == "batch"]
    assert record["interval_start_us"] == record["interval_end_us"]
    assert abs(record["interval_start_us"] / 1e6 - __import__("time").time()) < 60
    assert book.fits(ledger.Spend(1.0, 0.0), (5 * DAY, 5 * DAY + 1))  # another day: only "old" counts there


@pytest.mark.parametrize("budget, message", [
    (dict(period=86400), "--budget-period needs --budget-epsilon or --budget-delta"),
    (dict(epsilon=1.0, period=0), "--budget-period must be a duration of at least 1 s"),
])
def test_a_bad_period_budget_is_refused_in_one_line(budget, message):
    with pytest.raises(ValueError, match=message):
        ledger.Budget(**budget)


@pytest.mark.parametrize("protocol", ["triehh++", "sample-threshold"])
def test_a_sample_and_threshold_charge_records_its_accounting(tmp_path, protocol):
    book = ledger.Ledger(str(tmp_path), ledger.Budget(epsilon=10.0))
    common = dict(protocol=protocol, rule="sample-and-threshold", max_length=4, theta=20, alpha=0.2,
                  sample_probability=0.1, epsilon=1.0, delta=1e-8, round_epsilon=0.25, round_delta=2.5e-9)
    book.charge_plan("exact-job", state_pb2.PrivacyPlan(accounting="exact", **common), {"input": "x"})
    book.charge_plan("bound-job", state_pb2.PrivacyPlan(accounting="bound", **common), {"input": "x"})
    records = {r["record_id"]: r for r in book.records()}
    assert {k: r["accounting"] for k, r in records.items()} == {"exact-job": "exact", "bound-job": "bound"}
    assert all((r["epsilon"], r["delta"], r["tau"]) == (1.0, 1e-8, 20) for r in records.values())
    # TrieHH's plans have one certificate, Theorem 1: no accounting in their record.
    book.charge_plan("triehh-job", state_pb2.PrivacyPlan(protocol="triehh", rule="authors", max_length=4, theta=10,
                                                         batch_size=100,
                                                         epsilon=1.0, delta=1e-8), {"input": "x"})
    assert "accounting" not in book.records()[-1]


def test_a_job_without_guarantee_is_refused_under_a_budget_and_poisons_an_unlimited_ledger(tmp_path):
    with pytest.raises(ledger.BudgetExceededError, match="without a DP guarantee"):
        ledger.Ledger(str(tmp_path / "a"), ledger.Budget(delta=1e-6)).charge_unbounded("j", {})
    book = ledger.Ledger(str(tmp_path / "b"))
    book.charge_unbounded("j", {})
    assert math.isinf(book.spent().epsilon)


def _charge(args):
    location, job = args
    book = ledger.Ledger(location, ledger.Budget(epsilon=1.0))
    try:
        book.charge(job, ledger.Spend(0.4, 0.0), {})
        return True
    except ledger.BudgetExceededError:
        return False


@pytest.mark.slow
def test_racing_jobs_never_overspend_the_budget(tmp_path):
    # Eight processes race to charge 0.4 against a budget of 1.0: exactly two can win.
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        won = pool.map(_charge, [(str(tmp_path), f"job-{i}") for i in range(8)])
    assert sum(won) == 2
    records = ledger.Ledger(str(tmp_path)).records()
    assert len(records) == 2 and sum(r["epsilon"] for r in records) <= 1.0


# ---- through the command line ------------------------------------------------------------------


def _discover(records, out, *extra):
    return cli.main([
        "discover", "--protocol", "triehh", "--input", records, "--output", str(out), "--epsilon", "3", "--delta", "1e-6",
        "--max-length", "5", *extra,
    ])


@pytest.mark.slow
def test_budget_exhaustion_is_refused_before_reading_with_the_remaining_budget(records, tmp_path, capsys):
    shared = ["--ledger", str(tmp_path / "ledger"), "--budget-epsilon", "5"]
    assert _discover(records, tmp_path / "first", *shared) == 0
    capsys.readouterr()
    assert _discover(records, tmp_path / "second", *shared) == 2
    out, err = capsys.readouterr()
    assert "census" not in out  # refused before reading any record
    assert "exceeds the remaining lifetime budget" in err and "epsilon 2.0" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "second" / "heavy_hitters.json").exists()
    assert cli.main(["ledger", "--ledger", str(tmp_path / "ledger"), "--budget-epsilon", "5", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert len(shown["records"]) == 1
    assert shown["remaining"]["epsilon"] == pytest.approx(5 - shown["records"][0]["epsilon"])


def test_dry_run_plans_without_rounds_state_or_charge(records, tmp_path, capsys):
    assert _discover(records, tmp_path / "out", "--dry-run", "--log-format", "json") == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["event"] == "dry_run" and report["files"] == [records]
    assert report["plan"]["population"] == 3000 and report["fits_budget"]
    assert report["would_spend"]["epsilon"] <= 3
    state = tmp_path / "out.state"
    assert not (state / "MANIFEST.json").exists()
    assert not (state / "ledger.jsonl").exists()
    assert not (tmp_path / "out" / "heavy_hitters.json").exists()


def test_beams_own_dry_run_flag_is_refused_with_a_pointer(records, tmp_path, capsys):
    assert _discover(records, tmp_path / "out", "--dry_run=True") == 2
    assert "--dry-run" in capsys.readouterr().err


def test_a_concurrent_run_on_the_same_state_directory_is_refused(records, tmp_path, capsys):
    from triehh_beam.job.state import cas
    from triehh_beam.job.state.lease import Lease

    state = tmp_path / "out.state"
    held = Lease(cas.cas_store_for(str(state)), "LEASE").acquire(
        json.dumps({"host": "another-machine", "pid": 1}), 3600
    )
    assert held is not None
    assert _discover(records, tmp_path / "out") == 2
    assert "another run is working on this state directory" in capsys.readouterr().err


def test_a_lease_left_by_a_killed_run_of_this_machine_is_taken_over(records, tmp_path):
    import socket
    import subprocess
    import sys

    from triehh_beam.job.state import cas
    from triehh_beam.job.state.lease import Lease

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state = tmp_path / "out.state"
    Lease(cas.cas_store_for(str(state)), "LEASE").acquire(
        json.dumps({"host": socket.gethostname(), "pid": dead.pid}), 3600
    )
    assert _discover(records, tmp_path / "out") == 0


# ---- scheduled runs ----------------------------------------------------------------------------


def _three_scheduled_dates(records, tmp_path, budget_lines: str):
    """Runs a schedule (epsilon 3 a date) on three dates; returns (its config file, exit codes)."""
    config = tmp_path / "job.toml"
    config.write_text(
        f'[discovery]\ninput = "{records}"\noutput_root = "{tmp_path / "runs"}"\n'
        'epsilon = 3.0\ndelta = 1e-6\nmax_length = 5\n\n'
        f'[budget]\nledger = "{tmp_path / "ledger"}"\n{budget_lines}'
    )
    return config, [cli.main(["scheduled", "--config", str(config), "--date", d])
                    for d in ("2026-11-01", "2026-11-02", "2026-11-03")]


@pytest.mark.slow
def test_scheduled_runs_write_dated_outputs_and_stop_at_the_budget(records, tmp_path, capsys):
    config, codes = _three_scheduled_dates(records, tmp_path, "epsilon = 7.0\n")
    assert codes == [0, 0, 2]
    # The refused date wrote nothing to the published tree (its state is not in it either).
    assert sorted(os.listdir(tmp_path / "runs")) == ["2026-11-01", "2026-11-02"]
    assert {"2026-11-01", "2026-11-02"} <= set(os.listdir(tmp_path / "runs.state"))  # not in runs/
    assert (tmp_path / "runs" / "2026-11-02" / "heavy_hitters.json").exists()
    assert not (tmp_path / "runs" / "2026-11-03" / "heavy_hitters.json").exists()
    # Re-running a date resumes it: no second charge.
    assert cli.main(["scheduled", "--config", str(config), "--date", "2026-11-01"]) == 0
    assert len(ledger.Ledger(str(tmp_path / "ledger")).records()) == 2


def test_a_scheduled_budget_without_a_shared_ledger_is_refused_on_every_date(records, tmp_path, capsys):
    # The reproduction: without a ledger key each date had its own ledger in its own state
    # directory, and three runs of epsilon = 3 all ran against a budget of epsilon = 5.
    config = tmp_path / "job.toml"
    config.write_text(
        f'[discovery]\ninput = "{records}"\noutput_root = "{tmp_path / "runs"}"\n'
        'epsilon = 3.0\ndelta = 1e-6\nmax_length = 5\n\n[budget]\nepsilon = 5.0\n'
    )
    codes = [cli.main(["scheduled", "--config", str(config), "--date", d])
             for d in ("2026-11-01", "2026-11-02", "2026-11-03")]
    assert codes == [2, 2, 2]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all("needs the population's shared ledger" in line for line in err)
    assert all("[budget] ledger" in line and "Traceback" not in line for line in err)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("budget", [["--budget-epsilon", "5"], ["--budget-delta", "1e-5"]])
def test_a_budget_without_a_shared_ledger_is_refused_before_reading(records, tmp_path, capsys, budget):
    assert _discover(records, tmp_path / "out", *budget) == 2
    out, err = capsys.readouterr()
    assert "census" not in out
    assert len(err.strip().splitlines()) == 1 and "--ledger DIR" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "text, message",
    [
        ("[discovery]\ninput = 'x'\n", "needs 'output_root'"),
        ("not toml = = =", "not a valid config file"),
        ("[discovery]\ninput='x'\noutput_root='y'\nepsilon=1\ndelta=1e-6\nmax_length=5\nfoo=1\n", "unknown [discovery] key"),
        ("[elsewhere]\n", "a [discovery] section is required"),
    ],
)
def test_a_bad_config_is_refused_in_one_line(tmp_path, capsys, text, message):
    config = tmp_path / "job.toml"
    config.write_text(text)
    assert cli.main(["scheduled", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_resume_must_use_the_ledger_the_job_started_with(records, tmp_path, capsys):
    # Kill-free way to get a resumable job: a finished one is resumed (and re-published).
    assert _discover(records, tmp_path / "out", "--ledger", str(tmp_path / "ledger-a")) == 0
    capsys.readouterr()
    assert _discover(records, tmp_path / "out", "--ledger", str(tmp_path / "ledger-b")) == 2
    assert "privacy ledger" in capsys.readouterr().err
    assert not (tmp_path / "ledger-b" / "ledger.jsonl").exists()


def test_job_graphs_are_only_submitted_to_a_runner_that_runs_nothing(records, tmp_path):
    from apache_beam.options.pipeline_options import PipelineOptions

    from triehh_beam.job.batch.driver import DiscoveryConfig, submit_job_graphs

    config = DiscoveryConfig(records, str(tmp_path / "out"), 3.0, 1e-6, 5, protocol="triehh")
    with pytest.raises(ValueError, match="dry_run"):
        submit_job_graphs(config, PipelineOptions([]), population=3000)
    assert not (tmp_path / "out").exists()


def test_the_ledger_command_shows_the_spend_per_period(tmp_path, capsys):
    book = ledger.Ledger(str(tmp_path), ledger.Budget(epsilon=3.0, period=86400))
    for i, start in enumerate((0, 3600 * 1_000_000, DAY)):
        book.charge(f"w{i}", ledger.Spend(1.25, 1e-9), {"time": "t"}, interval=(start, start + 3600 * 1_000_000))
    assert cli.main(["ledger", "--ledger", str(tmp_path), "--budget-epsilon", "3", "--budget-period", "1d"]) == 0
    out = capsys.readouterr().out
    assert "spend per day (the budget's unit: a user per day):" in out
    assert "from 1970-01-01T00:00:00Z: epsilon 2.5, delta 2e-09; remaining epsilon 0.5, delta unlimited" in out
    assert "from 1970-01-02T00:00:00Z: epsilon 1.25, delta 1e-09; remaining epsilon 1.75, delta unlimited" in out
    assert cli.main(["ledger", "--ledger", str(tmp_path), "--budget-epsilon", "3", "--budget-period", "1d",
                     "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [p["period_start"] for p in document["per_period"]] == ["1970-01-01T00:00:00Z", "1970-01-02T00:00:00Z"]
    assert document["per_period"][0]["remaining"]["epsilon"] == pytest.approx(0.5)
    assert cli.main(["ledger", "--ledger", str(tmp_path), "--budget-period", "soon"]) == 2
    assert "not a duration" in capsys.readouterr().err


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_scheduled_runs_under_a_daily_budget_stop_at_the_days_budget(records, tmp_path, capsys):
    # Each run is charged at the instant it runs: all three dates run today, so today's period
    # holds two spends of about 2.9995 and refuses the third (a run on another day would fit).
    _, codes = _three_scheduled_dates(records, tmp_path, 'epsilon = 7.0\nperiod = "1d"\n')
    assert codes == [0, 0, 2]
    err = capsys.readouterr()
    assert "exceeds what is left of the budget per day for the day from" in err.err
    spends = [json.loads(line) for line in err.out.splitlines() if '"scheduled_spend"' in line]
    (today,) = spends[-1]["per_period"]
    assert spends[-1]["budget"]["period"] == "1d" and today["remaining"]["epsilon"] == pytest.approx(
        7.0 - today["spent"]["epsilon"]) and today["spent"]["epsilon"] > 5.9
    charges = ledger.Ledger(str(tmp_path / "ledger")).records()
    assert len(charges) == 2 and all(r["interval_start_us"] == r["interval_end_us"] for r in charges)
