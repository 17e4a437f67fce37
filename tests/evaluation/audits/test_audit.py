"""``evaluation.audits.audit`` on the real pipeline: the unpatched pipeline, with a fixed seed, is
reported "inconclusive" (never "consistent"), for one release per run and for the reuse audit's
two; what each release published is read back; and combinations the audit cannot run are
refused before anything runs. The planted bugs it finds are in ``test_audit_planted``."""

import json

import pytest

from triehh_beam.evaluation.audits.audit import (AuditConfig, AuditError, format_audit, run_audit,
                                                 synthetic_population)


def test_the_unpatched_pipeline_is_inconclusive_with_a_fixed_seed(tmp_path):
    users = synthetic_population(300, seed=1)
    lines = []
    config = AuditConfig(protocol="sample-threshold", epsilon=1.0, delta=1e-3, max_length=3, runs=2, seed=7)
    result = run_audit(config, users, lines.append, workspace=str(tmp_path))
    assert result["verdict"] == "inconclusive" and result["violated"] is False
    assert result["population"]["target"] == "z"  # no item of D starts with it
    assert result["event"]["hits_d"] == 0 and result["event"]["hits_d_prime"] <= 2
    assert result["claim"] == {"epsilon": 1.0, "delta": pytest.approx(1e-3, rel=1e-3), "accounting": "exact"}
    assert result["releases"] == 4 and len(lines) == 2
    assert all(need["runs"] > 2 for need in result["runs_to_refute"] if need["runs"] is not None)
    # The real job ran: its files are in the workspace, each release's output and state at the
    # same paths (the last release's left), and the last run's ledger holds one charge.
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    assert published["privacy"]["protocol"] == "sample-threshold"
    assert len((tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()) == 1
    text = format_audit(result)
    assert "inconclusive" in text and "consistent" not in text and "passes" not in text
    assert "runs per population" in text


def test_the_exact_plan_with_tau_minus_two_holders_of_the_target_is_inconclusive(tmp_path):
    # test_audit_planted's audit of a threshold one below the exact plan, unpatched: D holds
    # tau - 2 = 1 user with only 'z' besides its 100, D' one more; 2 < tau = 3 holders are never
    # released, so the event never happens (the planted threshold publishes it w.p. p_s^2 = 0.22).
    from tests.evaluation.audits.test_audit_planted import EXACT_PLAN_AUDIT

    # The event cannot happen unpatched, so two runs show it as well as more would.
    lines = []
    config = AuditConfig(runs=2, **EXACT_PLAN_AUDIT)
    result = run_audit(config, synthetic_population(100, seed=5), lines.append, workspace=str(tmp_path))
    assert result["verdict"] == "inconclusive"
    assert result["event"]["hits_d"] == 0 and result["event"]["hits_d_prime"] == 0
    assert result["population"] == {"users": 101, "target": "z", "target_user": "triehh-audit-target-user",
                                    "target_holders": 1}
    assert result["claim"]["accounting"] == "exact" and result["claim"]["delta"] == pytest.approx(0.1, rel=1e-5)
    published = json.loads((tmp_path / "out" / "heavy_hitters.json").read_text())
    assert published["privacy"]["accounting"] == "exact" and published["privacy"]["tau"] == 3
    text = format_audit(result)
    assert "1 of them holding only the target" in text and "exact accounting" in text


def test_two_releases_of_the_unpatched_pipeline_are_inconclusive(tmp_path):
    # test_audit_planted's reuse audit, unpatched. Fresh nonces: the second release differs
    # from the first on D as on D' (fresh sampling and estimates' noise: two draws of an
    # estimate's noise at epsilon 0.02 agree with probability under 1%, and 'a' and 'b' both have one).
    users = synthetic_population(1500, seed=2)
    config = AuditConfig(protocol="triehh++", epsilon=0.1, delta=1e-3, max_length=2, estimate_frequencies=0.02,
                         releases=2, runs=2, seed=7)
    result = run_audit(config, users, workspace=str(tmp_path))
    assert result["verdict"] == "inconclusive"
    assert result["event"]["name"] == "differs" and result["population"]["target"] == "a"
    assert result["event"]["hits_d"] == 2 and result["event"]["hits_d_prime"] == 2
    assert result["claim"]["epsilon"] == pytest.approx(0.12) and result["releases"] == 5
    # One ledger for the audit: every release charged under its own record id.
    records = [json.loads(line) for line in (tmp_path / "ledger" / "ledger.jsonl").read_text().splitlines()]
    assert len({r["record_id"] for r in records}) == 5


@pytest.mark.parametrize("kwargs, message", [
    (dict(protocol="pem"), "unknown protocol .pem.; choose one of triehh, triehh\\+\\+, sample-threshold"),
    (dict(runs=0), "runs must be"),
    (dict(event="differs"), "--releases 2"),
    (dict(releases=2, event="published"), "--releases 2"),
    (dict(event="estimate-at-least"), "--at-least"),
    (dict(at_least=3.0), "--at-least"),
    (dict(event="estimate-at-least", at_least=3.0), "published numbers"),
    (dict(protocol="sample-threshold", window=True), "--window runs a trie"),
    (dict(confidence=1.0), "confidence"),
    (dict(violation=0.0), "violation"),
    (dict(target_holders=-1), "target_holders"),
    (dict(target_holders=1, releases=2), "--releases 1"),
])
def test_what_the_audit_cannot_run_is_refused(kwargs, message):
    with pytest.raises(AuditError, match=message):
        AuditConfig(**kwargs)


def test_a_population_with_the_audits_own_user_is_refused():
    with pytest.raises(AuditError, match="extra user"):
        run_audit(AuditConfig(runs=1), {"triehh-audit-target-user": {"a": 1}})
    with pytest.raises(AuditError, match="no user"):
        run_audit(AuditConfig(runs=1), {})


def test_the_synthetic_population_is_one_short_word_per_user():
    users = synthetic_population(200, seed=3)
    assert len(users) == 200 and all(len(items) == 1 for items in users.values())
    assert synthetic_population(200, seed=3) == users


def test_two_windowed_replays_of_the_same_records_are_independent(tmp_path):
    # The reuse audit of discover --window: window k of a second replay of D differs from window
    # k of the first (fresh estimate noise) as often as on D'. Before each window drew its own
    # release nonce (issue 24, finding 1) every window of D repeated exactly, and with 12
    # windows the audit reported "violated" (docs/evaluation.md).
    config = AuditConfig(protocol="triehh++", epsilon=0.5, delta=1e-3, max_length=2, estimate_frequencies=0.1,
                         releases=2, window=True, runs=4, seed=3)
    result = run_audit(config, synthetic_population(1500, seed=2), workspace=str(tmp_path))
    assert result["event"]["hits_d_prime"] == 4
    assert result["event"]["hits_d"] == 4


def test_a_partition_selection_audit_runs_the_real_pipeline_and_is_inconclusive(tmp_path):
    from tests.evaluation.audits.test_audit_planted import PARTITION_AUDIT

    result = run_audit(AuditConfig(runs=2, **PARTITION_AUDIT), synthetic_population(20, seed=11))
    assert result["verdict"] == "inconclusive" and result["releases"] == 4
    assert result["claim"] == {"epsilon": pytest.approx(1.0), "delta": 1e-3, "accounting": "optimal-selection"}
    assert result["job"]["selection_share"] == 0.02 and "--selection-share 0.02" in format_audit(result)
    with pytest.raises(AuditError, match="--selection-share is --protocol partition-selection's"):
        AuditConfig(protocol="triehh++", selection_share=0.5)
