"""Counts in words (triehh_beam/job/release/wording.py): the singular for exactly one, thousands
separated, bad counts refused."""

import pytest

from triehh_beam.job.release.wording import counted


@pytest.mark.parametrize("count, noun, plural, says", [
    (0, "round", None, "0 rounds"),
    (1, "round", None, "1 round"),
    (2, "round", None, "2 rounds"),
    (1, "heavy hitter", None, "1 heavy hitter"),
    (1200, "record", None, "1,200 records"),
    (1, "entry", "entries", "1 entry"),
    (3, "entry", "entries", "3 entries"),
])
def test_counted_is_singular_for_one_only(count, noun, plural, says):
    assert counted(count, noun, plural) == says


@pytest.mark.parametrize("count", [-1, 1.0, True, None, "1"])
def test_counted_refuses_what_is_not_a_count(count):
    with pytest.raises(ValueError, match="whole number"):
        counted(count, "round")


def test_counted_refuses_an_empty_noun():
    with pytest.raises(ValueError, match="noun"):
        counted(1, "")
