"""``sampling.WindowKeys``: each release of an event-time window samples with its own keys,
derived from the seed, the job's identity, the window's start and the release's nonce. The same
release always draws the same users (restarts, retries resuming its committed nonce); two
windows, two releases of one window, or a window and the batch job draw independently (checked
against the closed forms of independent uniform draws). ``real_users_sampled``, the real users
of a window planned for a declared population, follows the hypergeometric law."""

import numpy as np
import pytest

from triehh_beam.protocol.randomness.sampling import Sampler

SEED = bytes(range(32))
IDENTITY = b'{"job": "window keys test"}'
HOUR = 3600 * 1_000_000
START = 1_763_892_000 * 1_000_000
USERS = [f"user-{i}" for i in range(20_000)]
M = 2_000  # sampled of N = 20,000
NONCE = bytes(range(16))


def _sample(sampler: Sampler, round_index: int = 1):
    return set(sampler.sample(round_index, USERS, M))


def test_the_same_window_draws_the_same_users_from_a_fresh_derivation():
    first = Sampler(SEED, IDENTITY).window_keys().sampler(START, NONCE)
    again = Sampler(SEED, IDENTITY).window_keys().sampler(int(np.int64(START)), bytes(NONCE))  # numpy starts too
    assert _sample(first) == _sample(again)
    assert first.choice_uniform(3, "user-7") == again.choice_uniform(3, "user-7")


@pytest.mark.parametrize("other", ["next window", "other release", "other seed", "other identity", "batch job"])
def test_another_window_release_seed_identity_or_the_batch_job_draws_independently(other):
    window = Sampler(SEED, IDENTITY).window_keys().sampler(START, NONCE)
    sampler = {
        "next window": Sampler(SEED, IDENTITY).window_keys().sampler(START + HOUR, NONCE),
        "other release": Sampler(SEED, IDENTITY).window_keys().sampler(START, bytes(16)),
        "other seed": Sampler(bytes(32), IDENTITY).window_keys().sampler(START, NONCE),
        "other identity": Sampler(SEED, IDENTITY + b" ").window_keys().sampler(START, NONCE),
        "batch job": Sampler(SEED, IDENTITY),
    }[other]
    # Two independent uniform samples of M of N share a hypergeometric number of users:
    # mean M^2/N = 200, standard deviation ~12.7; 6 standard deviations either side.
    overlap = len(_sample(window) & _sample(sampler))
    assert abs(overlap - M * M / len(USERS)) < 6 * 12.7, overlap
    # And the item choices are uncorrelated uniforms: Pearson r ~ N(0, 1/sqrt(N)), 6 sd.
    a = window.choice_uniforms(1, USERS)
    b = sampler.choice_uniforms(1, USERS)
    assert abs(np.corrcoef(a, b)[0, 1]) < 6 / np.sqrt(len(USERS))


def test_a_window_start_must_be_integer_microseconds():
    keys = Sampler(SEED, IDENTITY).window_keys()
    for start in (1.5, "0", True, None):
        with pytest.raises(TypeError, match="integer microseconds"):
            keys.sampler(start, NONCE)
    with pytest.raises(ValueError, match="nonce"):
        keys.sampler(START, b"")


def test_the_window_key_is_not_the_seed_and_the_seed_is_not_shown():
    keys = Sampler(SEED, IDENTITY).window_keys()
    assert SEED[:16] not in keys.key and len(keys.key) >= 16  # a derived key (128 bits), a valid Sampler seed
    assert SEED.hex() not in repr(keys) and keys.key.hex() not in repr(keys)


@pytest.mark.parametrize("declared, population, m", [(2_000, 1_500, 200), (453, 452, 24), (500, 40, 60)])
def test_real_users_sampled_is_hypergeometric(declared, population, m):
    # 4,000 windows' round-1 draws under the keys of fixed nonces, against the closed form
    # Hypergeometric(N, n, m): the mean within 5 standard errors, and the total variation
    # distance of the empirical law below 0.05 (its expectation here is below 0.03).
    from scipy import stats

    from triehh_beam.protocol.randomness.sampling import real_users_sampled

    keys = Sampler(SEED, IDENTITY).window_keys()
    draws = np.array([real_users_sampled(keys.sampler(START + i * HOUR, NONCE).round_uniform("phantoms", 1),
                                         declared, population, m) for i in range(4_000)])
    law = stats.hypergeom(declared, population, m)
    assert abs(draws.mean() - law.mean()) < 5 * law.std() / np.sqrt(len(draws))
    support = np.arange(draws.min(), draws.max() + 1)
    empirical = np.array([(draws == k).mean() for k in support])
    missing = 1 - law.pmf(support).sum()  # the closed form's mass outside what was drawn
    assert 0.5 * (np.abs(empirical - law.pmf(support)).sum() + missing) < 0.05
    assert draws.min() >= max(0, m - (declared - population)) and draws.max() <= min(m, population)


def test_real_users_sampled_without_phantoms_is_min_of_m_and_n():
    from triehh_beam.protocol.randomness.sampling import real_users_sampled

    assert real_users_sampled(0.5, 1_000, 1_000, 80) == 80
    assert real_users_sampled(0.99, 1_000, 5_000, 80) == 80
    assert real_users_sampled(0.0, 10, 3, 5) == 0  # u = 0: the support's lowest (5 - 7 phantoms < 0)
