"""Hand-made cases for triehh_beam.reference.metrics, ties and short truths included."""

import collections

import pytest

from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.reference.metrics import (discovery_rates, f1_at_k, ground_truth, item_counts, ncr_at_k,
                                           precision_at_k, recall_at_k, true_top_k, user_records)

# A strict ranking: a > b > c > d > e.
STRICT = {"a": 10, "b": 8, "c": 6, "d": 4, "e": 2}


# --- ground truth ----------------------------------------------------------------------------


def test_ground_truth_counts_distinct_users_and_records():
    users = {
        "u1": ["hi", "hi", "hi", "hey"],  # three records of one item: one user
        "u2": {"hi": 2, "yo": 1},
        "u3": ["yo"],
        "u4": [],  # no record: not part of the population
        "u5": {"hi": 0},  # a zero count is no record either
    }
    truth = ground_truth(users)
    assert truth.user_counts == {"hi": 2, "hey": 1, "yo": 2}
    assert truth.record_counts == {"hi": 5, "hey": 1, "yo": 2}
    assert truth.n_users == 3
    assert users["u1"] == ["hi", "hi", "hi", "hey"]  # the caller's data is untouched


def test_ground_truth_merges_equivalent_user_ids_and_normalises_items():
    # 7 and "7" are one user for sampling, hence for the truth; NFD and NFC "é" are one item
    # once normalised by the encoder.
    users = {7: ["e\u0301"], "7": ["é"], b"8": ["é", "x"]}
    raw = ground_truth(users)
    assert raw.n_users == 2
    assert raw.user_counts == {"e\u0301": 1, "é": 2, "x": 1}
    normalised = ground_truth(users, ItemEncoder())
    assert normalised.user_counts == {"é": 2, "x": 1}
    assert normalised.record_counts == {"é": 3, "x": 1}


def test_item_counts_and_user_records_validate():
    assert item_counts(["a", "a", "b"]) == {"a": 2, "b": 1}
    assert item_counts({"a": 3, "b": 0}) == {"a": 3}
    with pytest.raises(TypeError):
        item_counts("hello")  # a single string, not a list of items
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            item_counts({"a": bad})
    assert user_records({1: ["a"], "1": ["b"], 2: []}) == {b"1": {"a": 1, "b": 1}}


# --- top-K and ties ---------------------------------------------------------------------------


def test_true_top_k_groups_ties_at_the_boundary():
    truth = {"a": 5, "b": 3, "c": 3, "d": 1, "z": 0}
    top = true_top_k(truth, 2)
    assert top.k == 2
    assert top.groups == (frozenset("a"), frozenset("bc"))
    assert top.certain == frozenset("a")
    assert top.candidates == frozenset("abc")
    top3 = true_top_k(truth, 3)  # the tie group fits exactly: no ambiguity left
    assert top3.certain == top3.candidates == frozenset("abc")
    # Zero-frequency items are not part of the truth, so K is capped at 4.
    assert true_top_k(truth, 10).k == 4


def test_recall_strict_ranking():
    assert recall_at_k({"a", "b"}, STRICT, 2) == 1.0
    assert recall_at_k({"a", "c"}, STRICT, 2) == 0.5
    assert recall_at_k({"c", "d", "zzz"}, STRICT, 2) == 0.0
    assert recall_at_k([], STRICT, 3) == 0.0
    assert recall_at_k(["a", "a", "b"], STRICT, 4) == 0.5  # duplicates count once
    # A sequence is a strict ranking, best first.
    assert recall_at_k({"y"}, ["x", "y", "w"], 1) == 0.0
    assert recall_at_k({"y"}, ["x", "y", "w"], 2) == 0.5


def test_recall_ties_resolved_in_the_runs_favour_with_denominator_k():
    truth = {"a": 5, "b": 3, "c": 3, "d": 1}
    # Either tied item fills the one boundary slot.
    assert recall_at_k({"a", "b"}, truth, 2) == 1.0
    assert recall_at_k({"a", "c"}, truth, 2) == 1.0
    # Both tied items do not count twice: the denominator stays K and recall stays <= 1.
    assert recall_at_k({"b", "c"}, truth, 2) == 0.5
    assert recall_at_k({"a", "b", "c"}, truth, 2) == 1.0
    # A tie group that spans the whole top-K.
    flat = {"p": 2, "q": 2, "r": 2, "s": 2}
    assert recall_at_k({"s"}, flat, 2) == 0.5
    assert recall_at_k({"r", "s", "q"}, flat, 2) == 1.0
    # The result does not depend on the mapping's order.
    assert recall_at_k({"c"}, dict(reversed(list(truth.items()))), 2) == 0.5


def test_k_larger_than_the_truth_uses_the_number_of_true_items():
    truth = collections.Counter({"a": 3, "b": 1})
    assert recall_at_k({"a", "b"}, truth, 10) == 1.0
    assert recall_at_k({"a"}, truth, 10) == 0.5
    assert precision_at_k({"a", "b", "x"}, truth, 10) == pytest.approx(2 / 3)
    assert f1_at_k({"a", "b"}, truth, 10) == 1.0
    assert ncr_at_k({"a"}, truth, 10) == pytest.approx(2 / 3)  # scores 2 of 2 + 1


def test_precision_and_f1():
    assert precision_at_k({"a", "b"}, STRICT, 2) == 1.0
    assert precision_at_k({"a", "x", "y", "z"}, STRICT, 2) == 0.25
    assert precision_at_k(set(), STRICT, 2) == 0.0
    # precision 1/4, recall 1/2: F1 = 2 * (1/8) / (3/4) = 1/3 = 2 * hits / (|D| + K).
    assert f1_at_k({"a", "x", "y", "z"}, STRICT, 2) == pytest.approx(1 / 3)
    assert f1_at_k({"a", "b"}, STRICT, 2) == 1.0
    assert f1_at_k(set(), STRICT, 2) == 0.0
    assert f1_at_k({"q"}, STRICT, 2) == 0.0
    # Ties: two discovered items tied for one slot, one counts as a hit.
    tied = {"a": 5, "b": 3, "c": 3}
    assert precision_at_k({"a", "b", "c"}, tied, 2) == pytest.approx(2 / 3)
    assert f1_at_k({"a", "b", "c"}, tied, 2) == pytest.approx(2 * 2 / 5)


def test_ncr_weights_the_true_rank():
    # K = 4: scores a=4, b=3, c=2, d=1, total 10.
    assert ncr_at_k({"a", "b", "c", "d"}, STRICT, 4) == 1.0
    assert ncr_at_k({"a"}, STRICT, 4) == pytest.approx(0.4)
    assert ncr_at_k({"d"}, STRICT, 4) == pytest.approx(0.1)
    assert ncr_at_k({"b", "d", "e"}, STRICT, 4) == pytest.approx(0.4)
    assert ncr_at_k(set(), STRICT, 4) == 0.0
    assert ncr_at_k({"a"}, STRICT, 1) == 1.0


def test_ncr_with_ties_gives_discovered_items_the_best_ranks_of_their_group():
    # Ranks: a=1, {b, c} share ranks 2-3, d=4. K = 3 scores 3, 2, 1 (total 6).
    truth = {"a": 9, "b": 5, "c": 5, "d": 1}
    assert ncr_at_k({"c"}, truth, 3) == pytest.approx(2 / 6)
    assert ncr_at_k({"b", "c"}, truth, 3) == pytest.approx(3 / 6)
    # Boundary tie: K = 2 scores 2, 1; either of b, c takes the single slot (score 1).
    assert ncr_at_k({"c"}, truth, 2) == pytest.approx(1 / 3)
    assert ncr_at_k({"b", "c"}, truth, 2) == pytest.approx(1 / 3)
    assert ncr_at_k({"a", "b", "c"}, truth, 2) == 1.0


def test_metric_arguments_are_validated():
    for metric in (recall_at_k, precision_at_k, f1_at_k, ncr_at_k):
        with pytest.raises(ValueError):
            metric({"a"}, STRICT, 0)
        with pytest.raises(ValueError):
            metric({"a"}, {}, 3)  # no truth at all
        with pytest.raises(ValueError):
            metric({"a"}, {"a": 0}, 3)
        with pytest.raises(ValueError):
            metric({"a"}, {"a": -1}, 1)
        with pytest.raises(ValueError):
            metric({"a"}, {"a": float("nan")}, 1)
        with pytest.raises(ValueError):
            metric({"a"}, ["a", "a"], 1)  # a strict ranking cannot repeat an item


def test_float_frequencies_tie_with_equal_ints():
    assert true_top_k({"a": 2, "b": 2.0, "c": 1.5}, 1).groups == (frozenset("ab"),)


def test_discovery_rates():
    runs = [{"a", "b"}, ["a", "a"], set(), {"a", "c"}]
    assert discovery_rates(runs) == {"a": 0.75, "b": 0.25, "c": 0.25}
    rates = discovery_rates(runs, items={"a": 10, "d": 1})  # e.g. the truth's keys
    assert rates == {"a": 0.75, "d": 0.0}
    assert discovery_rates(iter([{"x"}])) == {"x": 1.0}  # any iterable of runs
    with pytest.raises(ValueError):
        discovery_rates([])
