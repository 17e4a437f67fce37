"""triehh-beam: private heavy-hitter discovery with the TrieHH protocol, in layers: the pure
protocol (``triehh_beam.protocol``: no Beam, no Arrow, no files, so it runs on devices and in
tests), Arrow readers (``io``), thin Beam transforms (``beam``), operating a job (``job``: config,
driver, state, ledger), evaluation and the ``triehh`` tool (``cli``). The names below are the
protocol's, re-exported for convenience and imported on first use (PEP 562), so that importing
any module of the package (the ``triehh`` tool's parser, say) costs neither Beam nor SciPy.
"""

import importlib

# Each re-exported name and the module that defines it.
_EXPORTS = {
    "PrefixCounter": "triehh_beam.protocol.counting",
    "EmptyItemError": "triehh_beam.protocol.encoding",
    "EncodingError": "triehh_beam.protocol.encoding",
    "ItemEncoder": "triehh_beam.protocol.encoding",
    "ItemKind": "triehh_beam.protocol.encoding",
    "ItemTooLongError": "triehh_beam.protocol.encoding",
    "Plan": "triehh_beam.protocol.planner",
    "plan": "triehh_beam.protocol.planner",
    "DPGuarantee": "triehh_beam.protocol.privacy",
    "PrivacyConditionError": "triehh_beam.protocol.privacy",
    "compose": "triehh_beam.protocol.privacy",
    "theorem1": "triehh_beam.protocol.privacy",
    "Sampler": "triehh_beam.protocol.sampling",
    "SmallestRanks": "triehh_beam.protocol.sampling",
    "user_id_bytes": "triehh_beam.protocol.sampling",
    "TrieFormatError": "triehh_beam.protocol.messages",
    "Trie": "triehh_beam.protocol.trie",
    "discovery_probability": "triehh_beam.protocol.utility",
    "min_frequency": "triehh_beam.protocol.utility",
    "min_population": "triehh_beam.protocol.utility",
    "choose_sequence": "triehh_beam.protocol.vote",
    "client_vote": "triehh_beam.protocol.vote",
    "prefix_vote": "triehh_beam.protocol.vote",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    """A re-exported name, imported from its module the first time it is asked for."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
