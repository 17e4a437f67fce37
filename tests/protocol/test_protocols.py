import re

import pytest

from triehh_beam.protocol.protocols import Protocol


def test_values_are_the_names_flags_states_and_outputs_use():
    assert [p.value for p in Protocol] == ["triehh", "triehh++", "sample-threshold", "partition-selection",
                                       "noisy-rounds"]
    assert Protocol.TRIEHH_PP == "triehh++"  # compares equal to the recorded string


def test_parse_names_the_choices_for_an_unknown_protocol():
    assert Protocol.parse("sample-threshold") is Protocol.WHOLE_ITEMS
    message = "unknown protocol 'triehh+'; choose one of triehh, triehh++, sample-threshold"
    with pytest.raises(ValueError, match=re.escape(message)):
        Protocol.parse("triehh+")


@pytest.mark.parametrize("protocol, by_probability, trie, threshold", [
    (Protocol.TRIEHH, False, True, "theta"),
    (Protocol.TRIEHH_PP, True, True, "tau"),
    (Protocol.WHOLE_ITEMS, True, False, "tau"),
    (Protocol.PARTITION_SELECTION, True, False, "tau"),
])
def test_what_each_protocol_implies(protocol, by_probability, trie, threshold):
    assert protocol.samples_by_probability is by_probability
    assert protocol.grows_trie is trie
    assert protocol.threshold_name == threshold
    assert protocol.selects_partitions is (protocol is Protocol.PARTITION_SELECTION)
