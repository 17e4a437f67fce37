"""A discovery under a tiny worker budget (``--worker-budget``): every bounded step has to spill
or split (the census in many spill files merged in steps, the candidates flushed in small row
groups, each round cut by rank buckets and groups of shards), the operator report's
``largest_rows_held`` says no step held more than the budget, and the trie is byte for byte the
default budget's for the same release, for TrieHH and TrieHH++. At 64 rows a round's sample
(about 190 users) is past the budget too, so the rounds are voted table by table over workers
and combined per prefix (``RunAllRounds`` from paths), not in order in one step."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

from tests.job.test_one_pass import WORDS, _config, _seed
from triehh_beam.io.write import write_records
from triehh_beam.job.driver import run_discovery
from triehh_beam.job.release import Release
from triehh_beam.job.state_store import StateStore


def _rows(users: int, rng: np.random.Generator):
    weights = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.1
    weights /= weights.sum()
    return [(f"u{user}", str(word), 1) for user in range(users)
            for word in rng.choice(WORDS, size=int(rng.integers(1, 3)), p=weights)]


@pytest.mark.parametrize("protocol", ["triehh", "triehh++"])
def test_a_tiny_budget_gives_the_same_trie_and_no_step_holds_more(tmp_path, protocol):
    path = tmp_path / "records.parquet"
    write_records(str(path), _rows(3000, np.random.default_rng(37)))
    output_dir = tmp_path / "out"
    tries, reports, release = {}, {}, None
    for budget in (1 << 22, 256, 64):
        shutil.rmtree(output_dir, ignore_errors=True)
        shutil.rmtree(f"{output_dir}.state", ignore_errors=True)
        config = _config(path, output_dir, _seed("budget"), protocol=protocol, worker_budget=budget)
        run_discovery(config, release=release)
        release = release or Release.of_state(StateStore(config.resolved_state_dir).load())
        tries[budget] = (output_dir / "trie.pb").read_bytes()
        reports[budget] = json.loads(pathlib.Path(config.resolved_state_dir, "operator_report.json").read_text())
    assert tries[256] == tries[64] == tries[1 << 22] and len(tries[256]) > 20
    for budget, report in reports.items():
        census, sampling = report["input"]["census_counters"], report["sampling"]["counters"]
        assert 0 < census["largest_rows_held"] <= budget
        assert 0 < sampling["largest_rows_held"] <= budget
    # Every round's sample is past 64 rows: those rounds were voted over workers.
    assert min(reports[64]["sampling"]["users_sampled_per_round"]) > 64
    # The default budget held a round's candidates whole; the tiny one held far fewer rows.
    assert reports[1 << 22]["sampling"]["counters"]["largest_rows_held"] > 256
