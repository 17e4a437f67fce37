"""``federated simulate --json``: what its summary prints without ``--verbose``. The exact message
counts and the central reference's estimates (released with the federated run's keyed noise, so
the difference of the two is the exact count of non-reporting devices per target) are private."""

from triehh_beam.evaluation.fleet_run import SimulationSummary


def _summary() -> SimulationSummary:
    return SimulationSummary(
        job_id="j", devices=10, rounds=2, heavy_hitters=["a"], central_heavy_hitters=["a"],
        trie_equal_to_central=True, recall_vs_central=1.0, estimates={'"a"': 893},
        central_estimates={'"a"': 1287}, estimates_equal_to_central=False, seconds=1.0,
        sent={"reports": 7}, received={"voted": 5}, redelivered=1, unread=0, output="out", report="r")


def test_the_default_document_holds_no_exact_count_nor_the_central_estimates():
    document = _summary().document()
    assert document["estimates"] == {'"a"': 893} and document["estimates_equal_to_central"] is False
    for private in ("sent", "received", "redelivered", "unread", "central_estimates"):
        assert private not in document


def test_verbose_adds_them():
    document = _summary().document(counts=True)
    assert document["central_estimates"] == {'"a"': 1287} and document["received"] == {"voted": 5}


def test_the_secure_aggregation_counts_are_private_too():
    summary = _summary()
    summary.secure_aggregation = {"cohorts": 3, "unmasked": 2, "dropped_by_phase": {"masked": 1},
                                  "devices_in_dropped_cohorts": 40, "devices_summed": 70}
    assert "secure_aggregation" not in summary.document()
    assert summary.document(counts=True)["secure_aggregation"]["dropped_by_phase"] == {"masked": 1}
