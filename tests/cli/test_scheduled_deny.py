"""``triehh scheduled`` with ``deny_earlier_runs = true``: each run denies the union of the
heavy hitters that the schedule's earlier dates published (their dated output directories, in
date order), never its own date's nor a later one's."""

from __future__ import annotations

import json
import re

import pytest

from triehh_beam import cli
from triehh_beam.cli import scheduled
from triehh_beam.io.write import write_records
from triehh_beam.job.state.state_store import StateStore

from tests.published_releases import release_document

def _publish(root, date, items):
    (root / date).mkdir(parents=True)
    (root / date / "heavy_hitters.json").write_text(json.dumps(release_document(items)))


@pytest.fixture()
def schedule(tmp_path):
    records = tmp_path / "records.jsonl"
    words = ["to", "of", "in", "and"]
    write_records(str(records), [(f"u{i}", words[i % 4], 1) for i in range(3000)])
    root = tmp_path / "runs"
    _publish(root, "2026-03-02", ["of"])
    _publish(root, "2026-03-01", ["to"])
    _publish(root, "2026-03-05", ["in"])  # later than the run: skipped
    _publish(root, "latest", ["and"])  # not a date: skipped
    (root / "2026-02-28").mkdir()  # a date that published nothing: skipped
    seed = tmp_path / "seed.bin"
    seed.write_bytes(bytes(range(32)))
    config = tmp_path / "job.toml"
    config.write_text("\n".join([
        "[discovery]", f'input = "{records}"', f'output_root = "{root}"', "epsilon = 6.0", "delta = 1e-5",
        "max_length = 4", f'seed_file = "{seed}"', "deny_earlier_runs = true", ""]))
    return config, root


def test_each_run_denies_the_union_of_the_earlier_dates_in_date_order(schedule):
    config, root = schedule
    loaded = scheduled.load_config(str(config))
    run = scheduled.run_config(loaded, "2026-03-03")
    assert run.deny_list == (str(root / "2026-03-01" / "heavy_hitters.json"),
                             str(root / "2026-03-02" / "heavy_hitters.json"))
    assert {"".join(s[:-1]) for s in run.deny.sequences} == {"to", "of"}
    assert scheduled.run_config(loaded, "2026-03-01").deny_list == ()  # the first date: none
    assert len(scheduled.run_config(loaded, "2026-03-09").deny_list) == 3  # 03-05's too


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
def test_a_scheduled_run_applies_it(schedule, capsys):
    config, root = schedule
    assert cli.main(["scheduled", "--config", str(config), "--date", "2026-03-03"]) == 0
    published = json.loads((root / "2026-03-03" / "heavy_hitters.json").read_text())
    assert sorted(published["heavy_hitters"]) == ["and", "in"]  # to and of were denied
    assert published["deny_list"]["items"] == 2
    state = StateStore(str(root) + ".state/2026-03-03").load()
    assert list(state.deny_list.files) == [str(root / "2026-03-01" / "heavy_hitters.json"),
                                           str(root / "2026-03-02" / "heavy_hitters.json")]
    event = json.loads(capsys.readouterr().out.splitlines()[0])
    assert event["event"] == "scheduled_run" and len(event["deny_list"]) == 2


def test_the_key_must_be_a_switch(tmp_path, schedule):
    config, _ = schedule
    config.write_text(config.read_text().replace("deny_earlier_runs = true", 'deny_earlier_runs = "yes"'))
    with pytest.raises(scheduled.ConfigError, match="deny_earlier_runs must be true or false"):
        scheduled.load_config(str(config))


@pytest.mark.parametrize("extra, reason", [
    ('protocol = "sample-threshold"', "works with protocol triehh and triehh++, not sample-threshold"),
    ('window = "1h"', "not available with window yet"),
])
def test_a_schedule_that_could_not_apply_it_is_refused_before_its_first_date(schedule, extra, reason):
    """Its first date has no earlier result: without this check that date would run with an
    empty list and every later date fail."""
    config, _ = schedule
    config.write_text(config.read_text().replace("deny_earlier_runs = true", f"deny_earlier_runs = true\n{extra}"))
    with pytest.raises(scheduled.ConfigError, match=re.escape(reason)):
        scheduled.load_config(str(config))
    # Without the key the same file loads.
    config.write_text(config.read_text().replace("deny_earlier_runs = true\n", ""))
    scheduled.load_config(str(config))
