"""The noisy round's empirical audit (issue 41): 1,000 keyed releases on each of D and D' (one
more vote for the target) do not refute the round's (eps_r, 0) claim, and refute it when the
noise is drawn at half its scale (a planted bug: eps_r doubled, the claim unchanged). Seeds are
fixed (run i's keys derive from seed i), so both outcomes are deterministic; the honest run's
hit rates are within 4.5 standard errors of P(Z >= 1) and P(Z >= 2)."""

import math

import pytest

from triehh_beam.evaluation.audits.noisy_rounds import audit_round_release
from triehh_beam.protocol.central.noisy_release import candidate_units
from triehh_beam.protocol.central.noisy_rounds import NoisyRoundsPlan, at_least

PLAN = NoisyRoundsPlan(1.0, 1e-6, 1, 1.0, "pld", 1.0, false_prefixes=0.01)
HALVED = NoisyRoundsPlan(2.0, 1e-6, 1, 2.0, "pld", 2.0, false_prefixes=0.01)  # the planted bug's noise
RUNS = 1000


@pytest.fixture(scope="module")
def threshold():
    return PLAN.threshold(2 * len(candidate_units("aeirt", 2)))


def test_the_honest_round_is_not_refuted_and_its_rates_match_the_closed_form(threshold):
    claim = audit_round_release(PLAN, threshold, threshold + 2, RUNS)
    assert not claim.violated
    forward = claim.directions[0]  # D' over D
    for hits, k in ((forward.hits_numerator, 1), (forward.hits_denominator, 2)):
        p = at_least(PLAN.round_epsilon, k)
        assert abs(hits / RUNS - p) <= 4.5 * math.sqrt(p * (1 - p) / RUNS), (hits, p)


def test_the_noise_at_half_its_scale_is_found(threshold):
    claim = audit_round_release(PLAN, threshold, threshold + 2, RUNS, sampling_plan=HALVED)
    assert claim.violated and claim.directions[0].refuted


def test_refusals():
    with pytest.raises(ValueError, match="count"):
        audit_round_release(PLAN, -1, 3, 10)
