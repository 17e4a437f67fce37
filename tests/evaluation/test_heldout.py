"""The held-out population of the accounting evaluation (triehh_beam.evaluation.heldout)."""

import math

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from triehh_beam.evaluation import demo, heldout
from triehh_beam.evaluation.population import load_population

pytest.importorskip("wordfreq")


@pytest.fixture(scope="module")
def heldout_path(tmp_path_factory):
    return heldout.make_heldout_population(str(tmp_path_factory.mktemp("heldout") / "heldout.parquet"))


@pytest.fixture(scope="module")
def table(heldout_path):
    return pq.read_table(heldout_path)


def test_schema_and_size(table, heldout_path):
    assert table.schema.remove_metadata() == demo.SCHEMA
    assert table.num_rows == 100_000
    ids = table.column("user_id")
    assert len(pc.unique(ids)) == 100_000
    assert (pc.min(ids).as_py(), pc.max(ids).as_py()) == (200_000, 299_999)
    assert pc.all(pc.equal(table.column("count"), 1)).as_py()
    top = demo.truth(heldout_path)
    assert top[0][0] == "the" and {"the", "to", "of", "and", "a", "in"} <= {w for w, _ in top[:10]}


def test_the_pipeline_reader_reads_it(heldout_path):
    population = load_population(heldout_path)
    assert population.records == 100_000 and len(population.users) == 100_000
    assert sum(population.dropped.values()) == 0


def test_deterministic_and_main_writes_the_same_bytes(heldout_path, tmp_path, capsys):
    again = tmp_path / "again.parquet"
    assert heldout.main(["--output", str(again), "--top", "3"]) == 0
    assert "100,000 users" in capsys.readouterr().out
    with open(heldout_path, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read()


def test_fewer_users_are_the_first_users_of_the_same_draw(table, tmp_path):
    small = pq.read_table(heldout.make_heldout_population(str(tmp_path / "small.parquet"), users=3000))
    assert small.to_pylist() == table.slice(0, 3000).to_pylist()


def test_a_draw_disjoint_from_the_bundled_population(table):
    bundled = pq.read_table(demo.demo_population_path())
    assert not set(table.column("user_id").to_pylist()) & set(bundled.column("user_id").to_pylist())
    # Same vocabulary and frequencies, another seed: user i of the held-out file and user i of
    # either half of the bundled file hold the same word with probability sum_w p_w^2 (about
    # 1.4%) when the draws are independent; a copied or shared stream would agree far more.
    words, freqs = demo.vocabulary_words(5000)
    p = freqs / freqs.sum()
    same = float(np.sum(p * p))
    mine = np.array(table.column("item").to_pylist(), dtype=object)
    theirs = np.array(bundled.column("item").to_pylist(), dtype=object)
    n = len(mine)
    tolerance = 4.5 * math.sqrt(n * same * (1 - same))
    for half in (theirs[:n], theirs[n:2 * n]):
        agree = int(np.sum(mine == half))
        assert abs(agree - n * same) < tolerance, (agree, n * same, tolerance)
    # The held-out words come from the bundled file's vocabulary.
    assert set(mine) <= set(words)
