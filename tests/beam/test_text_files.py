"""``one_text_file``: a job's small output written as exactly one file at the path given."""

import apache_beam as beam
import pytest

from tests.pipeline_factory import new_pipeline
from triehh_beam.beam.text_files import one_text_file


def test_lines_are_written_to_exactly_the_path_given(tmp_path):
    path = tmp_path / "out" / "summary.json"
    lines = [f"line {i}" for i in range(50)]
    with new_pipeline() as p:
        _ = p | beam.Create(lines) | one_text_file(str(path))
    assert [f.name for f in path.parent.iterdir()] == ["summary.json"]  # no shard suffix, no second file
    assert sorted(path.read_text().splitlines()) == sorted(lines)


@pytest.mark.parametrize("path", ["", None, 3])
def test_a_path_that_is_not_a_non_empty_string_is_refused(path):
    with pytest.raises(ValueError, match="output path must be a non-empty string"):
        one_text_file(path)
