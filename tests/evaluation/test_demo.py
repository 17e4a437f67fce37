"""The bundled demo population and its regenerator (triehh_beam.evaluation.demo)."""

import collections
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import triehh_beam

from triehh_beam.evaluation import demo


@pytest.fixture(scope="module")
def bundled():
    return pq.read_table(demo.demo_population_path())


# --- the bundled file ---------------------------------------------------------------------------


def test_bundled_file_is_package_data():
    path = demo.demo_population_path()
    assert path == demo.DEMO_POPULATION_PATH
    assert os.path.isfile(path)
    assert os.path.dirname(path) == os.path.join(os.path.dirname(triehh_beam.__file__), "data")
    assert os.path.getsize(path) < 1_500_000


def test_missing_file_error_is_clear(monkeypatch, tmp_path):
    monkeypatch.setattr(demo, "DEMO_POPULATION_PATH", str(tmp_path / "nope.parquet"))
    with pytest.raises(FileNotFoundError, match="bundled demo population is missing"):
        demo.demo_population_path()


def test_bundled_schema(bundled):
    assert bundled.schema.remove_metadata() == demo.SCHEMA
    assert bundled.column_names == ["user_id", "item", "count"]
    meta = pq.ParquetFile(demo.demo_population_path()).metadata
    assert meta.num_rows == 200_000
    assert meta.row_group(0).num_rows == demo.ROW_GROUP_SIZE
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert meta.row_group(0).column(1).has_dictionary_page


def test_bundled_users_hold_one_word_each(bundled):
    user_ids = bundled.column("user_id")
    assert len(pc.unique(user_ids)) == 200_000
    assert pc.min(user_ids).as_py() == 0 and pc.max(user_ids).as_py() == 199_999
    assert pc.all(pc.equal(bundled.column("count"), 1)).as_py()


def test_bundled_words_are_alphabetic(bundled):
    words = pc.unique(bundled.column("item")).to_pylist()
    assert 4000 < len(words) <= 5000
    assert all(w.isalpha() for w in words)


def test_bundled_top_words_are_english(bundled):
    top = demo.truth(demo.demo_population_path())
    assert top[0][0] == "the"
    assert sum(count for _, count in top) == 200_000  # one word per user
    top10 = {word for word, _ in top[:10]}
    assert {"the", "to", "of", "and", "a", "in"} <= top10
    # Zipf-like: "the" is about twice the second word, and far above the tail.
    assert 0.05 < top[0][1] / 200_000 < 0.08
    assert top[0][1] > 1.5 * top[1][1]
    assert top[-1][1] <= 3


def test_reading_does_not_need_wordfreq(tmp_path):
    code = (
        "import sys; sys.modules['wordfreq'] = None\n"
        "from triehh_beam.evaluation import demo\n"
        "print(demo.truth(demo.demo_population_path())[0][0])\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "the"


# --- regeneration -------------------------------------------------------------------------------


def test_regeneration_is_deterministic(tmp_path):
    pytest.importorskip("wordfreq")
    a = demo.make_population(str(tmp_path / "a.parquet"), users=3000, seed=7)
    b = demo.make_population(str(tmp_path / "b.parquet"), users=3000, seed=7)
    c = demo.make_population(str(tmp_path / "c.parquet"), users=3000, seed=8)
    rows_a = pq.read_table(a).to_pylist()
    assert rows_a == pq.read_table(b).to_pylist()
    assert rows_a != pq.read_table(c).to_pylist()
    assert [r["user_id"] for r in rows_a] == list(range(3000))
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()


def test_regenerating_the_bundled_file_gives_its_rows(tmp_path, bundled):
    pytest.importorskip("wordfreq")
    path = demo.make_population(str(tmp_path / "demo.parquet"))  # the documented defaults
    assert pq.read_table(path).equals(bundled)


def test_words_per_user(tmp_path):
    pytest.importorskip("wordfreq")
    path = demo.make_population(str(tmp_path / "k.parquet"), users=500, words_per_user=4, vocabulary=50)
    table = pq.read_table(path)
    per_user = table.group_by("user_id").aggregate([("count", "sum"), ("item", "count_distinct")])
    assert per_user.num_rows == 500
    assert pc.all(pc.equal(per_user.column("count_sum"), 4)).as_py()
    assert len(pc.unique(table.column("item"))) <= 50
    # One row per (user, word): repeats are merged into the count.
    pairs = list(zip(table.column("user_id").to_pylist(), table.column("item").to_pylist()))
    assert len(pairs) == len(set(pairs))


def test_vocabulary_filters_non_words():
    pytest.importorskip("wordfreq")
    words, freqs = demo.vocabulary_words(5000)
    assert len(words) == len(set(words)) == 5000
    assert words[0] == "the"
    assert all(w.isalpha() for w in words)
    assert not {"it's", "don't", "1", "00", "u.s"} & set(words)
    assert list(freqs) == sorted(freqs, reverse=True)
    assert demo._is_word("café") and demo._is_word("naïve")
    assert not demo._is_word("it's") and not demo._is_word("1st") and not demo._is_word("")


def test_invalid_arguments(tmp_path):
    with pytest.raises(ValueError):
        demo.make_population(str(tmp_path / "x.parquet"), users=0)
    with pytest.raises(ValueError):
        demo.make_population(str(tmp_path / "x.parquet"), users=10, words_per_user=0)
    with pytest.raises(ValueError, match="first_user_id"):
        demo.make_population(str(tmp_path / "x.parquet"), users=10, first_user_id=-1)
    with pytest.raises(ValueError, match="first_user_id"):
        demo.make_population(str(tmp_path / "x.parquet"), users=10, first_user_id=2**63 - 10)


def test_first_user_id_shifts_the_ids_and_keeps_the_draws(tmp_path):
    pytest.importorskip("wordfreq")
    plain = pq.read_table(demo.make_population(str(tmp_path / "a.parquet"), users=800, seed=7))
    shifted_path = demo.make_population(str(tmp_path / "b.parquet"), users=800, seed=7, first_user_id=10**12)
    shifted = pq.read_table(shifted_path)
    assert shifted.column("user_id").to_pylist() == [10**12 + u for u in range(800)]
    assert shifted.column("item").to_pylist() == plain.column("item").to_pylist()
    assert b'"first_user_id": 1000000000000' in pq.read_schema(shifted_path).metadata[demo.METADATA_KEY]
    assert b"first_user_id" not in pq.read_schema(str(tmp_path / "a.parquet")).metadata[demo.METADATA_KEY]


def test_main_writes_and_summarises(tmp_path, capsys):
    pytest.importorskip("wordfreq")
    out = tmp_path / "m.parquet"
    assert demo.main(["--output", str(out), "--users", "1000", "--words-per-user", "2", "--top", "3"]) == 0
    assert pq.read_table(out).group_by("user_id").aggregate([]).num_rows == 1000
    printed = capsys.readouterr().out
    assert "1,000 users" in printed and " 1. " in printed


# --- truth ----------------------------------------------------------------------------------


def test_truth_matches_a_counter(tmp_path):
    pytest.importorskip("wordfreq")
    path = demo.make_population(str(tmp_path / "t.parquet"), users=2000, words_per_user=3, vocabulary=200, seed=3)
    table = pq.read_table(path)
    holders = collections.defaultdict(set)
    for user, item in zip(table.column("user_id").to_pylist(), table.column("item").to_pylist()):
        holders[item].add(user)
    counter = collections.Counter({item: len(users) for item, users in holders.items()})
    expected = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    assert demo.truth(path) == expected


def test_truth_counts_users_not_records(tmp_path):
    path = tmp_path / "hand.parquet"
    table = pa.table(
        {"user_id": [1, 1, 2, 3, 3, 4], "item": ["b", "b", "b", "a", "c", "a"], "count": [5, 1, 1, 1, 1, 1]},
        schema=demo.SCHEMA,
    )
    pq.write_table(table, path)
    # b: users 1, 2; a: users 3, 4; c: user 3. Ties broken by word.
    assert demo.truth(str(path)) == [("a", 2), ("b", 2), ("c", 1)]
