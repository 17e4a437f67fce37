"""examples/schedule.py runs as a user would run it, and does what it says: two nights released
and charged to one shared ledger, the third refused before it reads a record, and the ledger
holding exactly the two charges."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = pathlib.Path(REPO_ROOT) / "examples" / "schedule.py"


@pytest.mark.slow
def test_two_nights_are_charged_and_the_third_is_refused(subprocess_env, tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], env=subprocess_env,
                            capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "exit codes of the three nights: [0, 0, 2]" in output

    # The first two nights published; the third published nothing and says why, in one line.
    words = {"the", "and", "you", "for", "was", "one", "all", "any", "had", "her", "his", "how"}
    for night in ("2026-11-01", "2026-11-02"):
        published = json.loads((tmp_path / "out" / night / "heavy_hitters.json").read_text())
        # Nothing outside the population can be published, whatever the draw.
        assert set(published["heavy_hitters"]) <= words
    assert not (tmp_path / "out" / "2026-11-03").exists()
    refusals = [line for line in output.splitlines() if line.startswith("triehh: error:")]
    assert len(refusals) == 1 and "exceeds the remaining lifetime budget" in refusals[0], output

    # The shared ledger: the two nights' charges, nothing for the third; the last spend line and
    # `triehh ledger` agree with it.
    records = [json.loads(line) for line in (tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()]
    assert len(records) == 2
    spent = sum(record["epsilon"] for record in records)
    assert 3.9 < spent <= 4.0  # two nights at a target of 2 each
    spends = [json.loads(line) for line in output.splitlines() if line.startswith('{"event": "scheduled_spend"')]
    assert [s["jobs"] for s in spends] == [1, 2, 2]
    assert spends[-1]["spent"]["epsilon"] == pytest.approx(spent)
    assert spends[-1]["remaining"]["epsilon"] == pytest.approx(5.0 - spent)
    assert ": 2 job(s)" in output and f"remaining of the budget:   epsilon {5.0 - spent:.6g}" in output
