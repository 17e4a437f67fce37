"""Deny lists across runs (``--deny-list``) in the pipeline (in-process runner): with an earlier
run's ``heavy_hitters.json`` the trie equals the keyed simulation given the same deny set, for
TrieHH and TrieHH++; the samples are exactly those drawn without the list (the sampled users'
items, row for row); a population holding only the denied item keeps nothing; the list is
recorded (state, published result, operator report) and a resume with another list is
refused."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import ConfigMismatchError, DiscoveryConfig, run_discovery
from triehh_beam.job.release.lifecycle import NONCE_BYTES, Release
from triehh_beam.job.settings import deny_lists
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.reference.simulation import simulate, simulate_sample_threshold

from tests.published_releases import release_document
from tests.one_pass_jobs import population as one_pass_population


def _seed(label: str) -> bytes:
    return hashlib.sha256(b"triehh-beam deny-list tests: " + label.encode()).digest()


@pytest.fixture(scope="module")
def many_items(tmp_path_factory):
    rows, users, _ = one_pass_population("many_items", np.random.default_rng(14))
    path = tmp_path_factory.mktemp("deny") / "records.parquet"
    write_records(str(path), rows)
    return path, users


def _config(path, output_dir, label, **fields) -> DiscoveryConfig:
    values = dict(epsilon=6.0, delta=1e-5, max_length=6)
    values.update(fields)
    return DiscoveryConfig(input_pattern=str(path), output_dir=str(output_dir), seed=_seed(label), **{"protocol": "triehh", **values})


def _clear(output_dir) -> None:
    shutil.rmtree(output_dir, ignore_errors=True)
    shutil.rmtree(f"{output_dir}.state", ignore_errors=True)


def _sample_rows(state_dir, state):
    """Every round's kept sample as sorted rows (choice, sequences, counts)."""
    from triehh_beam.job.batch import levels

    directory = levels.samples_dir(str(state_dir), state.job_id)
    rows = {}
    for r in range(1, state.plan.max_length + 1):
        parts = sorted((p for p in (state_dir / "samples").rglob(f"round-{r:04d}/part-*.parquet")
                        if str(p).startswith(directory)))
        table = [pq.read_table(p).to_pylist() for p in parts]
        rows[r] = sorted((row["choice"], tuple(row["sequences"]), tuple(row["counts"]))
                         for part in table for row in part)
    return rows


@pytest.mark.slow  # over 5 s: kept out of the fast tier (CONTRIBUTING.md, the tiers)
@pytest.mark.parametrize("protocol", ["triehh", "triehh++"])
def test_pipeline_equals_the_keyed_simulation_and_the_samples_do_not_move(many_items, protocol, tmp_path):
    path, users = many_items
    output_dir = tmp_path / "out"  # one path for both runs: the job identity keys the samples
    # TrieHH's rounds one job each (--rounds-per-job 1), TrieHH++'s in the sampling pass's job (the
    # default): each builder's deny handling held to the simulation, at 2 Beam jobs a run instead of 8.
    fields = dict(keep_samples=True, protocol=protocol, rounds_per_job="1" if protocol == "triehh" else "all")
    if protocol == "triehh++":
        fields.update(epsilon=6.0, delta=1e-3)
    plain = _config(path, output_dir, protocol, **fields)
    # One release's keys for both runs (``run_discovery``'s ``release``: to compare with it, never
    # to publish beside it), so that the samples are the same and only the list differs.
    identity = b"triehh-beam deny-list test identity: " + protocol.encode()
    keys = Release(_seed(protocol), identity, hashlib.sha256(b"nonce: " + identity).digest()[:NONCE_BYTES])
    run_discovery(plain, release=keys)
    earlier = tmp_path / "earlier_heavy_hitters.json"
    shutil.copy(output_dir / "heavy_hitters.json", earlier)
    first = json.loads(earlier.read_text())["heavy_hitters"]
    assert len(first) >= 2, "the first run must discover something to deny"
    state_plain = StateStore(plain.resolved_state_dir).load()
    samples_plain = _sample_rows(tmp_path / "out.state", state_plain)

    _clear(output_dir)
    denying = dataclasses.replace(plain, deny_list=(str(earlier),))
    assert denying.sampling_identity() == plain.sampling_identity()  # the list keys no sample
    run_discovery(denying, release=keys)
    state = StateStore(denying.resolved_state_dir).load()
    assert _sample_rows(tmp_path / "out.state", state) == samples_plain  # row for row
    assert list(state.samples.users_sampled) == list(state_plain.samples.users_sampled)

    denied = denying.deny.sequences
    assert len(denied) == len(first)
    assert state.sampling_identity.encode() == identity
    if protocol == "triehh":
        simulated = simulate(users, denying.encoder, state.plan.theta, state.plan.batch_size, _seed(protocol),
                             identity=keys.keyed_identity, denied=denied)
        without = simulate(users, denying.encoder, state.plan.theta, state.plan.batch_size, _seed(protocol),
                           identity=keys.keyed_identity)
    else:
        simulated = simulate_sample_threshold(users, denying.encoder, state.plan.theta,
                                              state.plan.sample_probability, _seed(protocol),
                                              identity=keys.keyed_identity, denied=denied)
        without = simulate_sample_threshold(users, denying.encoder, state.plan.theta,
                                            state.plan.sample_probability, _seed(protocol), identity=keys.keyed_identity)
    trie = Trie.from_bytes((output_dir / "trie.pb").read_bytes())
    assert trie.levels == simulated.levels
    assert trie.levels != without.levels  # the list changed the result
    assert [r.counters["users_sampled"] for r in state.rounds] == [s.users_sampled for s in simulated.round_stats]
    assert [s.users_sampled for s in simulated.round_stats] == [
        s.users_sampled for s in without.round_stats][:len(simulated.round_stats)]
    assert [r.counters["votes_cast"] for r in state.rounds] == [s.votes_cast for s in simulated.round_stats]
    assert not set(trie.heavy_hitters()) & set(first)
    # Recorded: the state (identity), the published result (count and items digest), the report.
    assert state.deny_list.items == len(first) and list(state.deny_list.files) == [str(earlier)]
    published = json.loads((output_dir / "heavy_hitters.json").read_text())
    assert published["deny_list"]["items"] == len(first)
    assert published["deny_list"]["items_digest"] == deny_lists.sequences_digest(denied, denying.encoder)
    assert str(earlier) not in (output_dir / "heavy_hitters.json").read_text()  # operator paths stay private
    report = json.loads((tmp_path / "out.state" / "operator_report.json").read_text())
    assert report["deny_list"]["files"] == [str(earlier)]


def test_users_holding_only_the_denied_item_all_abstain(tmp_path):
    path = tmp_path / "records.jsonl"
    write_records(str(path), [(f"u{i}", "to", 1) for i in range(2000)])
    run_discovery(_config(path, tmp_path / "first", "abstain", max_length=4))
    first = json.loads((tmp_path / "first" / "heavy_hitters.json").read_text())
    assert first["heavy_hitters"] == ["to"]
    config = _config(path, tmp_path / "second", "abstain", max_length=4,
                     deny_list=(str(tmp_path / "first" / "heavy_hitters.json"),))
    result = run_discovery(config)
    assert result.heavy_hitters == [] and result.frequent_prefixes == []
    state = StateStore(config.resolved_state_dir).load()
    assert [r.counters.get("votes_cast", 0) for r in state.rounds] == [0]
    assert state.rounds[0].counters["users_only_denied_items"] == state.rounds[0].counters["users_sampled"] > 0


def test_a_resume_with_another_deny_list_is_refused(tmp_path):
    path = tmp_path / "records.jsonl"
    write_records(str(path), [(f"u{i}", w, 1) for i, w in enumerate(["to", "of", "in"] * 700)])
    lists = {}
    for name, items in (("one", ["to"]), ("two", ["to", "of"])):
        lists[name] = tmp_path / f"{name}.json"
        lists[name].write_text(json.dumps(release_document(items)))
    config = _config(path, tmp_path / "out", "resume", max_length=3, deny_list=(str(lists["one"]),))
    assert run_discovery(config).heavy_hitters == ["in", "of"]
    again = dataclasses.replace(config, deny_list=(str(lists["one"]),))
    assert run_discovery(again).heavy_hitters == ["in", "of"]  # the same list: the same job
    for other in ((str(lists["two"]),), ()):
        with pytest.raises(ConfigMismatchError, match="deny list"):
            run_discovery(dataclasses.replace(config, deny_list=other))
    # The same path with other contents is another list too.
    lists["one"].write_text(lists["two"].read_text())
    with pytest.raises(ConfigMismatchError, match="deny list"):
        run_discovery(dataclasses.replace(config, deny_list=(str(lists["one"]),)))
