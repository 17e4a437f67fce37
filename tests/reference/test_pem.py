"""Tests of the OLH frequency oracle and PEM (triehh_beam/reference/pem.py, docs/protocol.md §3).

Statistical tests run at fixed seeds, so they are deterministic; each states its tolerance and
how likely a correct implementation would be to fail it at a random seed.
"""

import math

import numpy as np
import pytest

from triehh_beam.reference import pem
from triehh_beam.reference.metrics import recall_at_k

# --------------------------------------------------------------------------------------------
# OLH parameters.


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_olh_parameters_follow_the_protocol(epsilon):
    oracle = pem.OLH(epsilon)
    e = math.exp(epsilon)
    assert oracle.buckets == math.ceil(e + 1)
    assert oracle.p == pytest.approx(e / (e + oracle.buckets - 1))
    assert oracle.q == pytest.approx(1 / oracle.buckets)
    # epsilon-LDP: the true bucket is at most e^eps times likelier than any other bucket.
    other = (1 - oracle.p) / (oracle.buckets - 1)
    assert oracle.p / other == pytest.approx(e)
    # At d' = e^eps + 1 exactly the paper's variance is n*4e^eps/(e^eps-1)^2; with the ceiling
    # it is within a few percent of that.
    paper = 4 * e / (e - 1) ** 2
    assert oracle.variance(1) == pytest.approx(paper, rel=0.25)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1", 50.0])
def test_olh_refuses_bad_epsilon(bad):
    with pytest.raises(ValueError):
        pem.OLH(bad)


def test_perturbation_keeps_the_true_bucket_with_probability_p():
    oracle = pem.OLH(2.0)
    rng = np.random.default_rng(1)
    n = 200_000
    fingerprints = rng.integers(0, 2**63, size=n, dtype=np.uint64)
    reports = oracle.perturb(fingerprints, rng)
    true_buckets = pem.olh_hash(reports.seeds, fingerprints, oracle.buckets)
    kept = np.mean(reports.buckets == true_buckets)
    # 5 sigma of a binomial proportion.
    assert abs(kept - oracle.p) < 5 * math.sqrt(oracle.p * (1 - oracle.p) / n)
    assert reports.buckets.max() < oracle.buckets
    # The other buckets are uniform: the changed reports are spread evenly (chi-square-free
    # check: every bucket gets within 20% of its expected share at this n).
    changed = reports.buckets[reports.buckets != true_buckets]
    counts = np.bincount(changed.astype(np.int64), minlength=oracle.buckets)
    assert counts.min() > 0.8 * len(changed) / oracle.buckets


def test_hash_is_near_uniform_and_seed_dependent():
    rng = np.random.default_rng(2)
    seeds = rng.integers(0, 2**63, size=100_000, dtype=np.uint64)
    buckets = pem.olh_hash(seeds, np.uint64(12345), 7)
    counts = np.bincount(buckets.astype(np.int64), minlength=7)
    assert np.all(np.abs(counts / len(seeds) - 1 / 7) < 0.01)
    # Two values collide under a random seed with probability ~ 1/d'.
    other = pem.olh_hash(seeds, np.uint64(54321), 7)
    assert abs(np.mean(buckets == other) - 1 / 7) < 0.01


# --------------------------------------------------------------------------------------------
# Unbiasedness and variance of the OLH estimate.
#
# A known population of n = 4000 reporters: value 1 held by 1000, value 2 by 200, value 3 by
# 0 (never held), the rest (2800) spread over 100 other values. R = 400 independent runs.
# Unbiasedness: |mean estimate - f| < 4 * sd/sqrt(R) (two-sided normal tail ~6e-5 per value).
# Variance: the sample variance over R = 400 runs has relative sd sqrt(2/(R-1)) = 7%; the
# tolerance is 25% (~3.5 sd).

N_REPORTERS = 4000
TRUE_COUNTS = {1: 1000, 2: 200, 3: 0}
RUNS = 400


def _population_fingerprints():
    values = [1] * 1000 + [2] * 200 + [100 + (i % 100) for i in range(2800)]
    rows = np.array(values, dtype=">u8").view(np.uint8).reshape(-1, 8)
    return pem._fingerprints(rows, 64)


def _candidate_fingerprints():
    rows = np.array(sorted(TRUE_COUNTS), dtype=">u8").view(np.uint8).reshape(-1, 8)
    return pem._fingerprints(rows, 64)


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_olh_estimate_is_unbiased_with_the_theoretical_variance(epsilon):
    oracle = pem.OLH(epsilon)
    users = _population_fingerprints()
    candidates = _candidate_fingerprints()
    estimates = np.array(
        [
            oracle.estimate(oracle.perturb(users, np.random.default_rng([7, run])), candidates)
            for run in range(RUNS)
        ]
    )
    for column, value in enumerate(sorted(TRUE_COUNTS)):
        f = TRUE_COUNTS[value]
        theory = oracle.variance(N_REPORTERS, f)
        mean = estimates[:, column].mean()
        assert abs(mean - f) < 4 * math.sqrt(theory / RUNS), (value, mean, f)
        ratio = estimates[:, column].var(ddof=1) / theory
        assert 0.75 < ratio < 1.25, (value, ratio)


def test_variance_formula_reduces_to_the_paper_form():
    oracle = pem.OLH(3.0)
    p, q = oracle.p, oracle.q
    assert oracle.variance(1000) == pytest.approx(1000 * q * (1 - q) / (p - q) ** 2)
    # Holders add p(1-p) instead of q'(1-q') each.
    assert oracle.variance(1000, 100) == pytest.approx(
        (100 * p * (1 - p) + 900 * q * (1 - q)) / (p - q) ** 2
    )


# --------------------------------------------------------------------------------------------
# Bit strings.


def test_encode_and_decode_values():
    rows, unusable = pem.encode_values(["ab", "", None, "toolongvalue", "é"], 4)
    assert unusable == 3
    assert rows.tolist()[0] == [0x61, 0x62, 0, 0]
    assert rows.tolist()[4] == [0xC3, 0xA9, 0, 0]
    assert not rows[1:4].any()
    assert pem.decode_value(int.from_bytes(b"ab\x00\x00", "big"), 4) == "ab"
    assert pem.decode_value(int.from_bytes(b"\xc3\xa9\x00\x00", "big"), 4) == "é"
    # Invalid UTF-8 is returned escaped: part of the answer, never equal to a real item.
    assert pem.decode_value(int.from_bytes(b"\xff\x00\x00\x00", "big"), 4) == "\\xff"
    assert pem.decode_value(int.from_bytes(b"ab\x00\x00", "big"), 4, text=False) == b"ab"


def test_prefix_fingerprints_ignore_the_bits_after_the_prefix():
    rows, _ = pem.encode_values(["abc", "abd", "xbc"], 3)
    fp12 = pem._fingerprints(rows, 12)
    assert fp12[0] == fp12[1] != fp12[2]
    fp24 = pem._fingerprints(rows, 24)
    assert len(set(fp24.tolist())) == 3
    # The same bits at another length are another value.
    assert pem._fingerprints(rows[:1], 16)[0] != pem._fingerprints(rows[:1], 24)[0]
    # A prefix given as an int encodes to the same fingerprint as the user's value.
    as_int = pem._int_rows([int.from_bytes(b"ab", "big") >> 4], 12, 3)
    assert pem._fingerprints(as_int, 12)[0] == fp12[0]


# --------------------------------------------------------------------------------------------
# PEM.


def test_pem_configuration_defaults():
    config = pem.PEMConfig(epsilon=4, k=10, n_bytes=9)
    assert (config.gamma, config.eta, config.m_bits) == (4, 8, 72)
    assert config.groups == math.ceil((72 - 4) / 8) == 9
    assert [config.prefix_bits(i) for i in (1, 2, 9)] == [12, 20, 72]
    assert pem.PEMConfig(epsilon=1, k=50, n_bytes=9).gamma == 6
    with pytest.raises(ValueError):
        pem.PEMConfig(epsilon=1, k=0, n_bytes=9)
    with pytest.raises(ValueError):
        pem.PEMConfig(epsilon=1, k=4, n_bytes=9, gamma=10, eta=12)
    with pytest.raises(ValueError):
        pem.PEMConfig(epsilon=1, k=4, n_bytes=9, candidates=3)
    # More candidates per group: gamma follows them.
    wide = pem.PEMConfig(epsilon=4, k=10, n_bytes=9, candidates=20)
    assert (wide.candidates, wide.gamma, wide.eta) == (20, 5, 7)


def test_pem_keeps_the_candidates_between_groups_and_returns_k():
    users, words = _skewed_population()
    narrow = pem.run_pem(users, pem.PEMConfig(epsilon=8, k=2, n_bytes=4, eta=6), seed=1)
    wide = pem.run_pem(users, pem.PEMConfig(epsilon=8, k=2, n_bytes=4, eta=6, candidates=6), seed=1)
    assert len(narrow.heavy_hitters) == len(wide.heavy_hitters) == 2
    assert set(wide.heavy_hitters) == set(words[:2])


def _skewed_population(n=6000):
    words = ["the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for"]
    shares = np.array([30, 20, 14, 10, 3, 2.5, 2, 1.5, 1, 1, 0.5, 0.5])
    rng = np.random.default_rng(0)
    draws = rng.choice(len(words), size=n, p=shares / shares.sum())
    return {user: {words[w]: 1} for user, w in enumerate(draws)}, words


def test_pem_finds_the_top_items_at_a_large_epsilon_and_is_deterministic():
    users, words = _skewed_population()
    config = pem.PEMConfig(epsilon=8, k=4, n_bytes=4, eta=6)
    result = pem.run_pem(users, config, seed=3)
    assert set(result.heavy_hitters) == set(words[:4])
    assert len(result.estimates) == 4
    # Estimates are of the whole population (scaled from the last group): the top word holds
    # about 30% of 6000 users.
    assert result.estimates[0] == pytest.approx(0.3 * 6000, rel=0.25)
    assert sum(result.group_sizes) == len(users)
    assert max(result.group_sizes) - min(result.group_sizes) <= 1
    assert pem.run_pem(users, config, seed=3) == result
    assert pem.run_pem(users, config, seed=4) != result


def test_pem_recall_grows_with_epsilon():
    users, words = _skewed_population()
    truth = list(words)
    recalls = {}
    for epsilon in (0.5, 8):
        config = pem.PEMConfig(epsilon=epsilon, k=4, n_bytes=4, eta=6)
        recalls[epsilon] = np.mean(
            [recall_at_k(pem.run_pem(users, config, seed=s).heavy_hitters, truth, 4) for s in range(4)]
        )
    assert recalls[8] == 1.0
    assert recalls[0.5] < recalls[8]


def test_pem_users_without_a_usable_item_still_report_and_are_never_returned():
    users = {u: {"x" * 10: 1} for u in range(500)}  # too long for 4 bytes
    users.update({1000 + u: {"ab": 1} for u in range(500)})
    result = pem.run_pem(users, pem.PEMConfig(epsilon=8, k=2, n_bytes=4, eta=6), seed=0)
    assert result.unusable == 500
    assert "ab" in result.heavy_hitters
    assert "" not in result.heavy_hitters


def test_pem_draws_one_item_per_user_weighted_by_local_count():
    # Every user holds "aa" three times and "bb" once: about 3/4 of the reports are "aa".
    users = {u: {"aa": 3, "bb": 1} for u in range(4000)}
    config = pem.PEMConfig(epsilon=8, k=2, n_bytes=2, eta=8, gamma=0)
    result = pem.run_pem(users, config, seed=1)
    assert result.heavy_hitters == ("aa", "bb")
    share = result.estimates[0] / (result.estimates[0] + result.estimates[1])
    assert share == pytest.approx(0.75, abs=0.1)


def test_run_pem_on_values_checks_the_width():
    with pytest.raises(ValueError):
        pem.run_pem_on_values(np.zeros((3, 5), np.uint8), pem.PEMConfig(1, 2, 4), seed=0)
