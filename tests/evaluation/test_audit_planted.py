"""Bugs planted in the pipeline, found by ``triehh audit``'s runs of the real thing: the
threshold lowered (``PrefixCounter`` keeps every prefix with one vote, as issue 24 reproduced it)
and keys reused across releases (``Release.fresh`` with a fixed nonce, one seed file). Each is
reported "violated"; the same audits of the unpatched pipeline are in ``test_audit``. Both are
slow: a lowered threshold shows only when the extra user is sampled (with probability p_s), so it
needs hundreds of releases (one ``--window`` replay per population, about 0.4 s a window); the
reuse audit needs about a dozen runs of three Beam jobs each."""

import pytest

from triehh_beam.evaluation.audit import AuditConfig, format_audit, run_audit, synthetic_population
from triehh_beam.job import release
from triehh_beam.protocol.counting import PrefixCounter


@pytest.mark.slow
def test_a_lowered_threshold_is_found_violated(monkeypatch):
    monkeypatch.setattr(PrefixCounter, "extract_kept",
                        lambda self, counts: sorted(prefix for prefix, count in counts.items() if count >= 1))
    # TrieHH++ claims (1, 1e-3) over L = 2 rounds, sampling p_s per round; the target 'z' is held
    # by no user of D: with the bug it is published whenever its one holder is sampled in round 1.
    config = AuditConfig(protocol="triehh++", epsilon=1.0, delta=1e-3, max_length=2, window=True, runs=400, seed=3)
    result = run_audit(config, synthetic_population(300, seed=3))
    print(format_audit(result))  # the numbers, with pytest -s
    assert result["verdict"] == "violated", format_audit(result)
    assert result["event"]["hits_d"] == 0 and result["event"]["hits_d_prime"] > 20
    assert result["directions"][0]["refuted"] and "violated" in format_audit(result)


@pytest.mark.slow
def test_keys_reused_across_releases_are_found_violated(monkeypatch):
    monkeypatch.setattr(release.Release, "fresh",
                        classmethod(lambda cls, seed, identity: cls(seed, identity, b"\x01" * release.NONCE_BYTES)))
    # The second release of D repeats the first exactly; of D' it differs by the user's +1 in
    # the estimate of 'a' (finding 1 of issue 24), whenever 'a' is discovered (always, here).
    config = AuditConfig(protocol="triehh++", epsilon=0.5, delta=1e-3, max_length=2, estimate_frequencies=0.1,
                         releases=2, runs=12, seed=3)
    result = run_audit(config, synthetic_population(1500, seed=2))
    print(format_audit(result))
    assert result["verdict"] == "violated", format_audit(result)
    assert (result["event"]["hits_d"], result["event"]["hits_d_prime"]) == (0, 12)
