"""The mask generator against AES-256 in ECB mode on counter blocks (an independent derivation),
key agreement's symmetry and binding to its context, and the share encryption's authentication."""

import random

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from triehh_beam.protocol.secagg import crypto

CONTEXT = crypto.CohortContext("job", 3, 1)


def test_mask_is_the_aes_ctr_keystream_read_little_endian():
    seed = bytes(range(32))
    encryptor = Cipher(algorithms.AES(seed), modes.ECB()).encryptor()
    blocks = encryptor.update(b"".join(i.to_bytes(16, "big") for i in range(3))) + encryptor.finalize()
    expected = [int.from_bytes(blocks[4 * i:4 * i + 4], "little") for i in range(12)]
    assert crypto.expand_mask(seed, 12).tolist() == expected
    assert crypto.expand_mask(seed, 5).tolist() == expected[:5]


def test_context_bytes_are_as_documented():
    assert CONTEXT.to_bytes() == b"triehh-secagg-v1" + b"\x00\x00\x00\x03job" + b"\x00\x00\x00\x03\x00\x00\x00\x01"


def test_agreement_is_symmetric_and_bound_to_context_and_purpose():
    rng = random.Random(1).randbytes
    a, b = crypto.KeyPair.generate(rng), crypto.KeyPair.generate(rng)
    key = crypto.agree(a.private, b.public, CONTEXT, crypto.MASK_PURPOSE)
    assert key == crypto.agree(b.private, a.public, CONTEXT, crypto.MASK_PURPOSE)
    assert key != crypto.agree(a.private, b.public, CONTEXT, crypto.SHARE_PURPOSE)
    assert key != crypto.agree(a.private, b.public, crypto.CohortContext("job", 3, 2), crypto.MASK_PURPOSE)


def test_a_small_order_peer_key_is_refused():
    a = crypto.KeyPair.generate(random.Random(2).randbytes)
    with pytest.raises(crypto.SecAggCryptoError, match="unusable"):
        crypto.agree(a.private, bytes(32), CONTEXT, crypto.MASK_PURPOSE)


def test_sealed_shares_open_only_unaltered_for_their_pair_and_context():
    key = bytes(32)
    sealed = crypto.seal_shares(key, CONTEXT, 1, 2, b"shares")
    assert crypto.open_shares(key, CONTEXT, 1, 2, sealed) == b"shares"
    for args in [(key, CONTEXT, 2, 1, sealed), (key, crypto.CohortContext("job", 4, 1), 1, 2, sealed),
                 (key, CONTEXT, 1, 2, bytes([sealed[0] ^ 1]) + sealed[1:])]:
        with pytest.raises(crypto.SecAggCryptoError, match="authenticate"):
            crypto.open_shares(*args)


def test_bad_context_is_refused():
    for args in [("", 1, 0), ("j", 0, 0), ("j", 1, -1), ("j", True, 0)]:
        with pytest.raises(ValueError):
            crypto.CohortContext(*args)
