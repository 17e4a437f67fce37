"""The choice word and its uniform: ``sampling.uniform_from_word`` (what a federated device
applies to its invitation's word) is exactly the central path's batch rule, and the words a
server sends (``Sampler.choice_word``, ``RoundKeys.choice_words_packed``) give exactly the
central choice uniforms, the pinned values included."""

from fractions import Fraction

import numpy as np
import pytest

from triehh_beam.protocol.randomness import keyed_hash, sampling
from triehh_beam.protocol.randomness.sampling import Sampler, uniform_from_word

from tests.protocol.randomness.test_sampling_scheme import IDS, SEED, V2_GOLDEN

EDGES = [0, 1, 2**11 - 1, 2**11, 2**11 + 1, 2**52, 2**53, 2**63 - 1, 2**63, 2**64 - 2**11 - 1, 2**64 - 2**11,
         2**64 - 2, 2**64 - 1]


def test_uniform_from_word_is_the_top_53_bits_over_2_to_the_53():
    for word in EDGES:
        u = uniform_from_word(word)
        assert Fraction(u) == Fraction(word >> 11, 2**53)
        assert 0.0 <= u < 1.0
    assert uniform_from_word(0) == 0.0
    assert uniform_from_word(2**64 - 1) == 1.0 - 2.0**-53  # the largest double below 1
    assert uniform_from_word(2**11 - 1) == 0.0 and uniform_from_word(2**11) == 2.0**-53
    assert uniform_from_word(np.uint64(2**63)) == 0.5


def test_uniform_from_word_equals_the_batch_rule_on_every_word():
    rng = np.random.default_rng(13)
    words = np.concatenate([rng.integers(0, 2**64 - 1, 200_000, dtype=np.uint64, endpoint=True),
                            np.array(EDGES, dtype=np.uint64)])
    batch = sampling._uniforms(words)
    one_by_one = np.array([uniform_from_word(int(w)) for w in words.tolist()])
    np.testing.assert_array_equal(batch, one_by_one)


@pytest.mark.parametrize("word, error", [(-1, ValueError), (2**64, ValueError), (True, TypeError),
                                         (0.5, TypeError), ("7", TypeError)])
def test_uniform_from_word_refuses_what_is_not_a_64_bit_word(word, error):
    with pytest.raises(error):
        uniform_from_word(word)


@pytest.mark.parametrize("identity", [b"", b"job-identity"])
def test_the_words_give_the_pinned_central_uniforms(identity):
    sampler = Sampler(SEED, identity)
    golden = V2_GOLDEN[identity][1]  # round 3, IDS
    words = [sampler.choice_word(3, user) for user in IDS]
    assert [uniform_from_word(w) for w in words] == [float.fromhex(h) for h in golden]
    data, offsets = keyed_hash.pack_messages(sampling.user_id_bytes(u) for u in IDS)
    packed = sampler.round_keys(3).choice_words_packed(data, offsets)
    assert packed.dtype == np.uint64 and packed.tolist() == words


def test_word_and_uniform_agree_for_every_user_and_round():
    sampler = Sampler(SEED, b"federated")
    users = [f"device-{i}" for i in range(500)] + [7, b"\x00raw"]
    for r in (1, 2, 9):
        uniforms = sampler.choice_uniforms(r, users)
        assert [uniform_from_word(sampler.choice_word(r, u)) for u in users] == uniforms.tolist()
    # The word is a function of (seed, identity, round, user) only, like the uniform.
    assert sampler.choice_word(2, "device-3") == Sampler(SEED, b"federated").choice_word(2, "device-3")
    assert sampler.choice_word(2, "device-3") != sampler.choice_word(3, "device-3")
