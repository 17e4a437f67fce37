"""``sampling.WindowKeys``: each event-time window samples with its own keys, derived from the
seed, the job's identity and the window's start. The same window always draws the same users
(restarts, retries, the bounded replay); two windows, or a window and the batch job, draw
independently (checked against the closed forms of independent uniform draws)."""

import numpy as np
import pytest

from triehh_beam.protocol.sampling import Sampler

SEED = bytes(range(32))
IDENTITY = b'{"job": "window keys test"}'
HOUR = 3600 * 1_000_000
START = 1_763_892_000 * 1_000_000
USERS = [f"user-{i}" for i in range(20_000)]
M = 2_000  # sampled of N = 20,000


def _sample(sampler: Sampler, round_index: int = 1):
    return set(sampler.sample(round_index, USERS, M))


def test_the_same_window_draws_the_same_users_from_a_fresh_derivation():
    first = Sampler(SEED, IDENTITY).window_keys().sampler(START)
    again = Sampler(SEED, IDENTITY).window_keys().sampler(int(np.int64(START)))  # numpy starts too
    assert _sample(first) == _sample(again)
    assert first.choice_uniform(3, "user-7") == again.choice_uniform(3, "user-7")


@pytest.mark.parametrize("other", ["next window", "other seed", "other identity", "batch job"])
def test_another_window_seed_identity_or_the_batch_job_draws_independently(other):
    window = Sampler(SEED, IDENTITY).window_keys().sampler(START)
    sampler = {
        "next window": Sampler(SEED, IDENTITY).window_keys().sampler(START + HOUR),
        "other seed": Sampler(bytes(32), IDENTITY).window_keys().sampler(START),
        "other identity": Sampler(SEED, IDENTITY + b" ").window_keys().sampler(START),
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
            keys.sampler(start)


def test_the_window_key_is_not_the_seed_and_the_seed_is_not_shown():
    keys = Sampler(SEED, IDENTITY).window_keys()
    assert SEED[:16] not in keys.key and len(keys.key) >= 16  # a derived key (128 bits), a valid Sampler seed
    assert SEED.hex() not in repr(keys) and keys.key.hex() not in repr(keys)
