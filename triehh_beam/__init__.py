"""triehh-beam: private heavy-hitter discovery with the TrieHH protocol, in layers: the pure
protocol (``triehh_beam.protocol``: no Beam, no Arrow, no files, so it runs on devices and in
tests), Arrow readers (``io``), thin Beam transforms (``beam``), operating a job (``job``: config,
driver, state, ledger), evaluation and the ``triehh`` tool (``cli``). The names below are the
protocol's, re-exported for convenience; importing this package does not import Beam.
"""

from triehh_beam.protocol.counting import PrefixCounter
from triehh_beam.protocol.encoding import (
    EmptyItemError,
    EncodingError,
    ItemEncoder,
    ItemKind,
    ItemTooLongError,
)
from triehh_beam.protocol.planner import Plan, plan
from triehh_beam.protocol.privacy import DPGuarantee, PrivacyConditionError, compose, theorem1
from triehh_beam.protocol.sampling import Sampler, SmallestRanks, user_id_bytes
from triehh_beam.protocol.messages import TrieFormatError
from triehh_beam.protocol.trie import Trie
from triehh_beam.protocol.utility import discovery_probability, min_frequency, min_population
from triehh_beam.protocol.vote import choose_sequence, client_vote, prefix_vote

__all__ = [
    "DPGuarantee",
    "EmptyItemError",
    "EncodingError",
    "ItemEncoder",
    "ItemKind",
    "ItemTooLongError",
    "Plan",
    "PrefixCounter",
    "PrivacyConditionError",
    "Sampler",
    "SmallestRanks",
    "Trie",
    "TrieFormatError",
    "choose_sequence",
    "client_vote",
    "compose",
    "discovery_probability",
    "min_frequency",
    "min_population",
    "plan",
    "prefix_vote",
    "theorem1",
    "user_id_bytes",
]
