"""triehh-beam: private heavy-hitter discovery with the TrieHH protocol, in layers (the pure
``protocol``, Arrow readers in ``io``, thin Beam transforms in ``beam``, operating a job in
``job``, the ``triehh`` tool in ``cli``). The names below are the protocol's, re-exported and
imported on first use (PEP 562, ``lazy_exports``), so that importing any module of the package
costs neither Beam nor SciPy."""

import importlib
import sys
from typing import Callable, Dict, Tuple

# Each re-exported name and the module that defines it.
_EXPORTS = {
    "PrefixCounter": "triehh_beam.protocol.rounds.counting",
    "EmptyItemError": "triehh_beam.protocol.items.encoding",
    "EncodingError": "triehh_beam.protocol.items.encoding",
    "ItemEncoder": "triehh_beam.protocol.items.encoding",
    "ItemKind": "triehh_beam.protocol.items.encoding",
    "ItemTooLongError": "triehh_beam.protocol.items.encoding",
    "Plan": "triehh_beam.protocol.planning.planner",
    "plan": "triehh_beam.protocol.planning.planner",
    "DPGuarantee": "triehh_beam.protocol.accounting.privacy",
    "PrivacyConditionError": "triehh_beam.protocol.accounting.privacy",
    "compose": "triehh_beam.protocol.accounting.privacy",
    "theorem1": "triehh_beam.protocol.accounting.privacy",
    "Sampler": "triehh_beam.protocol.randomness.sampling",
    "SmallestRanks": "triehh_beam.protocol.randomness.sampling",
    "user_id_bytes": "triehh_beam.protocol.randomness.sampling",
    "TrieFormatError": "triehh_beam.protocol.rounds.wire",
    "Trie": "triehh_beam.protocol.rounds.trie",
    "discovery_probability": "triehh_beam.protocol.planning.utility",
    "min_frequency": "triehh_beam.protocol.planning.utility",
    "min_population": "triehh_beam.protocol.planning.utility",
    "choose_sequence": "triehh_beam.protocol.rounds.vote",
    "client_vote": "triehh_beam.protocol.rounds.vote",
    "prefix_vote": "triehh_beam.protocol.rounds.vote",
}

__all__ = sorted(_EXPORTS)


def lazy_exports(package: str, exports: Dict[str, str]) -> Tuple[Callable, Callable]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) that import each name of ``exports``
    (name -> the module defining it) from its module the first time it is asked for.

    The ``__getattr__`` raises AttributeError for any other name.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
