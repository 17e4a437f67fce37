"""Noisy prefix rounds on the round loop with every user voting (issue 41): discovery rates over
keyed releases agree with an independent numpy simulation of the protocol (every user's prefix
counted, numpy's discrete Laplace as a difference of two geometrics, the same public
thresholds) within a stated tolerance; a release is reproducible from its seed and identity;
every released count is at least its round's threshold; votes outside the alphabet count
nowhere."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

from triehh_beam.protocol.central.noisy_release import candidate_units
from triehh_beam.protocol.central.noisy_rounds import NoisyRoundsPlan, plan_noisy_rounds
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.reference.keyed_runs import encode_population
from triehh_beam.reference.noisy_rounds import simulate_noisy_rounds

ALPHABET = "ab"
# holders per word: "ab" and "ba" near the thresholds (their discovery is a coin), the rest sure or never
HOLDERS = {"ab": 7, "ba": 9, "aab": 60, "bbb": 40, "b": 2}
ENCODER = ItemEncoder(max_length=4, unit_size=1)
PLAN = NoisyRoundsPlan(epsilon=4.0, delta=1e-6, rounds=4, round_epsilon=0.6, accountant="pld",
                       certified_epsilon=2.4, false_prefixes=0.2)


def _users():
    users, i = {}, 0
    for word, holders in HOLDERS.items():
        for _ in range(holders):
            users[f"u{i}"] = [word]
            i += 1
    users["u-out"] = ["abz"]  # z is outside the alphabet: its last vote is no candidate
    return users


def _numpy_run(rng: np.random.Generator):
    """The protocol written again: counts of every user's prefix on the frontier, numpy noise."""
    units = candidate_units(ALPHABET, 1)
    a = math.exp(-PLAN.round_epsilon)
    sequences = [tuple(w) + ("",) for w, h in HOLDERS.items() for _ in range(h)]
    frontier, found = [()], set()
    for r in range(1, PLAN.rounds + 1):
        if not frontier:
            break
        counts = collections.Counter(s[:r] for s in sequences if len(s) >= r and s[:r - 1] in frontier)
        # the root is not extended by the end marker (no empty item); units are one letter, never short
        threshold = PLAN.threshold(len(frontier) * len(units) - (() in frontier))
        kept = []
        for parent in frontier:
            for unit in (units[:-1] if parent == () else units):
                c = parent + (unit,)
                noise = int(rng.geometric(1 - a)) - int(rng.geometric(1 - a))  # two-sided geometric
                if counts.get(c, 0) + noise >= threshold:
                    kept.append(c)
        found |= {"".join(c[:-1]) for c in kept if c[-1] == ""}
        frontier = [c for c in kept if c[-1] != ""]
    return found


@pytest.fixture(scope="module")
def population():
    return encode_population(_users(), ENCODER)


def test_discovery_rates_match_an_independent_simulation(population):
    """300 keyed releases against 300 numpy runs: each word's discovery rate agrees within 4.5
    standard errors of the difference of two proportions (plus 0.01 for the unvoted false
    prefixes' coarse float gaps); "ab" and "ba" must be neither sure nor never, so the test bites."""
    runs = 300
    keyed = collections.Counter()
    for seed in range(runs):
        keyed.update(simulate_noisy_rounds(population, ENCODER, seed, PLAN, ALPHABET).heavy_hitters.keys())
    rng = np.random.default_rng(41)
    independent = collections.Counter()
    for _ in range(runs):
        independent.update(_numpy_run(rng))
    for word in HOLDERS:
        p, q = keyed[word] / runs, independent[word] / runs
        pooled = (keyed[word] + independent[word]) / (2 * runs)
        tolerance = 4.5 * math.sqrt(2 * pooled * (1 - pooled) / runs) + 0.01
        assert abs(p - q) <= tolerance, (word, p, q)
    assert 0.1 < keyed["ab"] / runs < 0.9 and 0.1 < keyed["ba"] / runs < 0.9, keyed
    assert keyed["aab"] == runs and keyed["b"] < 0.1 * runs


def test_a_release_is_reproducible_and_keeps_nothing_below_its_thresholds(population):
    first = simulate_noisy_rounds(population, ENCODER, 7, PLAN, ALPHABET, identity=b"release-1")
    again = simulate_noisy_rounds(population, ENCODER, 7, PLAN, ALPHABET, identity=b"release-1")
    other = simulate_noisy_rounds(population, ENCODER, 7, PLAN, ALPHABET, identity=b"release-2")
    assert first == again
    assert first.released != other.released
    for prefix, count in first.released.items():
        assert count >= first.thresholds[len(prefix) - 1], (prefix, count)
    assert all(not any(u == "z" for u in prefix) for prefix in first.released)
    assert set(first.heavy_hitters) <= set(first.released and {"".join(p[:-1]) for p in first.released if p[-1] == ""})


def test_refuses_items_that_are_not_text():
    with pytest.raises(ValueError, match="text"):
        simulate_noisy_rounds(encode_population({"u": [b"ab"]}, ItemEncoder(kind="bytes", max_length=3)),
                              ItemEncoder(kind="bytes", max_length=3), 1, plan_noisy_rounds(1.0, 1e-6, 3), "ab")
