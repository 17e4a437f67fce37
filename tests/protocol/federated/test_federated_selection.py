"""The federated selection is the central job's sample: same devices, same choice draws."""

import numpy as np
import pytest

from triehh_beam.protocol.federated.selection import TOKEN_BYTES, Registry, round_tokens, select_round
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.randomness.sampling import Sampler, uniform_from_word

SEED = bytes(range(32))


def test_selection_is_the_central_sample_with_its_choice_uniforms():
    sampler = Sampler(SEED, b"job")
    ids = [f"device-{i}" for i in range(5000)] + [7, 8, 9]
    registry = Registry.from_ids(ids + ids[:100])  # duplicates count once
    assert len(registry) == 5003
    for r in (1, 2, 5):
        selection = select_round(sampler, registry, r, batch_size=300)
        assert selection.device_ids == sorted(sampler.sample(r, ids, 300))
        uniforms = [uniform_from_word(int(w)) for w in selection.choice_words]
        assert np.array_equal(uniforms, sampler.choice_uniforms(r, selection.device_ids))


def test_bernoulli_selection_is_the_central_bernoulli_sample():
    sampler = Sampler(SEED, b"job")
    ids = range(20000)
    selection = select_round(sampler, Registry.from_ids(ids), 3, probability=0.05)
    assert selection.device_ids == sampler.bernoulli_sample(3, ids, 0.05)
    assert abs(len(selection) - 1000) < 6 * (20000 * 0.05 * 0.95) ** 0.5


def test_tokens_are_keyed_per_round_and_job():
    registry = Registry.from_ids(range(2000))
    a = select_round(Sampler(SEED, b"job"), registry, 1, batch_size=2000)
    b = select_round(Sampler(SEED, b"job"), registry, 2, batch_size=2000)
    c = select_round(Sampler(SEED, b"other job"), registry, 1, batch_size=2000)
    assert all(len(t) == TOKEN_BYTES for t in a.tokens)
    assert len(a.token_set()) == 2000  # no collisions
    assert not a.token_set() & b.token_set() and not a.token_set() & c.token_set()
    again = select_round(Sampler(SEED, b"job"), registry, 1, batch_size=2000)
    assert again.tokens == a.tokens  # a resumed server issues the same tokens


def test_tokens_are_the_documented_siphash_pair():
    sampler = Sampler(SEED, b"job")
    data, offsets = keyed_hash.pack_messages([b"alice"])
    keys = [keyed_hash.derive_key(SEED, f"federated-token/round=4/{h}".encode(), b"job") for h in (0, 1)]
    expected = b"".join(keyed_hash.siphash24(k, b"alice").to_bytes(8, "little") for k in keys)
    assert round_tokens(sampler, 4, data, offsets) == [expected]


def test_refusals():
    registry = Registry.from_ids(["a", "b"])
    with pytest.raises(ValueError, match="not both"):
        select_round(Sampler(SEED), registry, 1, batch_size=1, probability=0.5)
    with pytest.raises(ValueError, match="empty user id"):
        Registry.from_ids(["a", ""])
    with pytest.raises(ValueError, match="numbered from 1"):
        select_round(Sampler(SEED), registry, 0, batch_size=1)
