"""``job.federated_secagg``'s checks before anything is announced: the encodings and modes secure
aggregation covers, and a plan selecting fewer devices per round than one cohort's minimum."""

import pytest

from triehh_beam.job.federated_secagg import SecureAggregation
from triehh_beam.protocol.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.secagg.cohorts import CohortPolicy


def test_text_of_one_character_units_is_covered():
    SecureAggregation().check(ItemEncoder(max_length=8), estimate_frequencies=False)
    SecureAggregation(alphabet="ab").check(ItemEncoder(max_length=8, case_fold=True), estimate_frequencies=False)


@pytest.mark.parametrize("encoder, estimate, match", [
    (ItemEncoder(max_length=8), True, "--estimate-frequencies is not built"),
    (ItemEncoder(max_length=8, unit_size=2), False, "one-character units"),
    (ItemEncoder(kind=ItemKind.BYTES, max_length=8), False, "one-character units"),
])
def test_what_is_not_covered_is_refused(encoder, estimate, match):
    with pytest.raises(ValueError, match=match):
        SecureAggregation().check(encoder, estimate)


def test_a_plan_below_one_cohort_is_refused():
    secure = SecureAggregation(CohortPolicy(max_size=100, min_size=20))
    secure.check_selection(20)
    with pytest.raises(ValueError, match="selects 19.5 devices per round, fewer than one cohort's minimum"):
        secure.check_selection(19.5)


def test_a_repeated_alphabet_character_is_refused():
    with pytest.raises(ValueError, match="distinct characters"):
        SecureAggregation(alphabet="abca")
