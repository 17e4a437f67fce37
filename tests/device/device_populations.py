"""The device tests' shared keys and populations: the sampler, job and deadline of their rounds, a
device's invitation token, and one population per encoding (the devices' records and the same
records for the simulation), drawn from the bundled demo population's words."""

import random
from collections import Counter

import numpy as np
import pyarrow.parquet as pq

from triehh_beam.evaluation.demo import demo_population_path
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.items.tokenize import tokenize
from triehh_beam.protocol.randomness.sampling import Sampler

__all__ = ["DEADLINE", "JOB", "POPULATIONS", "SAMPLER", "USERS", "invitation_token"]

SAMPLER = Sampler(bytes(range(7, 39)), b"federated-test-identity")
JOB = "job-federated-test"
DEADLINE = 1_790_000_000_000
USERS = 3000


def invitation_token(user_id: bytes, round_index: int) -> bytes:
    """A 16-byte invitation token made of the user id and the round, as a server would send one."""
    return (user_id + bytes([round_index]) * 16)[:16].ljust(16, b"\x00")


def _demo_words(count=400):
    """The bundled demo population's most held words and how many users hold each."""
    items = pq.read_table(demo_population_path(), columns=["item"]).column("item").to_pylist()
    return Counter(items).most_common(count)


def _pick(rng, words, weights, k):
    return rng.choices(words, weights=weights, k=k)


def _populations():
    """name -> (encoder, too_long, records per user for the devices, the same records for the
    simulation, pre-tokenised when the encoder tokenises)."""
    rng = random.Random(2020)
    common = _demo_words()
    words = [w for w, _ in common]
    weights = [n for _, n in common]
    out = {}

    sentences = {}
    for user in range(USERS):
        sentences[f"user-{user}"] = {
            " ".join(_pick(rng, words, weights, rng.randint(1, 3))).capitalize() + rng.choice([".", "!", ""]):
            rng.randint(1, 3) for _ in range(rng.randint(1, 4))}
    tokens = {}
    for user, records in sentences.items():
        per_user = Counter()
        for value, count in records.items():
            for token in tokenize(value):
                per_user[token] += count
        tokens[user] = dict(per_user)
    out["text-tokenized-units-1"] = (ItemEncoder(tokenize=True, case_fold=True, max_length=7), "drop", sentences, tokens)

    plain = {f"{user}": {w: rng.randint(1, 4) for w in _pick(rng, words, weights, rng.randint(1, 5))}
             for user in range(USERS)}
    out["text-units-2-truncate"] = (ItemEncoder(unit_size=2, max_length=4), "truncate", plain, plain)

    raw = {user: {w.encode() + bytes([rng.randrange(3)]): rng.randint(1, 2)
                  for w in _pick(rng, words, weights, rng.randint(1, 3))} for user in range(USERS)}
    out["bytes-units-1"] = (ItemEncoder(kind="bytes", unit_size=1, max_length=6), "drop", raw, raw)
    out["bytes-units-2"] = (ItemEncoder(kind="bytes", unit_size=2, max_length=4), "drop", raw, raw)

    values = np.arange(-40, 40)
    value_weights = 1.0 / (1 + np.abs(values - 3)) ** 1.3
    ints = {f"u{user}".encode(): {int(v): rng.randint(1, 3) for v in rng.choices(values.tolist(), value_weights.tolist(),
                                                                                  k=rng.randint(1, 4))}
            for user in range(USERS)}
    out["int-16-bits-units-2"] = (ItemEncoder(kind="int", int_bits=16, unit_size=2, max_length=9), "drop", ints, ints)
    return out


POPULATIONS = _populations()
