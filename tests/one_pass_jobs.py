"""Discoveries of small word and number populations with the in-process runner, for the job
tests: their words (``WORDS``), a seed per label, populations of three kinds, the configuration
they run with (TrieHH unless told) and rows of users holding one or two words."""

from __future__ import annotations

import hashlib

import numpy as np

from triehh_beam.job.batch.driver import DiscoveryConfig

__all__ = ["WORDS", "discovery_config", "population", "job_seed", "word_rows"]


WORDS = ["apple", "apply", "ample", "maple", "mango", "man", "map", "zebra", "zero", "zoo", "zone"]


def job_seed(label: str) -> bytes:
    return hashlib.sha256(b"triehh-beam one-pass tests: " + label.encode()).digest()


def population(kind: str, rng: np.random.Generator):
    """(rows, users mapping for the simulation, encoder fields) of one test population."""
    weights = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.1
    weights /= weights.sum()
    rows, users = [], {}
    if kind == "one_word":
        for user, word in enumerate(rng.choice(WORDS, size=3000, p=weights)):
            rows.append((f"u{user}", str(word), 1))
            users[f"u{user}"] = {str(word): 1}
        return rows, users, {}
    if kind == "many_items":
        for user in range(1500):
            held = {}
            for word in rng.choice(WORDS, size=int(rng.integers(1, 7)), p=weights):
                count = int(rng.integers(1, 4))
                rows.append((f"u{user}", str(word), count))
                held[str(word)] = held.get(str(word), 0) + count
            users[f"u{user}"] = held
        return rows, users, {}
    if kind == "int":
        values = [7, 7, 1000, -3, 123456, 7, 1000]
        for user in range(3000):
            value = int(values[int(rng.integers(len(values)))])
            rows.append((user, value, 1))
            users[user] = {value: 1}
        return rows, users, dict(item_kind="int", int_bits=20, unit_size=4, max_length=6)
    raise ValueError(kind)


def discovery_config(path, output_dir, seed, **fields) -> DiscoveryConfig:
    values = dict(epsilon=6.0, delta=1e-5, max_length=6)
    values.update(fields)
    return DiscoveryConfig(input_pattern=str(path), output_dir=str(output_dir), seed=seed, **{"protocol": "triehh", **values})


def word_rows(users: int, rng: np.random.Generator):
    """(user, word, 1) rows of ``users`` users holding one or two ``WORDS`` (Zipf-like weights)."""
    weights = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.1
    weights /= weights.sum()
    return [(f"u{user}", str(word), 1) for user in range(users)
            for word in rng.choice(WORDS, size=int(rng.integers(1, 3)), p=weights)]
