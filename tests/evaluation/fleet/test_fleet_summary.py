"""``federated simulate --json``: what its summary prints without ``--verbose``. The exact message
counts and the central reference's estimates (released with the federated run's keyed noise, so
the difference of the two is the exact count of non-reporting devices per target) are private."""

from triehh_beam.evaluation.fleet.run import SimulationSummary


def _summary() -> SimulationSummary:
    return SimulationSummary(
        job_id="j", devices=10, rounds=2, heavy_hitters=["a"], central_heavy_hitters=["a"],
        trie_equal_to_central=True, recall_vs_central=1.0, estimates={'"a"': 893},
        central_estimates={'"a"': 1287}, estimates_equal_to_central=False, seconds=1.0,
        sent={"reports": 7}, received={"voted": 5}, redelivered=1, unread=0, output="out", report="r")


def test_the_default_document_holds_no_exact_count_nor_the_central_estimates():
    document = _summary().document()
    assert document["estimates"] == {'"a"': 893}
    for private in ("sent", "received", "redelivered", "unread", "central_estimates"):
        assert private not in document


def test_the_central_comparison_and_a_private_n_are_private():
    # The central run releases the same records with the federated release's keys: its heavy
    # hitters, the recall against them and the equality checks are a second release no ledger
    # covers; and "devices" is the exact n unless --population declared it public.
    document = _summary().document()
    for private in ("central_heavy_hitters", "recall_vs_central", "trie_equal_to_central",
                    "estimates_equal_to_central", "devices", "seconds"):
        assert private not in document, private
    public = SimulationSummary(**{**_summary().__dict__, "population_public": True}).document()
    assert public["devices"] == 10 and "recall_vs_central" not in public


def test_verbose_adds_them_marked_private():
    document = _summary().document(counts=True)["private"]
    assert document["central_estimates"] == {'"a"': 1287} and document["received"] == {"voted": 5}
    assert document["central_heavy_hitters"] == ["a"] and document["devices"] == 10
    assert "never publish" in document["note"]


def test_the_secure_aggregation_counts_are_private_too():
    summary = _summary()
    summary.secure_aggregation = {"cohorts": 3, "unmasked": 2, "dropped_by_phase": {"masked": 1},
                                  "devices_in_dropped_cohorts": 40, "devices_summed": 70}
    assert "secure_aggregation" not in summary.document()
    assert summary.document(counts=True)["private"]["secure_aggregation"]["dropped_by_phase"] == {"masked": 1}
