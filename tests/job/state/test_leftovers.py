"""Issue 15, item 10 (the driver's part): ``--dry-run`` and refused runs leave nothing behind.
A run refused before it committed a job (an infeasible target, too many bad rows, users without
a usable item, a budget that does not fit) removes the state directory it created, lease and
scratch files included; a dry run removes the directories its census wrote to; what was there
before stays (an empty state directory made by hand, a dead-letter file asked for); and a run
whose lease another run took meanwhile removes nothing (``StateLease.discard``).
"""

import hashlib
import json
import pathlib

import pytest

from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import (BadInputError, ConfigMismatchError, DiscoveryConfig,
                                          InfeasiblePlanError, UnusableItemsError, run_discovery)
from triehh_beam.job.batch.dry_run import dry_run
from triehh_beam.job.state.lease import LEASE_NAME, StateLease
from triehh_beam.job.state.ledger import BudgetExceededError, Ledger, Spend

SEED = hashlib.sha256(b"triehh-beam leftovers tests").digest()  # public: tests only


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("leftovers")
    words = root / "words.jsonl"
    write_records(str(words), [(f"u{i}", f"w{i % 40}") for i in range(3000)])
    urls = root / "urls.jsonl"
    write_records(str(urls), [(f"u{i}", f"https://example.com/{i % 40}") for i in range(3000)])
    bad = root / "bad.jsonl"
    write_records(str(bad), [(f"u{i}", f"w{i % 40}", -1 if i % 3 == 0 else 1) for i in range(3000)])
    return {"words": words, "urls": urls, "bad": bad}


def _config(pattern, output, **overrides) -> DiscoveryConfig:
    fields = dict(epsilon=4.0, delta=1e-6, max_length=6, seed=SEED)
    fields.update(overrides)
    return DiscoveryConfig(input_pattern=str(pattern), output_dir=str(output), **{"protocol": "triehh", **fields})


def _tree(root: pathlib.Path) -> list:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("case, error", [
    ("infeasible", InfeasiblePlanError),
    ("unusable", UnusableItemsError),
    ("bad", BadInputError),
])
def test_a_refused_run_leaves_nothing_behind(records, tmp_path, case, error):
    workdir = tmp_path / "work"
    workdir.mkdir()
    pattern = {"infeasible": records["words"], "unusable": records["urls"], "bad": records["bad"]}[case]
    epsilon = 0.1 if case == "infeasible" else 4.0
    with pytest.raises(error):
        run_discovery(_config(pattern, workdir / "out", epsilon=epsilon))
    assert _tree(workdir) == []


def test_a_dry_run_leaves_nothing_behind_and_plans_the_same(records, tmp_path):
    report = dry_run(_config(records["words"], tmp_path / "out"))
    assert report["fits_budget"] and report["plan"]["theta"] >= 4
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.state").exists()
    # And a refused dry run neither.
    with pytest.raises(UnusableItemsError):
        dry_run(_config(records["urls"], tmp_path / "out"))
    assert _tree(tmp_path) == []


def test_what_was_there_before_stays(records, tmp_path):
    state_dir = tmp_path / "private" / "state"
    state_dir.mkdir(parents=True)
    (state_dir / "NOTES.txt").write_text("the operator's own file\n")
    dead_letter = state_dir / "rejected.jsonl"
    with pytest.raises(BadInputError):
        run_discovery(_config(records["bad"], tmp_path / "out", state_dir=str(state_dir),
                              dead_letter=str(dead_letter)))
    # The dead letters asked for stay (the rows the refusal is about); nothing else was added.
    assert _tree(state_dir) == ["NOTES.txt", "rejected.jsonl"]
    assert sum(1 for _ in dead_letter.open()) == 1000
    with pytest.raises(UnusableItemsError):
        dry_run(_config(records["urls"], tmp_path / "out", state_dir=str(state_dir)))
    assert _tree(state_dir) == ["NOTES.txt", "rejected.jsonl"]


def test_a_budget_refusal_leaves_the_shared_ledger_as_it_was(records, tmp_path):
    ledger_dir = tmp_path / "ledger"
    Ledger(str(ledger_dir)).charge("earlier-job", Spend(9.0, 1e-7), {"input": "elsewhere"})
    before = (ledger_dir / "ledger.jsonl").read_bytes()
    with pytest.raises(BudgetExceededError):
        run_discovery(_config(records["words"], tmp_path / "out", ledger_dir=str(ledger_dir), budget_epsilon=10.0))
    assert not (tmp_path / "out.state").exists() and not (tmp_path / "out").exists()
    assert (ledger_dir / "ledger.jsonl").read_bytes() == before


def test_a_committed_job_keeps_its_state_when_a_later_run_is_refused(records, tmp_path):
    output = tmp_path / "out"
    run_discovery(_config(records["words"], output))
    tree = _tree(tmp_path)
    with pytest.raises(ConfigMismatchError):
        run_discovery(_config(records["words"], output, epsilon=2.0))
    after = _tree(tmp_path)
    assert [p for p in after if "LEASE" not in p and ".cas" not in p] == \
        [p for p in tree if "LEASE" not in p and ".cas" not in p]
    assert "rounds_run" in json.loads((output / "heavy_hitters.json").read_text())


def test_a_lease_taken_by_another_run_is_not_discarded(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    alone = StateLease(str(state_dir), 60.0)
    with alone:
        pass
    assert alone.discard() is True  # still its own released lease, and there was none before
    assert not (state_dir / LEASE_NAME).exists()
    first = StateLease(str(state_dir), 60.0)
    with first:
        pass
    second = StateLease(str(state_dir), 60.0)
    with second:
        # The first run's lease was taken over: it must not delete anything of the second's.
        assert first.discard() is False
        assert (state_dir / LEASE_NAME).exists()
    # The second's own, released: but a lease object was there before it, so it stays.
    assert second.discard() is True
    assert (state_dir / LEASE_NAME).exists()
