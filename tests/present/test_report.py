"""Tests of the evaluation report and the planning plots (triehh_beam/present/report.py, planning_plots.py): the files
exist, the JSON and the PNGs load, and report.html embeds every PNG and states the guarantees."""

import base64
import json
import os
import re

import matplotlib.image
import pytest

from triehh_beam.evaluation import experiment as evaluation

from triehh_beam.present import planning_plots, report
from triehh_beam.io.write import write_records

POPULATION = {"aa": 600, "ab": 400, "b": 300, "cc": 200, "d": 150, "e": 100, "f": 60, "g": 30}


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("in") / "records.jsonl")
    rows, user = [], 0
    for item, holders in POPULATION.items():
        for _ in range(holders):
            rows.append((user, item))
            user += 1
    write_records(path, rows)
    config = evaluation.EvaluationConfig(
        input_pattern=path, epsilons=(0.05, 4.0, 8.0), delta=1e-3, max_length=4, unit_sizes=(1, 2),
        runs=3, top_k=(2, 4), engine="simulate", rivals=("pem", "exact"),
    )
    # Through JSON and back: the report must work from evaluation.json alone.
    return json.loads(json.dumps(evaluation.run_evaluation(config)))


@pytest.fixture(scope="module")
def written(result, tmp_path_factory):
    return report.write_report(result, str(tmp_path_factory.mktemp("report")))


def test_every_figure_is_written_and_opens(written):
    expected = {"recall_at_k", "discovery_rate_u1", "discovery_rate_u2", "recall_vs_unit_size",
                "trie_growth", "report"}
    assert set(written) == expected
    for name, path in written.items():
        if name == "report":
            continue
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300, name
        assert os.path.getsize(path) < 200_000


def test_html_embeds_the_pngs_and_states_parameters_and_guarantees(written, result):
    with open(written["report"], encoding="utf-8") as f:
        page = f.read()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    pngs = [p for n, p in written.items() if n != "report"]
    assert len(embedded) == len(pngs)
    files = set()
    for path in pngs:
        with open(path, "rb") as f:
            files.add(f.read())
    assert {base64.b64decode(data) for data in embedded} == files
    assert "<img" in page and "src=\"http" not in page  # self-contained
    for needle in ("(ε, δ)-differential privacy", "user-level", "Theorem 1", "ε-local differential privacy",
                   result["data_source"]["input"], "simulate", "recall@2", "recall@4", "PEM ε=4",
                   "exact top-K", "Skipped (infeasible"):
        assert needle in page, needle


def test_the_reader_drops_read_as_words_and_none_when_there_are_none(written, result):
    with open(written["report"], encoding="utf-8") as f:
        page = f.read()
    assert not any(result["data_source"]["records_dropped"].values())
    assert "<li>records dropped by the reader: none</li>" in page  # it read "{}"
    # As the text report (io.drops.describe_drops): "reason count", in the order records are checked.
    dropped = report._dropped({"too_long": 0, "bad_count": 1200, "missing_user": 3})
    assert dropped == "missing_user 3, bad_count 1,200"
    assert report._dropped({"bad_count": 0}) == "none"
    assert "(1 file)" in page and "file(s)" not in page, page[:2000]


def test_summary_rows_follow_the_result(result):
    rows = report.summary_rows(result)
    methods = [r[0] for r in rows]
    assert methods[:4] == [
        "TrieHH ε=4, unit size 1 (L=4)", "TrieHH ε=4, unit size 2 (L=3)",
        "TrieHH ε=8, unit size 1 (L=4)", "TrieHH ε=8, unit size 2 (L=3)",
    ]
    assert "PEM ε=0.05" in methods and methods[-1] == "exact top-K"
    assert rows[-1][2] == ["1.000", "1.000"]
    assert all(len(cells) == 2 for _, _, cells in rows)


def test_report_without_rivals_or_with_one_unit_size(result, tmp_path):
    trimmed = dict(result, rivals={})
    trimmed["parameters"] = dict(result["parameters"], unit_sizes=[1], rivals=[])
    trimmed["triehh"] = [c for c in result["triehh"] if c["unit_size"] == 1]
    written = report.write_report(trimmed, str(tmp_path))
    assert "discovery_rate_u2" not in written
    for name, path in written.items():
        if name != "report":
            matplotlib.image.imread(path)


def test_planning_plots(tmp_path):
    paths = planning_plots.write_planning_plots(str(tmp_path), 200_000, [1, 8], 1e-10, 10)
    assert [os.path.basename(p) for p in paths] == [
        "planning_discovery_vs_frequency.png",
        "planning_discovery_vs_population.png",
        "planning_population_for_90pct.png",
    ]
    for path in paths:
        assert matplotlib.image.imread(path).shape[0] > 200
    # An epsilon infeasible at this n is named, not drawn; a shorter item is accepted.
    planning_plots.write_planning_plots(str(tmp_path / "small"), 10_000, [1, 4], 1e-8, 10, length=4)
    with pytest.raises(ValueError):
        planning_plots.write_planning_plots(str(tmp_path / "bad"), 10_000, [1], 1e-8, 10, length=11)
    with pytest.raises(ValueError):
        planning_plots.write_planning_plots(str(tmp_path / "bad"), 10_000, [], 1e-8, 10)
