"""``--estimate-frequencies`` through the whole driver (``run_discovery``, in-process runner): the
published estimates equal the per-user reference for the job's keys; the ledger is charged the
total epsilon (discovery + estimates, delta unchanged) before round 1, and a budget that only
fits the discovery is refused before anything is read; a re-run releases identical numbers
(recomputed after a crash, or republished without reading the input); a resume with another
epsilon_est is refused; and no exact count is written to the state, the output, the operator
report, the ledger or the (verbose) progress and events."""

import dataclasses
import hashlib
import json
import pathlib
import re

import numpy as np
import pytest
from google.protobuf import json_format

from triehh_beam.evaluation.estimates_eval import simulate_estimates
from triehh_beam.io.write import write_records
from triehh_beam.job.batch.driver import ConfigMismatchError, DiscoveryConfig, run_discovery
from triehh_beam.job.batch.dry_run import dry_run
from triehh_beam.job.settings import config as config_lib
from triehh_beam.job.state.ledger import BudgetExceededError, Ledger
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.estimates.count_intervals import noisy_count_intervals
from triehh_beam.protocol.estimates.frequency_estimates import (EstimateKeys, EstimateTargets,
                                                                reference_estimates, user_choice)
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.rounds.trie import Trie
from tests.release_keys import keyed_identity

SEED = hashlib.sha256(b"triehh-beam estimate tests").digest()
EPSILON, DELTA, L = 4.0, 1e-6, 5
ENCODER = ItemEncoder(max_length=L)
# Single-item holders of each word: distinctive numbers, so that a leak would be recognised.
HOLDERS = {"the": 1237, "of": 1109, "and": 1013, "to": 907, "in": 811, "is": 733}


def _population():
    """user -> {item: count}: the holders above (some holding two words, counts 1 to 3), and
    2,300 users holding one rare random word each."""
    rng = np.random.default_rng(5)
    users = {}
    i = 0
    for word, holders in HOLDERS.items():
        for _ in range(holders):
            users[f"user-{i}"] = {word: int(rng.integers(1, 4))}
            i += 1
    for j in range(0, 400, 2):  # 200 users also hold a second word of the list
        users[f"user-{j}"]["is" if "the" in users[f"user-{j}"] else "the"] = int(rng.integers(1, 4))
    letters = list("bcdfghjklmnpqrsvwxyzBCDFGHJKLMNPQRSVWXYZ0123456789")  # no letter is frequent
    for _ in range(2300):
        users[f"user-{i}"] = {"".join(rng.choice(letters, size=3)): 1}
        i += 1
    return users


POPULATION = _population()


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("records") / "records.jsonl"
    write_records(str(path), [(u, item, c) for u, held in POPULATION.items() for item, c in held.items()])
    return path


def _config(records, out, **overrides) -> DiscoveryConfig:
    fields = dict(epsilon=EPSILON, delta=DELTA, max_length=L, seed=SEED, estimate_frequencies=0.1)
    fields.update(overrides)
    return DiscoveryConfig(input_pattern=str(records), output_dir=str(out), **{"protocol": "triehh", **fields})


def _document(out) -> dict:
    return json.loads(pathlib.Path(out, "heavy_hitters.json").read_text(encoding="utf-8"))


def _weighted():
    return {u: [(ENCODER.encode(item), c) for item, c in held.items()] for u, held in POPULATION.items()}


def _weighted_users(targets):
    """Per target, what its estimate estimates: the sum over users of their share of their
    records on the targets that fall on it."""
    f = {}
    for weighted in _weighted().values():
        on = {}
        for sequence, count in weighted:
            i = targets.index_of(sequence)
            if i >= 0:
                on[targets.sequences[i]] = on.get(targets.sequences[i], 0) + count
        for target, count in on.items():
            f[target] = f.get(target, 0.0) + count / sum(on.values())
    return f


def _exact_counts(targets, keys):
    """The exact counts behind the estimates, user by user (what must never be written)."""
    exact = [0] * len(targets)
    weighted = _weighted()
    ids = sorted(weighted)
    for user, u in zip(ids, keys.choice_uniforms(ids)):
        chosen = user_choice(weighted[user], targets, float(u))
        if chosen is not None:
            exact[chosen] += 1
    return exact


@pytest.fixture(scope="module")
def finished(records, tmp_path_factory):
    """One finished job with estimates, its verbose progress lines and events."""
    out = tmp_path_factory.mktemp("job") / "out"
    config = _config(records, out, verbose=True, estimate_frequencies=0.2)
    lines, events = [], []
    result = run_discovery(config, progress=lines.append, events=events.append)
    return config, result, lines, events


def test_the_published_estimates_equal_the_reference(finished):
    config, result, _, _ = finished
    trie = Trie.from_bytes(pathlib.Path(config.output_dir, "trie.pb").read_bytes())
    assert set(result.heavy_hitters) == set(HOLDERS)  # the population is found whole
    targets = EstimateTargets.from_trie(trie)
    # The keyed oracle of the evaluation (the per-user reference on the encoded population).
    expected = simulate_estimates(POPULATION, ENCODER, trie, SEED, 0.2,
                                  identity=keyed_identity(config)).by_target()
    keys = EstimateKeys.derive(SEED, keyed_identity(config))
    assert expected == reference_estimates(_weighted(), targets, 0.2, keys).by_target()
    document = _document(config.output_dir)
    k = document["frequency_estimates"]["half_width"]
    assert k == 15 and document["frequency_estimates"]["epsilon"] == 0.2
    assert document["frequency_estimates"]["coverage"] >= 0.95
    weighted = _weighted_users(targets)
    for entry in document["heavy_hitters"]:
        sequence = ENCODER.encode(entry["item"])
        assert entry["estimate"] == expected[sequence], entry
        # The published interval is of the weighted users, the draws counted: not +- k.
        assert entry["interval"] == list(noisy_count_intervals([entry["estimate"]], 0.2)[0])
        assert entry["interval"][1] - entry["interval"][0] > 2 * k
        assert entry["interval"][0] <= weighted[sequence] <= entry["interval"][1], (entry, weighted[sequence])
    for entry in document["frequent_prefixes"]:
        sequence = tuple(entry["prefix"])
        assert entry["estimate"] == expected[sequence]
        assert entry["interval"] == list(noisy_count_intervals([entry["estimate"]], 0.2)[0])
    assert "weighted users" in document["frequency_estimates"]["quantity"]
    assert len(document["heavy_hitters"]) + len(document["frequent_prefixes"]) == len(targets)
    # The heavy hitters' order is unchanged by the estimates (by value, as without them).
    assert [e["item"] for e in document["heavy_hitters"]] == sorted(HOLDERS)
    # Each estimate is within a few intervals of the holder count (single-item holders dominate).
    for entry in document["heavy_hitters"]:
        assert abs(entry["estimate"] - HOLDERS[entry["item"]]) < 150


def test_the_plan_and_ledger_show_the_total_spend_and_its_parts(finished):
    config, result, lines, _ = finished
    plan = result.plan
    assert plan.estimate_epsilon == 0.2
    [record] = Ledger(config.resolved_ledger_dir).records()
    assert record["epsilon"] == pytest.approx(plan.epsilon + 0.2)
    assert record["delta"] == plan.delta
    assert record["discovery_epsilon"] == plan.epsilon and record["estimate_epsilon"] == 0.2
    [plan_line] = [line for line in lines if line.startswith("plan:")]
    assert "frequency estimates epsilon_est=0.2: total target epsilon=4.2" in plan_line
    privacy = _document(config.output_dir)["privacy"]
    assert privacy["estimate_epsilon"] == 0.2 and privacy["total_target_epsilon"] == pytest.approx(4.2)
    assert "total_epsilon" not in privacy  # a function of n, which is not declared public
    # Charged before any round ran: the ledger's record is older than the first round's line.
    assert lines.index(plan_line) < min(i for i, line in enumerate(lines) if line.startswith("round 1/"))


def test_no_exact_count_is_written_anywhere(finished):
    config, result, lines, events = finished
    trie = Trie.from_bytes(pathlib.Path(config.output_dir, "trie.pb").read_bytes())
    targets = EstimateTargets.from_trie(trie)
    exact = _exact_counts(targets, EstimateKeys.derive(SEED, keyed_identity(config)))
    released = _document(config.output_dir)
    published = {n for e in released["heavy_hitters"] + released["frequent_prefixes"]
                 for n in [e["estimate"], *e["interval"]]}
    # An exact count equal to a published number (noise 0 or +-k) cannot be told from it: the
    # others, distinctive numbers of 3 or 4 digits, must appear nowhere.
    hidden = set(exact) - published
    assert len(hidden) >= 4 and min(hidden) > 500, (exact, published)
    texts = {"progress": "\n".join(lines), "events": "\n".join(json.dumps(e) for e in events)}
    for root in (pathlib.Path(config.output_dir), pathlib.Path(config.resolved_state_dir)):
        for path in root.rglob("*"):
            if path.is_file() and path.suffix != ".pb":
                texts[str(path)] = path.read_text(encoding="utf-8", errors="replace")
    states = list(_states(config.resolved_state_dir))
    assert len(states) > 3 and any(state.HasField("estimates") for _, state in states)
    for path, state in states:
        texts[path] = json_format.MessageToJson(state)
    assert any("operator_report" in name for name in texts) and any("ledger" in name for name in texts)
    for name, text in texts.items():
        numbers = {int(n) for n in re.findall(r"(?<![\d.])\d+(?![\d.])", text)}
        assert not numbers & hidden, (name, numbers & hidden)


def _states(state_dir):
    """(path, JobState) of every state object the job committed."""
    for path in sorted(pathlib.Path(state_dir).glob("state-*.pb")):
        yield str(path), state_pb2.JobState.FromString(path.read_bytes())


def test_a_rerun_releases_identical_estimates(records, tmp_path):
    out = tmp_path / "out"
    config = _config(records, out)
    run_discovery(config)
    first = _document(out)
    # A crash after the rounds, before the estimates were committed: the state without them.
    store = StateStore(config.resolved_state_dir)
    state = store.load()
    assert state.HasField("estimates")
    state.ClearField("estimates")
    store.commit(state)
    (out / "heavy_hitters.json").unlink()
    events = []
    run_discovery(config, events=events.append)
    estimated = [e["event"] for e in events if e["event"].startswith("estimates_")]
    assert estimated == ["estimates_start", "estimates_done"]
    assert _document(out) == first
    # A finished job republishes its committed estimates without reading the input.
    moved = records.with_name("moved.jsonl")
    records.rename(moved)
    try:
        (out / "heavy_hitters.json").unlink()
        events = []
        run_discovery(config, events=events.append)
        assert not [e for e in events if e["event"].startswith("estimates_")], events
        assert _document(out) == first
    finally:
        moved.rename(records)
    assert len(Ledger(config.resolved_ledger_dir).records()) == 1  # charged once


def test_a_resume_with_another_epsilon_est_is_refused(finished):
    config, _, _, _ = finished
    for other in (0.5, None):
        with pytest.raises(ConfigMismatchError, match="frequency estimates' epsilon"):
            run_discovery(dataclasses.replace(config, estimate_frequencies=other))


def test_a_budget_that_fits_only_the_discovery_is_refused_before_reading(records, tmp_path):
    ledger = tmp_path / "ledger"
    config = _config(records, tmp_path / "out", estimate_frequencies=1.0, ledger_dir=str(ledger),
                     budget_epsilon=EPSILON + 0.5)
    with pytest.raises(BudgetExceededError, match="epsilon 5"):
        run_discovery(config)
    assert not (tmp_path / "out").exists()
    assert Ledger(str(ledger)).records() == []
    # The same budget runs the discovery alone (it fits), which publishes no estimate...
    alone = dataclasses.replace(config, estimate_frequencies=None)
    run_discovery(alone)
    assert len(Ledger(str(ledger)).records()) == 1
    assert "frequency_estimates" not in _document(alone.output_dir)
    assert isinstance(_document(alone.output_dir)["heavy_hitters"][0], str)  # the file as before
    # ...and cannot be resumed into one that does.
    with pytest.raises(ConfigMismatchError, match="frequency estimates' epsilon"):
        run_discovery(dataclasses.replace(alone, estimate_frequencies=0.5))


def test_the_dry_run_shows_the_total(records, tmp_path):
    lines = []
    report = dry_run(_config(records, tmp_path / "out", estimate_frequencies=1.0), progress=lines.append)
    plan = report["plan"]
    assert plan["estimate_epsilon"] == 1.0
    assert report["would_spend"]["epsilon"] == pytest.approx(plan["epsilon"] + 1.0)
    assert any("frequency estimates 1" in line for line in lines if line.startswith("would spend"))


def test_the_setting_is_validated_with_or_without_windows():
    base = dict(input_pattern="x.jsonl", output_dir="out", epsilon=1.0, delta=1e-6, max_length=4)
    for window in ({}, dict(window=3600, timestamp_column="t")):
        for bad in (0.0, -1.0, float("inf"), float("nan")):
            with pytest.raises(ValueError, match="--estimate-frequencies"):
                DiscoveryConfig(**{"protocol": "triehh", **base}, **window, estimate_frequencies=bad)
    # Windowed jobs estimate each released window (tests/job/windows/test_windowed_estimates.py).
    windowed = DiscoveryConfig(**{"protocol": "triehh", **base}, estimate_frequencies=1.0, window=3600, timestamp_column="t")
    assert b"estimate_frequencies" in windowed.window_identity()
    # Part of the identity: a job with estimates samples apart from the same job without them.
    without = json.loads(DiscoveryConfig(**{"protocol": "triehh", **base}).sampling_identity())
    given = json.loads(DiscoveryConfig(**{"protocol": "triehh", **base}, estimate_frequencies=1.0).sampling_identity())
    assert (without["estimate_frequencies"], given["estimate_frequencies"]) == (None, 1.0)
    assert config_lib.BY_NAME["estimate_frequencies"].identity == "plan.estimate_epsilon"
