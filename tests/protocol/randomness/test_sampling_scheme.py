"""The sampling scheme: pinned values (the same since it was introduced), equal to a scalar
reference built from the spec (FIPS-197 pins the AES byte layout), equal across the per-round and
all-rounds paths, carrying no seed; and, statistically, uniform bottom-m samples, independent rounds,
uniform ranks and choice uniforms independent of the rank.

Statistical tests run at fixed seeds, so they are deterministic; each states the tolerance it was
designed with (the probability that a correct implementation fails at a random seed).
"""

import pickle

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from scipy import stats

from triehh_beam.protocol.randomness import keyed_hash, sampling
from triehh_beam.protocol.randomness.sampling import PassKeys, Sampler, user_id_bytes

SEED = bytes(range(100, 132))
IDS = ["u0", "user-17", 1234567890123456789, b"\xff\x00bytes", "é"]
USERS = [f"u{i}" for i in range(100)]
# Significance of each statistical test at its fixed seed; Z is its two-sided normal quantile.
ALPHA = 1e-3
Z = stats.norm.isf(ALPHA / 2)  # 3.29

# Round 3 ranks and choice uniforms of IDS, round 2 sample of USERS with m = 5: pinned when the
# scheme was introduced, so that a change to it (a resumed job drawing other users) fails here.
V2_GOLDEN = {
    b"": (
        [1392172353864050971, 8502727841216162278, 12806985667766396177, 567669274657744711,
         13396048262458679893],
        ["0x1.923d29b65c63ap-2", "0x1.68691392437dcp-1", "0x1.892bbb9768f40p-6", "0x1.d4bd2f2ccb6bbp-1",
         "0x1.7244c7805d7b3p-1"],
        ["u15", "u87", "u4", "u51", "u86"],
    ),
    b"job-identity": (
        [15731835758352859488, 11266387573629696300, 1734759394600752668, 5169380303495181296,
         7609906123440589923],
        ["0x1.772c3eeaf17a8p-2", "0x1.a6cb542decc08p-2", "0x1.d7a845b2cca58p-4", "0x1.00e6d7deab76bp-1",
         "0x1.1c34ab53bab48p-4"],
        ["u84", "u88", "u47", "u41", "u83"],
    ),
}

# The census fingerprint of "u0" (pinned before the current sampling scheme existed: the census key
# never changed).
CENSUS_GOLDEN = {b"": 0x153619648954CE50, b"job-identity": 0x60A3EF5CAE67CD18}
# Pinned on the commit before sampling scheme 1 was deleted: the derivations other than a round's
# ranks (a round's own uniform, a window's sampler, a federated choice word, the Bernoulli sample).
OTHER_GOLDEN = {
    "round_uniform": "0x1.07fcd9c7936d8p-4",  # round_uniform("phantoms", 2)
    # window_keys().sampler(1_700_000_000_000_000, b"\x01\x02").ranks(1, IDS)
    "window_ranks": [10984032065903994818, 10176595112947951605, 7817770907086801106, 7353631140964262258,
                     14242784376608793757],
    "choice_word": 8830031961994714066,  # choice_word(4, "u0")
    "bernoulli": [b"u41", b"u47", b"u84", b"u88"],  # bernoulli_sample(2, USERS, 0.05)
}


def _ids(count, seed=0):
    """``count`` distinct 19-digit decimal ids (as a production user id column looks)."""
    rng = np.random.default_rng(seed)
    values = np.unique(rng.integers(10**18, 10**19 - 1, int(count * 1.01) + 10, dtype=np.uint64))
    values = rng.permutation(values)[:count]
    assert len(values) == count
    return [str(v).encode() for v in values]


# --------------------------------------------------------------------------------------------
# exact values
# --------------------------------------------------------------------------------------------


def _aes_block(key_pair, block: bytes) -> bytes:
    key = key_pair[0].to_bytes(8, "little") + key_pair[1].to_bytes(8, "little")
    encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return encryptor.update(block) + encryptor.finalize()


def _v2_reference(identity, round_index, user_id):
    """(rank, choice uniform) of one user, straight from the spec in docs/protocol.md, one
    scalar call at a time (no numpy, no batch layout)."""
    uid = user_id_bytes(user_id)
    s = keyed_hash.siphash24(keyed_hash.derive_key(SEED, b"sample-user/v2", identity), uid)
    block = s.to_bytes(8, "little") + round_index.to_bytes(8, "little")
    a_r = keyed_hash.derive_key(SEED, f"sample/round={round_index}/v2".encode(), identity)
    c_r = keyed_hash.derive_key(SEED, f"choose/round={round_index}/v2".encode(), identity)
    rank = int.from_bytes(_aes_block(a_r, block)[:8], "little")
    word = int.from_bytes(_aes_block(c_r, block)[:8], "little")
    return rank, (word >> 11) / 2**53


def test_aes_byte_layout_is_fips197():
    # FIPS-197 appendix C.1: key 000102..0f, plaintext 00112233..ff -> 69c4e0d8 6a7b0430 d8cd...
    key = (int.from_bytes(bytes(range(8)), "little"), int.from_bytes(bytes(range(8, 16)), "little"))
    plaintext = bytes.fromhex("00112233445566778899aabbccddeeff")
    s, r = int.from_bytes(plaintext[:8], "little"), int.from_bytes(plaintext[8:], "little")
    words = sampling._aes128_low_words(key, np.array([s, s], dtype=np.uint64), r)
    assert [int(w) for w in words] == [int.from_bytes(bytes.fromhex("69c4e0d86a7b0430"), "little")] * 2
    assert _aes_block(key, plaintext).hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"


@pytest.mark.parametrize("identity", [b"", b"job-identity"])
def test_v2_equals_the_scalar_reference(identity):
    sampler = Sampler(SEED, identity)
    users = IDS + [f"user{i}" for i in range(40)] + [10**30, b"x" * 100]
    for round_index in (1, 2, 7, 255, 256, 10**6):
        reference = [_v2_reference(identity, round_index, u) for u in users]
        assert [int(x) for x in sampler.ranks(round_index, users)] == [rank for rank, _ in reference]
        assert list(sampler.choice_uniforms(round_index, users)) == [u for _, u in reference]
        assert sampler.choice_uniform(round_index, users[3]) == reference[3][1]


@pytest.mark.parametrize("identity", sorted(V2_GOLDEN))
def test_v2_is_pinned_and_deterministic(identity):
    ranks, uniforms, sample = V2_GOLDEN[identity]
    sampler = Sampler(SEED, identity)
    assert [int(x) for x in sampler.ranks(3, IDS)] == ranks
    assert [float(x).hex() for x in sampler.choice_uniforms(3, IDS)] == uniforms
    assert [u.decode() for u in sampler.sample(2, USERS, 5)] == sample
    again = Sampler(bytes(SEED), bytes(identity))
    assert list(again.ranks(3, IDS)) == ranks and again.sample(2, USERS, 5) == sampler.sample(2, USERS, 5)
    assert [float.fromhex(u) for u in uniforms] == [sampler.choice_uniform(3, u) for u in IDS]
    assert keyed_hash.siphash24(sampler.census_key().key, b"u0") == CENSUS_GOLDEN[identity]


def test_the_other_derivations_are_pinned():
    sampler = Sampler(SEED, b"job-identity")
    assert sampler.round_uniform("phantoms", 2).hex() == OTHER_GOLDEN["round_uniform"]
    window = sampler.window_keys().sampler(1_700_000_000_000_000, b"\x01\x02")
    assert [int(x) for x in window.ranks(1, IDS)] == OTHER_GOLDEN["window_ranks"]
    assert sampler.choice_word(4, "u0") == OTHER_GOLDEN["choice_word"]
    assert sampler.bernoulli_sample(2, USERS, 0.05) == OTHER_GOLDEN["bernoulli"]


def test_a_pass_carries_rounds_1_to_l_of_one_user_key():
    keys = Sampler(SEED).round_keys(1)
    with pytest.raises(ValueError):  # one pass, one user key
        PassKeys((keys, Sampler(SEED, b"other").round_keys(2)))
    with pytest.raises(ValueError):  # rounds 1..L in order
        PassKeys((Sampler(SEED).round_keys(2),))
    with pytest.raises(TypeError):  # the scheme is no longer a parameter
        Sampler(SEED, b"", 1)


# --------------------------------------------------------------------------------------------
# the all-rounds pass, keys
# --------------------------------------------------------------------------------------------


def test_ranks_all_equals_every_rounds_ranks():
    sampler = Sampler(SEED, b"pass")
    ids = _ids(3000) + [b"a", "é".encode(), b"y" * 70]
    data, offsets = keyed_hash.pack_messages(ids)
    pass_keys = sampler.pass_keys(12)
    assert pass_keys.max_rounds == 12
    ranks = pass_keys.ranks_all(data, offsets)
    assert ranks.shape == (12, len(ids)) and ranks.dtype == np.uint64
    for r in range(1, 13):
        np.testing.assert_array_equal(ranks[r - 1], pass_keys.round_keys(r).ranks_packed(data, offsets))
        np.testing.assert_array_equal(ranks[r - 1], sampler.ranks(r, ids))
        assert pass_keys.round_keys(r) == sampler.round_keys(r)
    assert len({row.tobytes() for row in ranks}) == 12  # rounds differ
    # A slice of the buffers (offsets not starting at 0), as an Arrow batch slice gives.
    np.testing.assert_array_equal(pass_keys.ranks_all(data, offsets[100:201]), ranks[:, 100:200])
    assert pass_keys.ranks_all(data, offsets[:1]).shape == (12, 0)


def test_v2_user_hashes_are_round_free_and_give_the_round_values():
    sampler = Sampler(SEED, b"j")
    data, offsets = keyed_hash.pack_messages(_ids(500))
    k3, k4 = sampler.round_keys(3), sampler.round_keys(4)
    s = k3.user_hashes_packed(data, offsets)
    np.testing.assert_array_equal(s, k4.user_hashes_packed(data, offsets))
    np.testing.assert_array_equal(k4.ranks_from_user_hashes(s), k4.ranks_packed(data, offsets))
    np.testing.assert_array_equal(k4.uniforms_from_user_hashes(s), k4.choice_uniforms_packed(data, offsets))


def test_choice_uniforms_are_on_the_53_bit_grid_in_0_1():
    sampler = Sampler(SEED)
    ids = _ids(20000, seed=1)
    data, offsets = keyed_hash.pack_messages(ids)
    for r in (1, 5):
        u = sampler.round_keys(r).choice_uniforms_packed(data, offsets)
        assert u.dtype == np.float64 and (u >= 0).all() and (u < 1).all()
        scaled = u * 2.0**53
        assert (scaled == np.floor(scaled)).all()
        # All 53 bits are used: some values are odd multiples of 2^-53 (about half).
        assert 0.45 < (scaled % 2 == 1).mean() < 0.55
        np.testing.assert_array_equal(u, sampler.round_keys(r).choice_uniforms(ids))


def test_keys_differ_per_round_purpose_and_identity():
    keys = []
    for identity in (b"", b"job"):
        sampler = Sampler(SEED, identity)
        for r in range(1, 6):
            round_keys = sampler.round_keys(r)
            keys += [round_keys.sample_key, round_keys.choice_key]
            assert round_keys.user_key == sampler.round_keys(1).user_key  # s is round-free
        keys += [sampler.round_keys(1).user_key, sampler.census_key().key]
    assert len(keys) == 2 * (5 * 2 + 2) and len(set(keys)) == len(keys)


def test_pickled_keys_carry_no_seed():
    sampler = Sampler(SEED, b"identity")
    for obj in (sampler.round_keys(3), sampler.pass_keys(10)):
        blob = pickle.dumps(obj)
        assert pickle.loads(blob) == obj  # the keys do travel...
        # ...the seed does not, in any of the forms it could be written in.
        for form in (SEED, SEED[:16], SEED[16:], SEED.hex().encode(), SEED[::-1]):
            assert form not in blob
        assert SEED.hex() not in repr(obj) and str(list(SEED)) not in repr(obj)


# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------


def _bottom_m(ranks: np.ndarray, m: int) -> np.ndarray:
    """Boolean (rounds, n) membership of each round's bottom-m (ranks distinct: checked)."""
    ordered = np.sort(ranks, axis=1)
    assert (np.diff(ordered, axis=1) > 0).all()  # no ties, so the bottom-m is exact
    return ranks <= ordered[:, m - 1 : m]


def test_inclusion_frequency_is_m_over_n():
    # n = 200 users, m = 20, R = 3,000 rounds drawn by one all-rounds pass. Each user's count
    # c_i ~ Binomial(R, m/n); the fixed sample size makes the counts negatively correlated, and
    # X = sum (c_i - Rp)^2 / (Rp(1-p)) * (n-1)/n is asymptotically chi-square with n-1 degrees
    # of freedom. Tolerance: p-value > ALPHA, and every count in the Bonferroni-corrected
    # two-sided binomial interval at ALPHA.
    n, m, rounds = 200, 20, 3000
    data, offsets = keyed_hash.pack_messages(_ids(n, seed=2))
    member = _bottom_m(Sampler(SEED, b"incl").pass_keys(rounds).ranks_all(data, offsets), m)
    assert (member.sum(axis=1) == m).all()
    c = member.sum(axis=0).astype(float)
    p = m / n
    statistic = ((c - rounds * p) ** 2).sum() / (rounds * p * (1 - p)) * (n - 1) / n
    assert stats.chi2.sf(statistic, n - 1) > ALPHA, statistic
    low, high = stats.binom.ppf([ALPHA / (2 * n), 1 - ALPHA / (2 * n)], rounds, p)
    assert low <= c.min() and c.max() <= high, (c.min(), c.max(), low, high)


def test_consecutive_round_samples_overlap_hypergeometrically():
    # Independent uniform m-subsets of n overlap in a Hypergeometric(n, m, m) number of users:
    # mean m^2/n, variance m (m/n) ((n-m)/n) ((n-m)/(n-1)). Overlaps of pairs (r, r+1) and
    # (r+1, r+2) are uncorrelated (given S_{r+1}, each has a constant conditional mean), so the
    # mean of R-1 overlaps has variance var/(R-1). Tolerance: |z| < Z (two-sided ALPHA), and
    # a chi-square of the overlap histogram against the pmf (bins with expected < 5 merged) with
    # p-value > ALPHA.
    n, m, rounds = 300, 30, 4000
    data, offsets = keyed_hash.pack_messages(_ids(n, seed=3))
    member = _bottom_m(Sampler(SEED, b"overlap").pass_keys(rounds).ranks_all(data, offsets), m)
    overlaps = (member[:-1] & member[1:]).sum(axis=1)
    law = stats.hypergeom(n, m, m)
    assert law.mean() == pytest.approx(m * m / n)
    z = (overlaps.mean() - m * m / n) / np.sqrt(law.var() / (rounds - 1))
    assert abs(z) < Z, z
    observed = np.bincount(overlaps, minlength=m + 1).astype(float)
    expected = law.pmf(np.arange(m + 1)) * (rounds - 1)
    # Merge the upper tail into one bin until every bin expects at least 5.
    cut = int(np.flatnonzero(expected >= 5).max())
    observed = np.append(observed[:cut], observed[cut:].sum())
    expected = np.append(expected[:cut], expected[cut:].sum())
    assert expected.min() >= 5
    statistic = ((observed - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(statistic, len(observed) - 1) > ALPHA, statistic


def test_v2_ranks_are_uniform_and_rounds_uncorrelated():
    # KS of 65,536 ranks / 2^64 against U[0, 1): p-value > ALPHA, in each of three rounds and
    # for the round-free s(u) itself. Ranks of one user in rounds r and r+1 are independent:
    # Pearson's correlation of n independent pairs is ~ N(0, 1/n); tolerance |r| < Z / sqrt(n).
    ids = _ids(65536, seed=4)
    data, offsets = keyed_hash.pack_messages(ids)
    sampler = Sampler(SEED, b"ks")
    ranks = sampler.pass_keys(3).ranks_all(data, offsets) / 2.0**64
    for row in ranks:
        assert stats.kstest(row, "uniform").pvalue > ALPHA
    s = sampler.round_keys(1).user_hashes_packed(data, offsets) / 2.0**64
    assert stats.kstest(s, "uniform").pvalue > ALPHA
    bound = Z / np.sqrt(len(ids))
    for a, b in ((ranks[0], ranks[1]), (ranks[1], ranks[2]), (s, ranks[0])):
        assert abs(np.corrcoef(a, b)[0, 1]) < bound
    # The rank's low bits are as uniform as its high ones (no structure from the block layout):
    # the low byte of 65,536 ranks is uniform on 256 values (chi-square, p-value > ALPHA).
    low = np.bincount((sampler.ranks(1, ids) & np.uint64(0xFF)).astype(np.int64), minlength=256)
    assert stats.chisquare(low).pvalue > ALPHA


def test_choice_uniforms_are_uniform_and_independent_of_the_rank():
    # KS of 65,536 choice uniforms against U[0, 1): p-value > ALPHA. Independence from the
    # same round's rank and from the next round's uniform: Pearson's and Spearman's correlations
    # of n independent pairs are ~ N(0, 1/n); tolerance |r| < Z / sqrt(n).
    ids = _ids(65536, seed=5)
    data, offsets = keyed_hash.pack_messages(ids)
    sampler = Sampler(SEED, b"choice")
    k1, k2 = sampler.round_keys(1), sampler.round_keys(2)
    u1, u2 = k1.choice_uniforms_packed(data, offsets), k2.choice_uniforms_packed(data, offsets)
    rank = k1.ranks_packed(data, offsets) / 2.0**64
    assert stats.kstest(u1, "uniform").pvalue > ALPHA
    bound = Z / np.sqrt(len(ids))
    for a, b in ((u1, rank), (u1, u2)):
        assert abs(np.corrcoef(a, b)[0, 1]) < bound
        assert abs(stats.spearmanr(a, b).statistic) < bound
    # The sampled users' uniforms (the bottom 2% by rank) are still uniform: KS p-value > ALPHA.
    sampled = u1[np.argsort(rank)[: len(ids) // 50]]
    assert stats.kstest(sampled, "uniform").pvalue > ALPHA
