"""A job's identity, from its settings: what its state records (``recorded``, ``input_spec``), the
canonical JSON mixed into every key derived from the seed (``sampling_identity``, and a windowed
job's ``window_identity``), and what differs between a configuration and a committed state
(``resume_mismatches``), so that a resume under other settings is refused before it samples.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Sequence

from triehh_beam.job.settings.fields import BY_NAME, ENCODING, SETTINGS, DiscoverySettings
from triehh_beam.job.settings.paths import canonical_path, canonical_pattern
from triehh_beam.job.settings.setting import Setting
from triehh_beam.job.settings.sources import describe_input
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.protocols import Protocol

__all__ = ["input_spec", "recorded", "resume_mismatches", "sampling_identity", "window_identity"]

# What a windowed job's identity leaves out: where the records come from and where results go.
_WHERE = ("input_pattern", "output_dir", "input_format", "user_column", "item_column", "count_column",
          "timestamp_column")


def recorded(config: DiscoverySettings, item: Setting) -> Any:
    """The value of an identity setting as a job's state records it."""
    return item.record(config) if item.record is not None else getattr(config, item.name)


def input_spec(config: DiscoverySettings) -> state_pb2.InputSpec:
    """The ``InputSpec`` a job's state records: every setting whose identity is ``input.*``."""
    return state_pb2.InputSpec(**{
        item.identity.split(".", 1)[1]: recorded(config, item)
        for item in SETTINGS
        if item.identity and item.identity.startswith("input.")
    })


def sampling_identity(config: DiscoverySettings) -> bytes:
    """The job's identity, mixed into every key derived from the seed (``Sampler``).

    A canonical JSON object of every ``keyed`` setting (input, output, target, encoding,
    reading options; never the seed or the ledger), the input pattern and the output in their
    canonical forms (``paths``: ``out/``, ``./out`` and ``/home/me/out`` run from ``/home/me``
    are one output): a job's retries and resumes record and compare the same identity from any
    working directory, while two jobs that share a seed file (two dates of a schedule) differ in
    it. Keys are derived from it and the release's nonce together (``release.Release``).
    """
    values = _keyed_values(config)
    for name, canonical in (("input_pattern", canonical_pattern), ("output_dir", canonical_path)):
        if isinstance(values.get(name), str):
            values[name] = canonical(values[name])
    return _canonical_json("triehh-beam/job-identity", values)


def window_identity(config: DiscoverySettings) -> bytes:
    """The identity of a windowed job (``sampling.WindowKeys``): every keyed setting but where
    the records come from and where results go (so the stream and a bounded replay of the
    same records, given one seed file, sample alike), with the window length."""
    values = _keyed_values(config, skip=_WHERE)
    values["window"] = config.window
    return _canonical_json("triehh-beam/window-identity", values)


def resume_mismatches(config: DiscoverySettings, state: state_pb2.JobState, state_encoder: ItemEncoder) -> List[str]:
    """What differs between ``config`` and a job's committed state, each in a few words (never
    the secret seed): every identity setting (``Setting.identity``), the item encoding of the
    state's trie (``state_encoder``) and the recorded sampling identity. Empty: the job may
    resume."""
    mismatches = []
    if state.input.SerializeToString(deterministic=True) != input_spec(config).SerializeToString(deterministic=True):
        mismatches.append(f"input (state has {describe_input(state.input)})")
    for item in SETTINGS:
        if item.identity is None or item.identity.startswith("input.") or item.identity == ENCODING:
            continue
        if item.compare == "given" and getattr(config, item.name) is None:
            continue
        ours, theirs = recorded(config, item), _state_value(state, item.identity)
        if ours != theirs:
            mismatches.append(item.mismatch.format(name=item.name, ours=ours, theirs=theirs))
    if state_encoder != config.encoder:
        mismatches.append("item encoding (unit size or case folding)")
    theirs, ours = json.loads(state.sampling_identity), json.loads(sampling_identity(config))
    names = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
    # The identity keys every sample: a resume under another would draw other users.
    unnamed = [n for n in names if n not in BY_NAME or BY_NAME[n].identity is None]
    if unnamed or (names and not mismatches):
        mismatches.append(f"job identity ({', '.join(unnamed or names)}: the samples are keyed by it)")
    return mismatches


# Settings only --protocol noisy-rounds reads: keyed for it alone, so that adding them left every
# other protocol's identity (and the keys, and a resume of a state written before) as it was.
_NOISY_ROUNDS_ONLY = ("alphabet", "false_prefixes")


def _keyed_values(config: DiscoverySettings, skip: Sequence[str] = ()) -> Dict[str, Any]:
    """Every keyed setting's value by name, but ``skip`` (and the noisy rounds' own settings
    under another protocol)."""
    if not Protocol(config.protocol).noises_rounds:
        skip = (*skip, *_NOISY_ROUNDS_ONLY)
    return {item.name: getattr(config, item.name) for item in SETTINGS if item.keyed and item.name not in skip}


def _canonical_json(kind: str, values: Dict[str, Any]) -> bytes:
    text = json.dumps({kind: 1, **values}, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)
    return text.encode("ascii")


def _state_value(state: state_pb2.JobState, path: str) -> Any:
    value: Any = state
    for part in path.split("."):
        value = getattr(value, part)
    return value
