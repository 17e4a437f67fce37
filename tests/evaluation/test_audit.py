"""The empirical privacy audit: it flags broken configurations (theta = 1; every user sampled),
it does not flag the planner's, its runs are the protocol's (a closed-form frequency), and its
bound comes from the held-out half of the runs.

The population: 2,000 users, 1,600 holding "ab" and 100 each "ba", "bb", "c", "ca". At epsilon
0.9, delta 1e-6, L = 3 the planner picks theta = 10 and m = 51 (2.55% of the users per round)
and claims epsilon = 0.8831. The worst-case canary is "a" (a prefix of "ab" that nobody holds):
its prefix is kept in every run, so only its last vote, "a$", can differ. Every test runs at a
fixed seed, so it is deterministic; each docstring says how often it would fail at a random one.
"""

import math

import pytest

from triehh_beam.evaluation.audit import AuditConfig, AuditError, format_audit, run_audit, run_seed
from triehh_beam.evaluation.canaries import CanaryError

CLAIMED = 0.8831131818077327
TARGET = dict(epsilon=0.9, delta=1e-6, max_length=3)


def _users(extra_holders: int = 0) -> dict:
    users = {}
    for i in range(2000):
        users[f"u{i}".encode()] = {("ab" if i % 5 else ("ba", "bb", "c", "ca")[i // 5 % 4]): 1}
    for i in range(extra_holders):  # holders of "zq", an item no other item shares a prefix with
        users[f"zq-holder-{i}".encode()] = {"zq": 1}
    return users


def _event(result: dict, prefix: str) -> dict:
    return next(e for e in result["events"] if e["prefix"] == prefix)


@pytest.fixture(scope="module")
def theta_one():
    return run_audit(AuditConfig(**TARGET, runs=3000, canary="a", theta=1), _users())


def test_theta_one_is_flagged_above_the_claimed_epsilon(theta_one):
    """With theta = 1 a single vote keeps a prefix, so D1's canary "a" is in the output whenever
    its user is sampled in round 2 (probability q = 51/2001), and never in D0's. Of the 1,500
    held-out runs, 16 such runs put the bound above the claim: the power is 1 - P[Bin(1500, q)
    <= 15] = 0.99999 (at a random seed the test fails once in 70,000)."""
    result = theta_one
    assert result["epsilon_claimed"] == pytest.approx(CLAIMED)
    assert result["audited"] == {"theta": 1, "batch_size": 51, "overridden": ["theta"], "theorem1_epsilon": None}
    assert result["epsilon_lower_bound"] > result["epsilon_claimed"]
    assert result["violated"] is True
    best = result["best_event"]
    assert (best["prefix"], best["in_trie"], best["direction"]) == ("a$", True, "D1 over D0")
    assert "VIOLATED" in format_audit(result)


def test_no_sampling_is_flagged_when_the_canary_completes_a_count_just_below_theta():
    """Every user sampled (m >= n) and 9 = theta - 1 holders of "zq" in D0: D1's canary user
    makes 10 votes, so "zq$" is in every D1 run and in no D0 run: p1 = 1, p0 = 0 exactly, and the
    bound is ln(0.025^(1/100) / (1 - 0.025^(1/100))) = 3.6 on 100 held-out runs: never fails."""
    result = run_audit(AuditConfig(**TARGET, runs=200, canary="zq", batch_size=5000), _users(extra_holders=9))
    assert _event(result, "zq$")["runs_d0"] == 0 and _event(result, "zq$")["runs_d1"] == 200
    lo = 0.025 ** (1 / 100)
    assert result["epsilon_lower_bound"] == pytest.approx(math.log((lo - result["delta_claimed"]) / (1 - lo)))
    assert result["epsilon_provable_max"] == result["epsilon_lower_bound"]  # as strong as 200 runs allow
    assert result["violated"] is True


@pytest.mark.parametrize("canary, extra, runs", [("a", 0, 3000), ("zq", 9, 200)])
def test_the_planners_configuration_is_not_flagged(canary, extra, runs):
    """The two canaries above, as many runs, with the plan's theta = 10 and m = 51: one vote
    moves no count past the threshold unless nine others were sampled with it, so no event tells
    D1 from D0 here (the bound is 0 at this seed). If Theorem 1 holds, a bound above the claim
    has probability at most 5% at a random seed (far less here: the canaries' whole sequences
    are in no run of either population)."""
    result = run_audit(AuditConfig(**TARGET, runs=runs, canary=canary), _users(extra))
    assert _event(result, canary + "$")["runs_d0"] == _event(result, canary + "$")["runs_d1"] == 0
    assert result["audited"]["overridden"] == []
    assert result["epsilon_lower_bound"] <= result["epsilon_claimed"]
    assert result["violated"] is False
    assert "consistent" in format_audit(result)


def test_the_runs_are_the_protocol_the_canary_is_found_as_often_as_it_is_sampled(theta_one):
    """Under theta = 1 the canary's share of D1 runs is q = 51/2001 (round 2's sample: its
    prefix "a" is always kept), and its prefix "a" is in every run of both; a 4.5-sd tolerance
    over 3,000 runs (a random seed fails once in 150,000)."""
    result = theta_one
    q = 51 / 2001
    sd = math.sqrt(3000 * q * (1 - q))
    assert abs(_event(result, "a$")["runs_d1"] - 3000 * q) < 4.5 * sd
    assert _event(result, "a$")["runs_d0"] == 0
    assert _event(result, "a")["runs_d0"] == _event(result, "a")["runs_d1"] == 3000


def test_the_bound_comes_from_the_runs_the_event_was_not_chosen_on():
    result = run_audit(AuditConfig(**TARGET, runs=301, canary="a", theta=1), _users())
    best = result["best_event"]
    assert (result["selection_runs"], result["evaluation_runs"]) == (150, 151)
    assert best["selection"]["runs"] == 150 and best["evaluation"]["runs"] == 151
    event = _event(result, best["prefix"])
    assert best["in_trie"] and best["direction"] == "D1 over D0"
    assert best["selection"]["numerator"] + best["evaluation"]["numerator"] == event["runs_d1"]
    assert best["selection"]["denominator"] + best["evaluation"]["denominator"] == event["runs_d0"]


def test_a_random_canary_and_the_worst_case_are_audited_by_default():
    result = run_audit(AuditConfig(**TARGET, runs=20, seed=3), _users())
    kinds = [c["kind"] for c in result["canaries"]]
    assert kinds == ["random", "worst-case"]
    random_canary = result["canaries"][0]["item"]
    assert len(random_canary) == 2 and random_canary not in ("ab", "ba", "bb", "c", "ca")  # L - 1 units
    assert result["canaries"][1]["item"] == "a"
    # Every prefix of both canaries is an event, the whole sequence last.
    assert [e["prefix"] for e in result["events"]] == [random_canary[0], random_canary, random_canary + "$", "a", "a$"]
    assert result == {**run_audit(AuditConfig(**TARGET, runs=20, seed=3), _users()), "seconds": result["seconds"]}


def test_run_seeds_are_distinct_per_population_and_run():
    seeds = {run_seed(0, population, j) for population in ("D0", "D1:random", "D1:worst-case") for j in range(100)}
    assert len(seeds) == 300 and all(len(s) == 32 for s in seeds)
    assert run_seed(1, "D0", 0) != run_seed(0, "D0", 0)


@pytest.mark.parametrize("canary", ["", "abc", "toolongforL"])
def test_a_canary_that_cannot_be_encoded_is_refused(canary):
    with pytest.raises(CanaryError, match="cannot be encoded"):
        AuditConfig(**TARGET, runs=2, canary=canary)


def test_an_infeasible_target_and_bad_settings_are_refused():
    with pytest.raises(AuditError, match="no plan to audit"):
        run_audit(AuditConfig(epsilon=0.1, delta=1e-10, max_length=3, runs=2), _users())
    with pytest.raises(AuditError, match="nothing to audit"):
        run_audit(AuditConfig(**TARGET, runs=2), {})
    for bad in (dict(runs=1), dict(theta=0), dict(batch_size=0), dict(confidence=1.0), dict(rule="x"), dict(seed=-1)):
        with pytest.raises(AuditError):
            AuditConfig(**TARGET, **bad)
