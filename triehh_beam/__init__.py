"""triehh-beam: private heavy-hitter discovery with the TrieHH protocol.

The top-level package is the protocol in plain Python (no Beam import), usable on devices and
in tests: encoding, the trie, sampling, the client vote, counting, the privacy planner,
Proposition 1, metrics and the reference simulation. The Beam glue lives in
``triehh_beam.beam``; the multi-round driver in ``triehh_beam.job.driver``; the state store in
``triehh_beam.job.state_store``; the command-line tool in ``triehh_beam.cli``.
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
