"""Tests of the PipelineDP rival (triehh_beam/reference/pipelinedp_rival.py) and of its place in
an evaluation.

PipelineDP's noise comes from python-dp's secure generator, which cannot be seeded, so the
release tests are statistical: each states the closed-form release probability it checks
(truncated geometric partition selection, Desfontaines et al., PoPETs 2022) and its tolerance,
with the chance that a correct implementation fails it. The users' item draws are keyed and
seeded, so they are checked exactly.
"""

import collections
import math
import sys

import pytest

from tests.holders import write_holders

from triehh_beam.evaluation import experiment as evaluation
from triehh_beam.reference import pipelinedp_rival as rival

EPSILON, DELTA = 1.0, 1e-8


def _single_item_users(counts, start=0):
    """user id bytes -> {item: 1}: ``holders`` users per item, each holding only that item."""
    users, user = {}, start
    for item, holders in counts.items():
        for _ in range(holders):
            users[user.to_bytes(8, "big")] = {item: 1}
            user += 1
    return users


def _closed_form(n, epsilon, delta):
    """The recurrence written out once more, independently of the module's."""
    p = 0.0
    for _ in range(n):
        p = min(math.exp(epsilon) * p + delta, 1 + math.exp(-epsilon) * (p + delta - 1), 1.0)
    return p


# --------------------------------------------------------------------------------------------
# The closed form.


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-8), (0.5, 1e-10), (4.0, 1e-6)])
def test_keep_probability_is_python_dps_truncated_geometric(epsilon, delta):
    # python-dp (C++) computes the same probabilities by its own closed form.
    from pydp.algorithms import partition_selection

    strategy = partition_selection.create_partition_strategy("truncated_geometric", epsilon, delta, 1)
    for n in (0, 1, 2, 5, 10, 18, 19, 20, 30, 60, 200):
        expected = strategy.probability_of_keep(n)
        assert rival.keep_probability(n, epsilon, delta) == pytest.approx(expected, rel=1e-9, abs=1e-15), n
        assert rival.keep_probability(n, epsilon, delta) == pytest.approx(_closed_form(n, epsilon, delta), rel=1e-12)


def test_keep_probability_shape_and_the_half_point():
    assert rival.keep_probability(0, EPSILON, DELTA) == 0.0
    assert rival.keep_probability(1, EPSILON, DELTA) == DELTA  # one user: at most delta
    values = [rival.keep_probability(n, EPSILON, DELTA) for n in range(60)]
    assert values == sorted(values) and values[-1] == 1.0
    half = rival.holders_for_half(EPSILON, DELTA)
    assert values[half - 1] < 0.5 <= values[half]
    with pytest.raises(ValueError, match="epsilon"):
        rival.keep_probability(0, 0.0, DELTA)
    with pytest.raises(ValueError, match="delta"):
        rival.holders_for_half(EPSILON, 1.0)


# --------------------------------------------------------------------------------------------
# Releases against the closed form (the real pipeline_dp).

# 40 items held by 45 users (kept with probability exactly 1), 2,000 held by 3 (1.1e-7 each),
# 400 by 18 (0.382) and 400 by 20 (0.916): 23,000 users, one item each.
CERTAIN = {f"certain{i}": 45 for i in range(40)}
RARE = {f"rare{i}": 3 for i in range(2000)}
AT_18 = {f"eighteen{i}": 18 for i in range(400)}
AT_20 = {f"twenty{i}": 20 for i in range(400)}


@pytest.fixture(scope="module")
def released():
    users = _single_item_users({**CERTAIN, **RARE, **AT_18, **AT_20})
    rows = rival.one_item_per_user(users, seed=7)
    assert len(rows) == len(users)
    return rival.select_partitions(rows, EPSILON, DELTA)


def test_items_held_by_many_users_are_released(released):
    assert rival.keep_probability(45, EPSILON, DELTA) == 1.0
    assert set(CERTAIN) <= released


def test_items_held_by_few_users_are_never_released(released):
    # Each is kept with probability keep_probability(3) = 1.1e-7: any of the 2,000 with 2.2e-4.
    assert 2000 * rival.keep_probability(3, EPSILON, DELTA) < 3e-4
    assert not released & set(RARE)


@pytest.mark.parametrize("group, holders", [(AT_18, 18), (AT_20, 20)])
def test_release_rate_near_the_threshold_matches_the_closed_form(released, group, holders):
    # Binomial(400, p): within 5 standard deviations (a correct implementation fails with
    # probability < 1e-6 per check).
    p = _closed_form(holders, EPSILON, DELTA)
    count = len(released & set(group))
    sd = math.sqrt(len(group) * p * (1 - p))
    assert abs(count - len(group) * p) <= 5 * sd, (count, len(group) * p, sd)


# --------------------------------------------------------------------------------------------
# One item per user.


def test_each_user_contributes_one_row_drawn_by_local_frequency():
    users = {i.to_bytes(4, "big"): {"a": 3, "b": 1} for i in range(4000)}
    users[b"many"] = {f"item{i}": 1 + i % 3 for i in range(50)}
    users[b"nothing"] = {"a": 0}
    rows = rival.one_item_per_user(users, seed=11)
    by_user = collections.Counter(user for user, _ in rows)
    assert set(by_user) == set(users) - {b"nothing"} and set(by_user.values()) == {1}
    # "a" is 3/4 of every user's records: its share is within 4 sd of 0.75 (sd 0.0068).
    share = sum(item == "a" for user, item in rows if user != b"many") / 4000
    assert abs(share - 0.75) <= 4 * math.sqrt(0.75 * 0.25 / 4000)
    # Keyed: the same seed draws the same items, another seed others.
    assert rival.one_item_per_user(users, seed=11) == rows
    assert rival.one_item_per_user(users, seed=12) != rows


def test_one_user_with_many_items_still_counts_once():
    # 300 items held by 18 users each, and one user holding all 300. Counted once, one item
    # has 19 holders: about 299 * 0.382 + 0.773 = 115 releases (sd 8.4); counted for all, every
    # item would have 19: about 232.
    items = {f"w{i}": 18 for i in range(300)}
    users = _single_item_users(items)
    users[b"collector"] = {item: 1 for item in items}
    [run] = rival.run(users, EPSILON, DELTA, [3], on_run=lambda index: None)
    assert run.contributors == len(users)
    p18 = _closed_form(18, EPSILON, DELTA)
    once = 299 * p18 + _closed_form(19, EPSILON, DELTA)
    sd = math.sqrt(300 * p18 * (1 - p18))
    assert abs(len(run.heavy_hitters) - once) <= 5 * sd
    assert abs(len(run.heavy_hitters) - 300 * _closed_form(19, EPSILON, DELTA)) > 10 * sd


def test_normalised_users_fold_items_as_the_truth_does():
    encoder = evaluation.EvaluationConfig("x", epsilons=(1,), delta=DELTA, max_length=4,
                                          case_fold=True).encoder(1)
    assert rival.normalised_users({b"u": {"Ab": 2, "aB": 1, "much too long": 1}}, encoder) == {
        b"u": {"ab": 3, "much too long": 1}}  # central selection has no item limit


def test_no_rows_keep_nothing():
    assert rival.select_partitions([], EPSILON, DELTA) == frozenset()
    assert rival.one_item_per_user({b"u": {"a": 0}}, seed=1) == []


def test_without_pipeline_dp_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pipeline_dp", None)  # import fails as if not installed
    with pytest.raises(rival.RivalUnavailableError, match=r'pip install "triehh-beam\[rivals\]"'):
        rival.select_partitions([(b"u", "a")], EPSILON, DELTA)


# --------------------------------------------------------------------------------------------
# In an evaluation.

POPULATION = {"aa": 600, "ab": 400, "b": 300, "toolong": 250, "cc": 200, "d": 150, "e": 100, "rare": 3}


@pytest.fixture(scope="module")
def small_input(tmp_path_factory):
    return write_holders(str(tmp_path_factory.mktemp("small") / "records.jsonl"), POPULATION)


def test_the_rival_is_asked_for_by_name_only(small_input):
    config = evaluation.EvaluationConfig(small_input, epsilons=(1,), delta=DELTA, max_length=4)
    assert "pipelinedp" not in config.rivals and "pipelinedp" in evaluation.RIVALS


def test_evaluation_runs_the_rival_per_epsilon_and_run(small_input):
    class Counting(evaluation.Progress):
        def __init__(self):
            self.total, self.labels = None, []

        def start(self, total):
            self.total = total

        def advance(self, label):
            self.labels.append(label)

    config = evaluation.EvaluationConfig(small_input, epsilons=(0.5, 1), delta=DELTA, max_length=4, runs=3,
                                         top_k=(3, 7), engine="simulate", rivals=("pipelinedp", "exact"),
                                         protocols=("sample-threshold",))
    progress = Counting()
    result = evaluation.run_evaluation(config, progress=progress)
    assert progress.total == len(progress.labels) == 2 * 3 + 2 * 3  # sample-threshold + PipelineDP runs
    block = result["rivals"]["pipelinedp"]
    assert block["strategy"] == "truncated geometric" and block["backend"] == "LocalBackend"
    assert block["library"].startswith("pipeline-dp 0.3")
    assert [c["epsilon"] for c in block["configurations"]] == [0.5, 1.0]
    for configuration in block["configurations"]:
        assert configuration["privacy"]["model"] == "central"
        assert (configuration["privacy"]["epsilon"], configuration["privacy"]["delta"]) == (configuration["epsilon"], DELTA)
        runs = configuration["runs"]
        assert [r["run"] for r in runs] == [0, 1, 2]
        assert all(r["contributors"] == result["data_source"]["users"] for r in runs)
        # 100 holders and more: kept with probability 1 at both epsilons; 3 holders: < 1e-6.
        for r in runs:
            assert set(r["heavy_hitters"]) == set(POPULATION) - {"rare"}
        assert configuration["released"]["values"] == [len(r["heavy_hitters"]) for r in runs]
        # "toolong" does not fit L = 4 but central selection finds it: recall@7 is 1.
        assert [b["recall"]["mean"] for b in configuration["metrics"]] == [1.0, 1.0]
        # triehh-beam's partition selection on the same rows and budget: the same keep probability,
        # so here the same items in every run (kept surely from 100 holders, "rare" almost never).
        ours = configuration["partition_selection"]
        assert [set(h) for h in ours["heavy_hitters"]] == [set(POPULATION) - {"rare"}] * 3
        assert ours["released"]["values"] == configuration["released"]["values"]
        assert [b["recall"]["mean"] for b in ours["metrics"]] == [1.0, 1.0]
