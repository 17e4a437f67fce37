"""A discovery under a tiny worker budget (``--worker-budget``): every bounded step has to spill
or split (the census in many spill files merged in steps, the candidates flushed in small row
groups, each round cut by rank buckets and groups of shards, each round's votes merged in groups
of prefixes), the operator report's ``largest_rows_held`` and ``largest_rows_held.<step>`` say no
step held more than the budget and which steps ran, and the trie is byte for byte the default
budget's for the same release, for TrieHH and TrieHH++. At 64 rows a round's sample (about 190
users) is past the budget too: its tables are voted one at a time and its votes merged in 12
groups of prefixes."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

from tests.one_pass_jobs import discovery_config, job_seed, word_rows
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import run_discovery
from triehh_beam.job.release.lifecycle import Release
from triehh_beam.job.state.state_store import StateStore


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
@pytest.mark.parametrize("protocol", ["triehh", "triehh++"])
def test_a_tiny_budget_gives_the_same_trie_and_no_step_holds_more(tmp_path, protocol):
    path = tmp_path / "records.parquet"
    write_records(str(path), word_rows(3000, np.random.default_rng(37)))
    output_dir = tmp_path / "out"
    tries, reports, release = {}, {}, None
    for budget in (1 << 22, 256, 64):
        shutil.rmtree(output_dir, ignore_errors=True)
        shutil.rmtree(f"{output_dir}.state", ignore_errors=True)
        config = discovery_config(path, output_dir, job_seed("budget"), protocol=protocol, worker_budget=budget)
        run_discovery(config, release=release)
        release = release or Release.of_state(StateStore(config.resolved_state_dir).load())
        tries[budget] = (output_dir / "trie.pb").read_bytes()
        reports[budget] = json.loads(pathlib.Path(config.resolved_state_dir, "operator_report.json").read_text())
    assert tries[256] == tries[64] == tries[1 << 22] and len(tries[256]) > 20
    for budget, report in reports.items():
        census, sampling = report["input"]["census_counters"], report["sampling"]["counters"]
        assert 0 < census["largest_rows_held"] <= budget
        assert 0 < sampling["largest_rows_held"] <= budget
        steps = {**_steps(census), **_steps(sampling)}
        outside = {step: held for step, held in steps.items() if not 0 < held <= budget}
        assert not outside, (budget, outside)
        # The first read's and the rounds' steps ran at every budget; the cut took one path.
        assert {"candidates", "census_spill", "census_merge", "vote", "prefix_merge"} <= set(steps)
        split_cut = {"cut_plan", "cut_buckets", "cut_count", "cut_shards"}
        if protocol == "triehh":  # a bottom-m to find (TrieHH++'s candidates are its sample)
            split_cut.add("cut_resolve")
        assert (split_cut <= set(steps)) == (budget < 1 << 22) and ("cut_whole" in steps) == (budget == 1 << 22)
    # Every round's sample is past 64 rows: those rounds were voted over workers.
    assert min(reports[64]["sampling"]["users_sampled_per_round"]) > 64
    # The default budget held a round's candidates whole; the tiny one held far fewer rows.
    assert reports[1 << 22]["sampling"]["counters"]["largest_rows_held"] > 256
    # A round's votes: one group holds all its prefixes under the default budget, more than a
    # group under the tiny one (merged in groups of about 190 / 12 users' votes).
    default_merge = _steps(reports[1 << 22]["sampling"]["counters"])["prefix_merge"]
    assert _steps(reports[64]["sampling"]["counters"])["prefix_merge"] < default_merge


def _steps(counters):
    """``{step: most rows it held}`` from a job's ``largest_rows_held.<step>`` counters."""
    return {name.split(".", 1)[1]: value for name, value in counters.items()
            if name.startswith("largest_rows_held.")}
