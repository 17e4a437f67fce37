"""Tests of triehh_beam.io.files: the one function that turns file patterns into paths."""

from __future__ import annotations

import pytest

from triehh_beam.io.files import match_files, split_patterns


def test_patterns_match_sorted_distinct_paths(tmp_path):
    for name in ("b.csv", "a.csv", "c.jsonl"):
        (tmp_path / name).write_text("user_id,item\n")
    paths = match_files(f"{tmp_path}/*.csv, {tmp_path}/a.csv,{tmp_path}/c.*")
    assert paths == [str(tmp_path / n) for n in ("a.csv", "b.csv", "c.jsonl")]
    assert match_files([str(tmp_path / "c.jsonl")]) == [str(tmp_path / "c.jsonl")]


def test_a_list_keeps_commas_in_paths(tmp_path):
    (tmp_path / "a,b.csv").write_text("user_id,item\n")
    assert match_files([str(tmp_path / "a,b.csv")]) == [str(tmp_path / "a,b.csv")]
    with pytest.raises(FileNotFoundError):
        match_files(str(tmp_path / "a,b.csv"))  # as a string: two patterns


def test_a_pattern_matching_nothing_is_named(tmp_path):
    (tmp_path / "a.csv").write_text("user_id,item\n")
    with pytest.raises(FileNotFoundError, match=r"no records files match '.*missing-\*\.csv'"):
        match_files(f"{tmp_path}/a.csv,{tmp_path}/missing-*.csv")


def test_bad_patterns():
    assert split_patterns(" a.csv , b.csv") == ("a.csv", "b.csv")
    for bad in ("", "a.csv,,b.csv", [], ["a.csv", ""]):
        with pytest.raises(ValueError, match="non-empty patterns"):
            split_patterns(bad)
    with pytest.raises(TypeError):
        split_patterns(42)
