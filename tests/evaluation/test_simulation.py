"""Tests of the in-memory TrieHH simulation: exact small cases, the keyed mode replayed against
the sampler, keyed vs numpy statistics, and Proposition 1.

Statistical tests run at fixed seeds (deterministic); each states its tolerance as the
probability that a correct implementation would fail at a random seed.
"""

import dataclasses

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.items.encoding import ItemEncoder, is_terminated
from triehh_beam.protocol.randomness.sampling import Sampler, user_id_bytes
from triehh_beam.protocol.rounds.vote import client_vote
from triehh_beam.reference.metrics import ground_truth, recall_at_k
from triehh_beam.reference.simulation import (RoundStats, SimulationResult, sampler_for_seed, simulate,
                                              simulate_many)

ENC = ItemEncoder(max_length=10)
ALPHA = 1e-3
MODES = ("keyed", "numpy")


def _levels_as_text(result):
    # Prefixes spelled as text, the terminator shown as "$".
    return [
        sorted(ENC.decode(p) + ("$" if is_terminated(p) else "") for p in level)
        for level in result.levels
    ]


# --------------------------------------------------------------------------------------------
# Three users, each holding hello, hey and hi (Algorithm 3), theta = 1, m = 3 = n.
#
# Everyone is sampled every round and a single vote keeps a prefix, so the trie is exactly the
# set of prefixes that the users' *fresh per-round choices* spell out: round 1 keeps "h"; round
# r >= 2 keeps seq[:r] for each user's round-r choice seq, if len(seq) >= r and seq[:r-1] was
# kept in round r-1. Hence (choices uniform over 3 items, independent across users and rounds):
#   "hi"    needs hi chosen by someone in rounds 2 and 3:            (19/27)^2
#   "hey"   needs he (hello or hey) in round 2, hey in rounds 3, 4:  (26/27)(19/27)^2
#   "hello" needs he in round 2, hello in rounds 3..6:               (26/27)(19/27)^4
# Any subset of the three can come out; "hello" needs 6 rounds (L >= 6).
# --------------------------------------------------------------------------------------------

THREE_USERS = {1: ["hello", "hey", "hi"], 2: ["hello", "hey", "hi"], 3: ["hello", "hey", "hi"]}
P_THREE = {
    "hi": (19 / 27) ** 2,
    "hey": (26 / 27) * (19 / 27) ** 2,
    "hello": (26 / 27) * (19 / 27) ** 4,
}


def _expected_three_user_levels(sampler):
    """The levels, derived directly from each user's keyed uniform (equal counts: the item of
    canonical index floor(3u) is chosen, canonical order being the sorted sequences)."""
    sequences = sorted(ENC.encode(w) for w in ("hello", "hey", "hi"))
    levels = []
    frontier = {()}
    for r in range(1, ENC.max_length + 1):
        level = set()
        for user in (1, 2, 3):
            chosen = sequences[int(3 * sampler.choice_uniform(r, user))]
            if len(chosen) >= r and chosen[: r - 1] in frontier:
                level.add(chosen[:r])
        if not level:
            break
        levels.append(frozenset(level))
        frontier = level
    return levels


@pytest.mark.parametrize("seed", range(12))
def test_three_users_keyed_run_is_exactly_the_users_choices(seed):
    result = simulate(THREE_USERS, ENC, theta=1, m=3, seed=seed)
    expected = _expected_three_user_levels(sampler_for_seed(seed))
    assert list(result.levels) == expected
    assert result.levels[0] == frozenset({("h",)})
    assert result.heavy_hitters <= {"hello", "hey", "hi"}
    assert result.heavy_hitters == {
        ENC.decode(p) for level in expected for p in level if is_terminated(p)
    }
    # The last level holds only complete items (nothing to extend: no further round), or the
    # round after it kept nothing (that round is run and counted), or L rounds ran.
    if len(expected) == ENC.max_length:
        want = (len(expected), "max_rounds", "reached max length")
    elif all(is_terminated(p) for p in expected[-1]):
        want = (len(expected), "nothing_to_extend", "no prefix left to extend")
    else:
        want = (len(expected) + 1, "empty_round", f"round {len(expected) + 1} added nothing")
    assert (result.rounds_run, result.stopped_because, result.stop.describe()) == want
    for stats_r, level in zip(result.round_stats, result.levels):
        assert stats_r.users_sampled == 3
        assert len(level) <= stats_r.votes_cast <= 3  # one vote per user, at least one per prefix
        assert stats_r.prefixes_kept == len(level)
    assert result.round_stats[0].votes_cast == 3


@pytest.mark.parametrize("mode", MODES)
def test_three_users_discovery_rates_match_exact_probabilities(mode):
    # 400 runs; each item's discovery count must lie in the two-sided binomial interval of the
    # exact probability at ALPHA / 3 (Bonferroni over the items).
    runs = 400
    results = simulate_many(THREE_USERS, ENC, 1, 3, range(runs), sampling=mode)
    for word, p in P_THREE.items():
        count = sum(word in r.heavy_hitters for r in results)
        low, high = stats.binom.ppf([ALPHA / 6, 1 - ALPHA / 6], runs, p)
        assert low <= count <= high, (word, count / runs, p)


@pytest.mark.parametrize("mode", MODES)
def test_algorithm_3_choice_follows_local_frequency(mode):
    # 40 users, each with 3 records of "x" and 1 of "y"; everyone sampled (m = n). Each round
    # every user picks "x" w.p. 3/4, independently, so the "y" votes of a round are
    # Binomial(40, 1/4) and "y" (two units with the terminator) is discovered w.p.
    # P(Bin(40, 1/4) >= theta)^2 exactly; likewise "x" with 3/4. 200 runs; each count within the
    # two-sided binomial interval at ALPHA / 2.
    users = {i: {"x": 3, "y": 1} for i in range(40)}
    theta, runs = 10, 200
    results = simulate_many(users, ENC, theta, 40, range(runs), sampling=mode)
    for word, share in (("x", 0.75), ("y", 0.25)):
        p = stats.binom.sf(theta - 1, 40, share) ** 2
        count = sum(word in r.heavy_hitters for r in results)
        low, high = stats.binom.ppf([ALPHA / 4, 1 - ALPHA / 4], runs, p)
        assert low <= count <= high, (word, count / runs, p)


def test_three_users_theta_above_m_discovers_nothing():
    result = simulate(THREE_USERS, ENC, theta=4, m=3, seed=0)
    assert result.levels == ()
    assert result.heavy_hitters == frozenset()
    assert result.rounds_run == 1
    assert result.round_stats == (RoundStats(1, 3, 3, 0),)


# --------------------------------------------------------------------------------------------
# Deterministic populations
# --------------------------------------------------------------------------------------------

SAME_WORD = {f"u{i}": ["data"] * (1 + i % 3) for i in range(40)}  # some users repeat the record


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_everyone_holds_the_same_word(mode, seed):
    found = simulate(SAME_WORD, ENC, theta=10, m=10, seed=seed, sampling=mode)
    assert _levels_as_text(found) == [["d"], ["da"], ["dat"], ["data"], ["data$"]]
    assert found.heavy_hitters == {"data"}
    assert found.heavy_hitter_sequences == {ENC.encode("data")}
    assert found.frequent_prefixes == frozenset()
    # "data$" is complete: no prefix is left to extend, so no sixth round is run.
    assert found.rounds_run == 5 and found.stopped_because == "nothing_to_extend"
    assert [s.votes_cast for s in found.round_stats] == [10, 10, 10, 10, 10]
    assert found.n_users == 40

    missed = simulate(SAME_WORD, ENC, theta=11, m=10, seed=seed, sampling=mode)
    assert missed.levels == () and missed.heavy_hitters == frozenset()

    stopped = simulate(SAME_WORD, ENC, theta=10, m=10, seed=seed, sampling=mode, max_rounds=3)
    assert _levels_as_text(stopped) == [["d"], ["da"], ["dat"]]
    assert stopped.stopped_because == "max_rounds" and stopped.rounds_run == 3
    assert stopped.frequent_prefixes == {("d", "a", "t")}
    assert stopped.heavy_hitters == frozenset()


@pytest.mark.parametrize("mode", MODES)
def test_a_user_with_many_records_votes_once_per_round(mode):
    # One user holds 10,000 records of "spam"; nineteen hold "ham" once. Everyone is sampled;
    # with theta = 2 "spam" (one user) can never be kept, "ham" always is.
    users = {"big": {"spam": 10_000}, **{f"u{i}": ["ham"] for i in range(19)}}
    result = simulate(users, ENC, theta=2, m=20, seed=3, sampling=mode)
    assert result.heavy_hitters == {"ham"}
    assert result.prefixes == {("h",), ("h", "a"), ("h", "a", "m"), ("h", "a", "m", "")}
    for round_stats in result.round_stats:
        assert round_stats.users_sampled == 20
        assert round_stats.votes_cast <= 20
    # Round 1: the "s" prefix got exactly one vote (not 10,000): 20 votes in all.
    assert result.round_stats[0].votes_cast == 20 and result.round_stats[0].prefixes_kept == 1


@pytest.mark.parametrize("mode", MODES)
def test_too_long_items_drop_or_truncate(mode):
    enc = ItemEncoder(max_length=5)
    users = {i: ["abcdefgh"] for i in range(20)}
    users[99] = ["ab"]  # one short item, below theta
    dropped = simulate(users, enc, theta=5, m=21, seed=0, sampling=mode)
    assert dropped.levels == () and dropped.records_too_long == 20
    # The users with only too-long items are still sampled: they just send nothing.
    assert dropped.round_stats == (RoundStats(1, 21, 1, 0),)
    assert dropped.n_users == 21

    truncated = simulate(users, enc, theta=5, m=21, seed=0, sampling=mode, too_long="truncate")
    assert truncated.heavy_hitters == frozenset()
    assert truncated.frequent_prefixes == {tuple("abcde")}
    assert truncated.stopped_because == "max_rounds" and truncated.rounds_run == 5
    assert truncated.records_too_long == 20


def test_empty_items_empty_users_and_equivalent_ids():
    users = {42: ["x"], "42": ["x", ""], b"7": ["x"], "nobody": [], "zero": {"x": 0}}
    result = simulate(users, ENC, theta=2, m=10, seed=1)
    assert result.n_users == 2  # 42 == "42"; "nobody" and "zero" hold no record
    assert result.records_empty == 1
    assert result.heavy_hitters == {"x"}
    assert users["42"] == ["x", ""]  # the caller's data is untouched

    for mode in MODES:
        empty = simulate({}, ENC, theta=1, m=10, seed=1, sampling=mode)
        assert empty.levels == () and empty.rounds_run == 1 and empty.n_users == 0
        assert empty.round_stats == (RoundStats(1, 0, 0, 0),)
        nobody = simulate(SAME_WORD, ENC, theta=1, m=0, seed=1, sampling=mode)
        assert nobody.levels == () and nobody.round_stats == (RoundStats(1, 0, 0, 0),)


def test_unicode_and_dollar_items_are_discovered_decoded():
    words = ["café", "中文", "$", "a$b", "👍🏽"]
    users = {i: [words[i % len(words)]] for i in range(50)}
    result = simulate(users, ItemEncoder(unit_size=2, max_length=4), theta=3, m=50, seed=0)
    assert result.heavy_hitters == set(words)


# --------------------------------------------------------------------------------------------
# The keyed mode is exactly the production draws
# --------------------------------------------------------------------------------------------


def _replay_keyed(users, theta, m, sampler, rounds):
    """The protocol replayed straight from Sampler and client_vote, for comparison."""
    weighted = {
        user_id_bytes(u): {ENC.encode(item): items.count(item) for item in set(items)}
        for u, items in users.items()
    }
    ids = list(users)
    levels, frontier = [], {()}
    for r in range(1, rounds + 1):
        tally = {}
        for user in sampler.sample(r, ids, m):
            vote = client_vote(weighted[user], frontier, r, sampler.choice_uniform(r, user))
            if vote is not None:
                tally[vote] = tally.get(vote, 0) + 1
        kept = frozenset(p for p, c in tally.items() if c >= theta)
        if not kept:
            break
        levels.append(kept)
        frontier = kept
    return levels


def test_keyed_mode_replays_sampler_and_client_vote_exactly():
    rng = np.random.default_rng(5)
    vocab = ["to", "tea", "ten", "ted", "a", "an", "in", "inn"]
    p = [0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05]
    users = {
        f"user{i}": [str(w) for w in rng.choice(vocab, size=int(rng.integers(1, 4)), p=p)]
        for i in range(300)
    }
    for seed in range(3):
        sampler = Sampler(bytes([seed]) * 24)
        result = simulate(users, ENC, theta=4, m=60, seed=sampler)
        assert list(result.levels) == _replay_keyed(users, 4, 60, sampler, ENC.max_length)
        assert result.heavy_hitters  # the comparison is not vacuous
    # An int seed is the 32-byte big-endian secret seed.
    explicit = Sampler((9).to_bytes(32, "big"))
    assert simulate(users, ENC, 4, 60, seed=9) == simulate(users, ENC, 4, 60, seed=explicit)


def test_runs_are_reproducible_and_simulate_many_matches_simulate():
    users = {i: ["ab", "ac", "b"][: 1 + i % 3] for i in range(100)}
    for mode in MODES:
        many = simulate_many(users, ENC, 3, 30, [4, 5, 4], sampling=mode)
        assert many[0] == many[2] == simulate(users, ENC, 3, 30, 4, sampling=mode)
        assert len(many) == 3


def test_results_carry_no_per_prefix_counts():
    # The privacy habit: a result exposes the trie and per-round totals, never a vote count
    # attached to a prefix.
    assert {f.name for f in dataclasses.fields(RoundStats)} == {
        "round_index",
        "users_sampled",
        "votes_cast",
        "prefixes_kept",
    }
    result = simulate(SAME_WORD, ENC, theta=10, m=10, seed=0)
    for field in dataclasses.fields(SimulationResult):
        value = getattr(result, field.name)
        assert not isinstance(value, dict), field.name
    for level in result.levels:
        assert all(isinstance(p, tuple) for p in level)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(theta=0),
        dict(m=-1),
        dict(sampling="random"),
        dict(too_long="keep"),
        dict(max_rounds=0),
        dict(seed=-1),
        dict(seed=-1, sampling="numpy"),
        dict(seed=b"too short"),
        dict(seed=1.5),
        dict(seed=1.5, sampling="numpy"),
    ],
)
def test_invalid_parameters_are_refused(kwargs):
    arguments = dict(users=SAME_WORD, encoder=ENC, theta=2, m=5, seed=0) | kwargs
    with pytest.raises((TypeError, ValueError)):
        simulate(**arguments)


# --------------------------------------------------------------------------------------------
# Statistics: keyed vs numpy on a Zipf population
# --------------------------------------------------------------------------------------------


def _zipf_population(n=1200, vocab=60, s=1.1, multi=0.15, seed=0):
    """n users; most hold one word drawn from a Zipf(s) law over a vocabulary of words on an
    8-letter alphabet (so prefixes are shared), a share ``multi`` hold 2-3 words with counts."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefgh")
    words = set()
    while len(words) < vocab:
        words.add("".join(rng.choice(letters, size=int(rng.integers(2, 7)))))
    words = sorted(words)
    rng.shuffle(words)
    p = 1 / np.arange(1, vocab + 1) ** s
    p /= p.sum()
    users = {}
    for u in range(n):
        if rng.random() < multi:
            picks = rng.choice(vocab, size=int(rng.integers(2, 4)), p=p)
            users[f"user{u}"] = {words[i]: int(rng.integers(1, 5)) for i in picks}
        else:
            users[f"user{u}"] = [words[rng.choice(vocab, p=p)]]
    return users


def test_keyed_and_numpy_modes_agree_on_mean_recall():
    # 20 runs per mode. Tolerance: the difference of means within 4 standard errors (Welch),
    # a two-sided false-alarm rate of about 6e-5 under the normal approximation.
    users = _zipf_population()
    truth = ground_truth(users).user_counts
    means, variances = {}, {}
    for mode in MODES:
        results = simulate_many(users, ENC, 6, 300, range(20), sampling=mode)
        recalls = np.array([recall_at_k(r.heavy_hitters, truth, 20) for r in results])
        means[mode], variances[mode] = recalls.mean(), recalls.var(ddof=1)
    assert 0.1 < means["keyed"] < 0.9  # an informative regime, neither trivial nor hopeless
    standard_error = np.sqrt((variances["keyed"] + variances["numpy"]) / 20)
    difference = abs(means["keyed"] - means["numpy"])
    assert difference <= 4 * standard_error + 1e-12, (means, standard_error)


# --------------------------------------------------------------------------------------------
# Proposition 1: with no shared prefix, discovery rate >= P(X >= theta)^len
# --------------------------------------------------------------------------------------------

# Items with distinct first units (so no two sequences share a prefix): frequency f in users.
NO_SHARED = {"abc": 30, "bc": 50, "cdefg": 50, "dxyz": 70, "eabcdef": 100, "fgh": 150, "gh": 250}
N_USERS, M, THETA = 1000, 100, 5


def _no_shared_prefix_population():
    users = {}
    uid = 0
    for word, f in NO_SHARED.items():
        for _ in range(f):
            users[uid] = [word]
            uid += 1
    # The rest hold singletons whose first characters are unique (CJK block): below theta.
    while uid < N_USERS:
        users[uid] = [chr(0x4E00 + uid) + "x"]
        uid += 1
    return users


def _proposition_1_bound(f, length):
    # X ~ Hypergeometric(population n, successes f, draws m); scipy's order is (M, n, N).
    return stats.hypergeom(N_USERS, f, M).sf(THETA - 1) ** length


@pytest.mark.parametrize("mode", MODES)
def test_discovery_rate_is_not_below_proposition_1_bound(mode):
    # 250 runs. For each item, its discovery count D ~ Binomial(R, p) with p >= bound. Fail if
    # D falls below the lower ALPHA / 7 binomial quantile of the bound (Bonferroni over the 7
    # items: a correct implementation fails with probability < ALPHA).
    # This population has no shared prefix and one item per user (Algorithm 1), where the bound
    # is exact; so the rate must not be far above it either: same test on the upper side.
    runs = 250
    users = _no_shared_prefix_population()
    results = simulate_many(users, ENC, THETA, M, range(runs), sampling=mode)
    assert all(r.n_users == N_USERS for r in results)
    for word, f in NO_SHARED.items():
        bound = _proposition_1_bound(f, len(ENC.encode(word)))
        count = sum(word in r.heavy_hitters for r in results)
        lower = stats.binom.ppf(ALPHA / 7, runs, bound)
        upper = stats.binom.isf(ALPHA / 7, runs, bound)
        assert count >= lower, (word, count / runs, bound)
        assert count <= upper, (word, count / runs, bound)
    # The singletons can never reach theta.
    assert all(r.heavy_hitters <= set(NO_SHARED) for r in results)
