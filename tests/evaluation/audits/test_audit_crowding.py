"""``triehh audit`` evidence that Theorem 1 is false for fixed-size sampling near m ~ theta: the
paper's own parameters at n = 36, theta = 5, m = 6 (D: 35 users on 'y', one on 'j'; D': D plus
one user on 'z'). Round 1 publishes nothing with probability 0 on D and C(35, 4)/C(37, 6) =
0.0225 on D', which refutes Theorem 1's one-round (1.79, 0.0125) after about 5,000 releases per
side. The always-run test decides on the keyed runs (``reference.keyed_runs``: the pipeline's own
sampling keys and vote counting, equal to the pipeline's trie seed by seed by
``tests/evaluation/test_keyed_runs.py``), milliseconds per release; the real pipeline's audit of
the same case is ``TRIEHH_LONG_AUDITS=1`` (its releases take about a second each, more under load)."""

import math
import os

import pytest

from triehh_beam.evaluation.audits.audit import AuditConfig, AuditError, format_audit, run_audit
from triehh_beam.protocol.accounting.privacy import theorem1
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.reference.audit_stats import test_claim as claim_test
from triehh_beam.reference.keyed_runs import encode_population, run_keyed
from triehh_beam.reference.simulation import sampler_for_seed

D = {**{f"y{i}": {"y": 1} for i in range(35)}, "j0": {"j": 1}}
TARGET_USER = "triehh-audit-target-user"
EMPTY_ON_D_PRIME = math.comb(35, 4) / math.comb(37, 6)  # u, j0 and 4 of the 35 sampled
RUNS = 5000


def test_keyed_runs_refute_theorem1_at_the_papers_own_parameters():
    claim = theorem1(36, 5, 1, batch_size=6)  # the one round the event observes
    assert (round(claim.epsilon, 2), claim.delta) == (1.79, 0.0125)
    population = encode_population({**D, TARGET_USER: {"z": 1}}, ItemEncoder(max_length=2))
    d = population.members([u for u in population.user_ids if u != TARGET_USER.encode()])
    d_prime = population.members()
    assert (len(d), len(d_prime)) == (36, 37)
    hits = {"D": 0, "D'": 0}
    for run in range(RUNS):
        for name, members in (("D", d), ("D'", d_prime)):
            # a fresh key per release and side, as the pipeline's fresh release nonces give
            sampler = sampler_for_seed(f"audit-crowding-{name}-{run:06d}".encode())
            hits[name] += not run_keyed(population, members, 5, 6, sampler).any()
    assert hits["D"] == 0  # without u some prefix always reaches theta: impossible, not rare
    # Binomial(5000, 0.0225): mean 112.6, sd 10.5; 5 sd either side (a failure rate below 1e-6).
    assert abs(hits["D'"] - RUNS * EMPTY_ON_D_PRIME) < 5 * math.sqrt(RUNS * EMPTY_ON_D_PRIME)
    test = claim_test(hits["D'"], RUNS, hits["D"], RUNS, claim.epsilon, claim.delta)
    assert test.violated and test.directions[0].refuted


def test_the_audit_refuses_fixed_values_it_cannot_run():
    with pytest.raises(AuditError, match="together"):
        AuditConfig(protocol="triehh", theta=5)
    with pytest.raises(AuditError, match="TrieHH's"):
        AuditConfig(protocol="triehh++", theta=5, batch_size=6)


@pytest.mark.slow
def test_the_real_pipeline_audits_theorem1s_one_round_claim(tmp_path):
    # Two releases per side: the plumbing (fixed values run with no guarantee, the claim is
    # Theorem 1's for round 1 at D's n, the event read from what each release published).
    config = AuditConfig(protocol="triehh", epsilon=4.0, delta=0.02, max_length=2, runs=2, target="z",
                         event="nothing-published", theta=5, batch_size=6, seed=38)
    result = run_audit(config, D, workspace=str(tmp_path))
    assert result["claim"]["epsilon"] == pytest.approx(math.log(6)) and result["claim"]["delta"] == 0.0125
    assert "Theorem 1 at n = 36, theta = 5, m = 6, L = 1" in result["claim"]["source"]
    assert result["event"]["hits_d"] == 0
    assert "nothing is published" in format_audit(result)


@pytest.mark.skipif(not os.environ.get("TRIEHH_LONG_AUDITS"),
                    reason="12,000 real releases (hours): run with TRIEHH_LONG_AUDITS=1")
def test_the_real_pipeline_refutes_theorem1_at_the_papers_own_parameters(tmp_path):
    config = AuditConfig(protocol="triehh", epsilon=4.0, delta=0.02, max_length=2, runs=6000, target="z",
                         event="nothing-published", theta=5, batch_size=6, seed=38)
    result = run_audit(config, D, workspace=str(tmp_path))
    print(format_audit(result))
    assert result["event"]["hits_d"] == 0
    assert result["verdict"] == "violated"
