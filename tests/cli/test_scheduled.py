"""``triehh scheduled``: its private locations (state, ledger, Beam's temp and staging files) are
never under the published output_root, in its help's example or in a config it loads; and after
every run it totals what the schedule has spent, with a budget or without one."""

from __future__ import annotations

import json
import textwrap
import tomllib

import pytest

from triehh_beam import cli
from triehh_beam.cli import scheduled
from triehh_beam.io.write import write_records
from triehh_beam.job.state import ledger


def _bucket(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[0]


def test_the_help_example_keeps_the_private_locations_out_of_the_output_bucket(tmp_path, capsys):
    assert cli.main(["scheduled", "--help"]) == 0
    assert "private-bucket/triehh/ledgers" in capsys.readouterr().out
    example = tomllib.loads(textwrap.dedent(scheduled.CONFIG_EXAMPLE))
    public = _bucket(example["discovery"]["output_root"])
    temp = [o.split("=", 1)[1] for o in example["beam"]["options"] if o.startswith("--temp_location=")]
    private = [example["discovery"]["state_dir"], example["budget"]["ledger"], *temp]
    assert len(private) == 3 and all(_bucket(where) != public for where in private), private
    assert _bucket(example["discovery"]["input"]) != public  # raw records are not published either
    path = tmp_path / "example.toml"
    path.write_text(textwrap.dedent(scheduled.CONFIG_EXAMPLE))
    loaded = scheduled.load_config(str(path))  # the example itself loads, as written
    assert (loaded["discovery"]["output_root"], loaded["discovery"]["state_dir"], loaded["budget"]["ledger"]) == (
        example["discovery"]["output_root"], example["discovery"]["state_dir"], example["budget"]["ledger"])


BASE = ('[discovery]\ninput = "records.jsonl"\noutput_root = "{root}"\nepsilon = 4.0\ndelta = 1e-6\n'
        'max_length = 4\n')


@pytest.mark.parametrize("root, extra, refused", [
    ("gs://public/words", 'state_dir = "gs://public/words/private"\n', "[discovery] state_dir"),
    ("runs", 'state_dir = "runs/state-{date}"\n', "[discovery] state_dir"),
    ("gs://public/words", 'state_dir = "gs://private/words"\n[budget]\nledger = "gs://public/words/ledger"\n',
     "[budget] ledger"),
    ("runs", '[budget]\nledger = "./runs"\nepsilon = 10.0\n', "[budget] ledger"),
    ("gs://public/words", 'state_dir = "gs://private/words"\n[beam]\noptions = ["--temp_location=gs://public/words/tmp"]\n',
     "[beam] --temp_location"),
    ("gs://public/words", 'state_dir = "gs://private/words"\n[beam]\noptions = ["--staging_location", "gs://public/words/s"]\n',
     "[beam] --staging_location"),
])
def test_a_private_location_inside_the_output_is_refused_when_loaded(tmp_path, capsys, monkeypatch, root, extra,
                                                                      refused):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "job.toml"
    path.write_text(BASE.format(root=root) + extra)
    with pytest.raises(scheduled.ConfigError, match="is inside output_root") as error:
        scheduled.load_config(str(path))
    assert str(path) in str(error.value) and refused in str(error.value)
    assert cli.main(["scheduled", "--config", str(path), "--date", "2026-03-01", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is inside output_root" in err
    assert not (tmp_path / "runs").exists()


def test_private_locations_beside_the_output_load(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(BASE.format(root="gs://public/words") + 'state_dir = "gs://private/words"\n'
                    '[budget]\nledger = "gs://private/ledger"\n[beam]\noptions = ["--temp_location=gs://private/tmp"]\n')
    loaded = scheduled.load_config(str(path))
    assert (loaded["discovery"]["state_dir"], loaded["budget"]["ledger"], loaded["beam"]["options"]) == (
        "gs://private/words", "gs://private/ledger", ["--temp_location=gs://private/tmp"])
    path.write_text(BASE.format(root="runs") + 'state_dir = "runs-private"\n')  # a sibling, not inside
    loaded = scheduled.load_config(str(path))
    assert (loaded["discovery"]["output_root"], loaded["discovery"]["state_dir"]) == ("runs", "runs-private")


def _spend_events(out: str):
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"event": "scheduled_spend"')]


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_schedule_without_a_budget_totals_its_spend_after_each_date(tmp_path, capsys):
    records = tmp_path / "records.jsonl"
    write_records(str(records), [(f"u{i}", ["to", "of", "in"][i % 3], 1) for i in range(1500)])
    config = tmp_path / "job.toml"
    config.write_text(f'[discovery]\ninput = "{records}"\noutput_root = "{tmp_path / "runs"}"\n'
                      'epsilon = 4.0\ndelta = 1e-6\nmax_length = 3\n')
    totals = []
    for date in ("2026-03-01", "2026-03-02", "2026-03-02"):  # the re-run resumes: no new charge
        assert cli.main(["scheduled", "--config", str(config), "--date", date]) == 0
        events = _spend_events(capsys.readouterr().out)
        assert len(events) == 1, events
        totals.append(events[0])
    per_date = [ledger.Ledger(str(tmp_path / "runs.state" / d)).spent() for d in ("2026-03-01", "2026-03-02")]
    # The second run of 2026-03-02 resumed its release: one charge a date, and the total did not grow.
    dates = ("2026-03-01", "2026-03-02")
    assert [len(ledger.Ledger(str(tmp_path / "runs.state" / d)).records()) for d in dates] == [1, 1]
    assert totals[2]["spent"] == totals[1]["spent"]
    assert [t["jobs"] for t in totals] == [1, 2, 2]
    assert totals[0]["spent"]["epsilon"] == pytest.approx(per_date[0].epsilon)
    assert totals[2]["spent"]["epsilon"] == pytest.approx(per_date[0].epsilon + per_date[1].epsilon)
    assert totals[2]["spent"]["delta"] == pytest.approx(per_date[0].delta + per_date[1].delta)
    assert totals[2]["ledgers"] == [str(tmp_path / "runs.state" / d) for d in ("2026-03-01", "2026-03-02")]
    assert all(t["budget"] is None and "no lifetime budget" in t["note"] for t in totals)
    # With a budget (and its shared ledger): the total and what is left of it.
    config.write_text(config.read_text() + f'\n[budget]\nledger = "{tmp_path / "ledger"}"\nepsilon = 10.0\n')
    assert cli.main(["scheduled", "--config", str(config), "--date", "2026-03-03"]) == 0
    event, = _spend_events(capsys.readouterr().out)
    assert event["jobs"] == 1 and event["ledgers"] == [str(tmp_path / "ledger")]
    assert event["budget"] == {"epsilon": 10.0, "delta": None}
    assert event["remaining"]["epsilon"] == pytest.approx(10.0 - event["spent"]["epsilon"])
    assert "note" not in event
