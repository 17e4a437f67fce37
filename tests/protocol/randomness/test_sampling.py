"""Sampling: exactly m distinct users per round, a keyed function of (seed, round, user), uniform,
the same in another process; SmallestRanks merges in any order.

Statistical tests run at fixed seeds, so they are deterministic; each states the tolerance it
was designed with (the probability that a correct implementation fails at a random seed).
"""

import collections
import itertools
import json
import os
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.randomness.bottom_m import bottom_m
from triehh_beam.protocol.randomness.sampling import (Sampler, SmallestRanks, rank_prefilter_bound,
                                                      user_id_bytes)

SEED = bytes(range(100, 132))
# Significance used by the statistical tests (per test, at the fixed seed).
ALPHA = 1e-3


# --------------------------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------------------------


def test_user_id_canonical_bytes():
    assert user_id_bytes(42) == user_id_bytes("42") == user_id_bytes(b"42") == b"42"
    assert user_id_bytes(np.int64(42)) == b"42"
    assert user_id_bytes("é") == "é".encode("utf-8")
    for bad in (True, 4.2, None):
        with pytest.raises(TypeError):
            user_id_bytes(bad)
    with pytest.raises(ValueError):
        user_id_bytes("")


@pytest.mark.parametrize("m", [0, 1, 7, 50, 80])
def test_sample_has_exactly_m_distinct_users(m):
    users = [f"user-{i}" for i in range(50)]
    sample = Sampler(SEED).sample(1, users, m)
    assert len(sample) == min(m, 50)
    assert len(set(sample)) == len(sample)
    assert set(sample) <= {user_id_bytes(u) for u in users}


def test_sample_is_bottom_m_so_samples_nest_and_rounds_differ():
    sampler = Sampler(SEED)
    users = list(range(200))
    small, large = sampler.sample(3, users, 10), sampler.sample(3, users, 30)
    assert large[:10] == small
    assert sampler.sample(3, reversed(users), 10) == small  # input order does not matter
    assert sampler.sample(4, users, 10) != small
    assert Sampler(SEED[::-1]).sample(3, users, 10) != small
    with pytest.raises(ValueError):
        sampler.sample(0, users, 10)
    with pytest.raises(ValueError):
        sampler.sample(1, users, -1)


def test_sample_with_many_records_per_user_still_returns_distinct_users():
    # user 0 has 5,000 records, the others one or two; ids arrive in several equivalent forms.
    records = [0] * 5000 + list(range(1, 40)) + [str(i) for i in range(1, 40)] + [b"7"] * 10
    sampler = Sampler(SEED)
    for round_index in range(1, 30):
        sample = sampler.sample(round_index, records, 12)
        assert len(sample) == len(set(sample)) == 12
        assert sample == sampler.sample(round_index, range(40), 12)


_SUBPROCESS_CODE = """
import json, sys
from triehh_beam.protocol.randomness.sampling import Sampler
sampler = Sampler(bytes.fromhex(sys.argv[1]))
users = ["u%d" % i for i in range(300)]
print(json.dumps({
    "sample": [u.decode() for u in sampler.sample(5, users, 20)],
    "u": [sampler.choice_uniform(5, u) for u in users[:20]],
}))
"""


def test_sample_and_choice_are_identical_in_another_process():
    sampler = Sampler(SEED)
    users = [f"u{i}" for i in range(300)]
    here = {
        "sample": [u.decode() for u in sampler.sample(5, users, 20)],
        "u": [sampler.choice_uniform(5, u) for u in users[:20]],
    }
    env = dict(os.environ, PYTHONHASHSEED="12345")  # a different str hash salt than ours
    env["PYTHONPATH"] = os.pathsep.join(
        [str(pathlib.Path(__file__).resolve().parents[3])]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    out = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS_CODE, SEED.hex()],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(out.stdout) == here


def test_sample_is_uniform():
    # 50 users, m = 10, 2,000 rounds: each inclusion count c_i ~ Binomial(R, p = m/n). Sampling
    # a fixed-size set makes the counts negatively correlated; for that case
    # X = sum (c_i - Rp)^2 / (Rp(1-p)) * (n-1)/n is asymptotically chi-square with n-1 degrees
    # of freedom. Tolerance: fail below p-value ALPHA (1e-3), plus each count within the
    # Bonferroni-corrected two-sided binomial interval at ALPHA.
    n, m, rounds = 50, 10, 2000
    users = [f"user{i}" for i in range(n)]
    sampler = Sampler(SEED)
    counts = collections.Counter()
    for r in range(1, rounds + 1):
        counts.update(sampler.sample(r, users, m))
    c = np.array([counts[user_id_bytes(u)] for u in users], dtype=float)
    assert c.sum() == rounds * m
    p = m / n
    statistic = ((c - rounds * p) ** 2).sum() / (rounds * p * (1 - p)) * (n - 1) / n
    assert stats.chi2.sf(statistic, n - 1) > ALPHA, statistic
    low, high = stats.binom.ppf([ALPHA / (2 * n), 1 - ALPHA / (2 * n)], rounds, p)
    assert low <= c.min() and c.max() <= high, (c.min(), c.max(), low, high)


def test_choice_uniform_is_uniform_and_deterministic():
    sampler = Sampler(SEED)
    values = [sampler.choice_uniform(r, u) for r in range(1, 11) for u in range(200)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert stats.kstest(values, "uniform").pvalue > ALPHA
    assert sampler.choice_uniform(3, 17) == sampler.choice_uniform(3, "17")
    # Independent of the sampling rank: a different derived key.
    ranks = sampler.ranks(1, range(200)) / 2.0**64
    assert abs(stats.spearmanr(ranks, values[:200]).statistic) < 0.25


def _merged(batches, m, order, tree):
    """Fill one accumulator per batch, then merge them in ``order`` as a chain or a tree."""
    accumulators = []
    for i in order:
        acc = SmallestRanks(m)
        ranks, ids = batches[i]
        acc.add_batch(np.array(ranks, dtype=np.uint64), ids)
        accumulators.append(acc)
    if tree:
        while len(accumulators) > 1:
            pairs = [accumulators[i : i + 2] for i in range(0, len(accumulators), 2)]
            accumulators = [p[0].merge(p[1]) if len(p) == 2 else p[0] for p in pairs]
        return accumulators[0].extract()
    result = accumulators[0]
    for acc in accumulators[1:]:
        result = result.merge(acc)
    return result.extract()


@pytest.mark.parametrize("m", [1, 5, 17, 100])
def test_smallest_ranks_merge_order_independent(m):
    rng = random.Random(m)
    # Few distinct ranks, so ties between users are frequent (broken by the id bytes); users
    # repeat across batches, always with their own rank (as a user with many records does).
    rank_of = {f"u{i:03d}".encode(): rng.randrange(30) for i in range(60)}
    records = [u for u in rank_of for _ in range(rng.randrange(1, 4))]
    rng.shuffle(records)
    batches = []
    for start in range(0, len(records), 13):
        ids = records[start : start + 13]
        batches.append(([rank_of[u] for u in ids], ids))
    expected = sorted({(r, u) for u, r in rank_of.items()})[:m]
    orders = [list(range(len(batches))), list(reversed(range(len(batches))))]
    for _ in range(5):
        orders.append(rng.sample(range(len(batches)), len(batches)))
    for order, tree in itertools.product(orders, (False, True)):
        assert _merged(batches, m, order, tree) == expected

    # One accumulator fed batch after batch (the bound from a full accumulator applies).
    single = SmallestRanks(m)
    for ranks, ids in batches:
        single.add_batch(np.array(ranks, dtype=np.uint64), ids)
    assert single.extract() == expected
    assert single.threshold() == expected[-1]


def test_smallest_ranks_edge_cases():
    empty = SmallestRanks(3)
    assert empty.extract() == [] and empty.threshold() is None
    zero = SmallestRanks(0)
    zero.add_batch(np.array([1, 2], dtype=np.uint64), [b"a", b"b"])
    assert zero.extract() == []
    acc = SmallestRanks(2)
    acc.add_batch(np.array([], dtype=np.uint64), [])
    acc.add_batch(np.array([5, 5, 5], dtype=np.uint64), [b"c", b"b", b"c"])
    assert acc.extract() == [(5, b"b"), (5, b"c")]
    merged = acc.merge(SmallestRanks(2, [(1, b"z")]))
    assert merged.extract() == [(1, b"z"), (5, b"b")]
    assert acc.extract() == [(5, b"b"), (5, b"c")]  # merge does not mutate its operands
    with pytest.raises(ValueError):
        SmallestRanks(-1)


def test_float_round_index_is_refused_or_equal_to_int_round():
    sampler = Sampler(SEED)
    users = range(100)
    try:
        other = sampler.sample(3.0, users, 10)
    except (TypeError, ValueError):
        return
    assert other == sampler.sample(3, users, 10)


@pytest.mark.parametrize("m", [0, 1, 7, 40, 500])
def test_bottom_m_is_the_m_smallest_distinct_pairs_at_their_first_row(m):
    rng = random.Random(m)
    for _ in range(20):
        # Few distinct ranks and ids: ties between users and repeated (rank, user) rows are common.
        rows = [(rng.randrange(25), f"u{rng.randrange(40)}".encode()) for _ in range(rng.randrange(0, 120))]
        ranks = np.array([r for r, _ in rows], dtype=np.uint64)
        ids = [u for _, u in rows]
        picked = bottom_m(ranks, ids, m)
        assert [rows[i] for i in picked] == sorted(set(rows))[:m]
        assert all(rows.index(rows[i]) == i for i in picked)  # the first row of each pair
    with pytest.raises(ValueError):
        bottom_m(np.zeros(2, dtype=np.uint64), [b"a"], 1)


def test_rank_prefilter_bound_is_the_beta_quantile_of_scipy_stats():
    # The bound inverts the incomplete beta with scipy.special (a lighter import than scipy.stats):
    # the same value as the Beta(m, n - m + 1) survival quantile, on a spread of sizes.
    rng = np.random.default_rng(27)
    for _ in range(200):
        n = int(10 ** rng.uniform(1, 9))
        m = int(rng.integers(1, n))
        for miss in (1e-12, 1e-6):
            expected = min(2**64 - 1, int(stats.beta.isf(miss, m, n - m + 1) * 2.0**64) + 1)
            assert rank_prefilter_bound(n, m, miss) == expected, (n, m, miss)


def test_users_required_is_the_size_of_the_bottom_m_sample_and_none_by_probability():
    """``users_required``: the one rule "min(m, n) unless sampling by probability", held to the
    size of the bottom-m sample ``Sampler.sample`` actually draws of n users."""
    from triehh_beam.protocol.randomness.sampling import real_users_sampled, users_required

    sampler = Sampler(bytes(32), b"users-required")
    for m, n in itertools.product((1, 5, 50), (0, 3, 50, 80)):
        drawn = len(sampler.sample(1, [f"u{i}" for i in range(n)], m))
        assert users_required(m, n) == drawn == min(m, n), (m, n)
        assert users_required(m, n, by_probability=True) is None  # a Bernoulli sample's size is random
        assert real_users_sampled(0.5, n, n, m) == drawn  # no phantom: the same rule
    assert users_required(5, None) is None  # n unknown: nothing to require
    with pytest.raises(ValueError, match="sample size"):
        users_required(None, 10)
