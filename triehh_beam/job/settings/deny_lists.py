"""Deny lists across runs (``--deny-list``): earlier releases' heavy hitters, which a new run's
sampled users do not vote for (each draws among its other items, or abstains), so that a
recurring discovery spends its rounds on what is new. Each file must be a ``heavy_hitters.json``
this product published, checked for consistency (its plan's fields, its items' encoding, no round
holding more prefixes than its plan could release), so that the list is post-processing of
released outputs and costs no budget; its items are matched in this job's encoded sequences, and
a file whose items mean something else, or an item this job cannot encode, is refused naming the
file. The digest of the items and files is part of the job's identity.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
from typing import Any, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

from triehh_beam.job.settings.paths import canonical_path
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.items.encoding import (EncodingError, ItemEncoder, ItemKind, ItemTooLongError,
                                                 Units)
from triehh_beam.protocol.protocols import Protocol

__all__ = ["DenyList", "DenyListError", "load", "parse_paths", "sequences_digest", "state_record"]

# The encoding fields that say what an item IS (its normal form), as heavy_hitters.json writes
# them: an earlier run that differs in one of these published other items. Unit size, L and the
# long-item policy only say how items were cut into units: the items re-encode here.
_SAME_MEANING = ("kind", "case_fold", "tokenizer")
_REQUIRED = ("heavy_hitters", "privacy", "encoding")
_ONLY_RELEASES = ("a deny list must be an earlier DP release, never a hand-written list of raw data "
                  "(README, Deny lists across runs)")


class DenyListError(ValueError):
    """A deny-list file refused: the message names the file and why."""


@dataclasses.dataclass(frozen=True)
class DenyList:
    """The deny set of a job.

    Attributes:
      files: the files, canonical, in the order given (repeats dropped).
      sequences: the union of their heavy hitters, encoded with the job's encoder.
      digest: SHA-256 (hex) of the sorted encoded items and the sorted files: the job identity's.
      items_digest: SHA-256 (hex) of the sorted encoded items alone (published).
    """

    files: Tuple[str, ...]
    sequences: FrozenSet[Units]
    digest: str
    items_digest: str

    @property
    def size(self) -> int:
        return len(self.sequences)


def state_record(deny: DenyList) -> state_pb2.DenyList:
    """What a job's state records of its deny list (``JobState.deny_list``: a batch job's, a
    window's): the digests, the number of items and the files, never the items."""
    return state_pb2.DenyList(digest=deny.digest, items=deny.size, files=deny.files, items_digest=deny.items_digest)


def parse_paths(text: str) -> Tuple[str, ...]:
    """``--deny-list``'s value: one path, or several separated by commas (as ``--input``)."""
    paths = tuple(part.strip() for part in str(text).split(",") if part.strip())
    if not paths:
        raise ValueError("--deny-list needs at least one heavy_hitters.json path")
    return paths


def _hex_units(sequence: Units, encoder: ItemEncoder) -> List[str]:
    return [encoder.unit_to_bytes(u).hex() for u in sequence]


def sequences_digest(sequences: Iterable[Units], encoder: ItemEncoder, files: Sequence[str] = ()) -> str:
    """SHA-256 (hex) of canonical JSON of the sorted encoded items (units as hex) and, when
    given, the sorted files."""
    document: dict = {"items": sorted(_hex_units(s, encoder) for s in sequences)}
    if files:
        document["files"] = sorted(files)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _read(path: str) -> Mapping[str, Any]:
    from apache_beam.io.filesystems import FileSystems

    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            raw = f.read()
    except (IOError, OSError) as e:
        raise DenyListError(f"--deny-list {path}: cannot read it ({e})") from None
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DenyListError(f"--deny-list {path}: not a heavy_hitters.json (not JSON: {e}): {_ONLY_RELEASES}") from None
    missing = [k for k in _REQUIRED if not isinstance(document, dict) or k not in document]
    if missing or not isinstance(document.get("heavy_hitters"), list) or not all(
            isinstance(document.get(k), dict) for k in ("privacy", "encoding")):
        raise DenyListError(
            f"--deny-list {path}: not a heavy_hitters.json published by a discovery (no "
            f"{', '.join(missing or ['valid heavy_hitters, privacy and encoding blocks'])}): {_ONLY_RELEASES}")
    return document


def _encoding_of(encoder: ItemEncoder) -> dict:
    return {"kind": encoder.kind.value, "case_fold": encoder.case_fold, "tokenizer": encoder.tokenizer_id or None}


def _check_encoding(path: str, theirs: Mapping[str, Any], encoder: ItemEncoder) -> None:
    ours = _encoding_of(encoder)
    differ = [k for k in _SAME_MEANING if theirs.get(k) != ours[k]]
    if differ:
        described = ", ".join(f"{k} {theirs.get(k)!r} there, {ours[k]!r} here" for k in differ)
        raise DenyListError(
            f"--deny-list {path}: its items were encoded differently ({described}): they are not "
            "this job's items; give only results of runs with the same item type, case folding and "
            "tokenisation (unit size and L may differ)")


# Relative slack when comparing published floats with what they are computed from.
_CLOSE = 1e-9


class _NotARelease(Exception):
    """What makes a document other than one this product publishes (one phrase)."""


def _number(block: Mapping[str, Any], name: str, low: float = 0.0, high: float = math.inf,
            integer: bool = False, low_open: bool = True) -> Any:
    value = block.get(name)
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
        raise _NotARelease(f"its privacy block has no valid {name} ({value!r})")
    if value < low or (low_open and value == low) or value > high:
        raise _NotARelease(f"its privacy block's {name} {value!r} is outside what a plan records")
    return value


def _plan_bound(privacy: Mapping[str, Any]) -> Tuple[Optional[int], str]:
    """The published plan checked for consistency, and what it bounds: the most prefixes one
    round can keep (None when the plan does not publish what bounds it: n private) and how."""
    protocol = privacy.get("protocol")
    if protocol not in tuple(Protocol):
        raise _NotARelease(f"its plan names protocol {protocol!r}, none this product runs")
    if Protocol(protocol).selects_partitions:
        raise _NotARelease(f"a {protocol} release is not a deny list yet (its items need no trie to deny)")
    if Protocol(protocol).noises_rounds:
        raise _NotARelease(f"a {protocol} release is not a deny list yet (not built for its plan)")
    if not isinstance(privacy.get("guarantee"), str) or not isinstance(privacy.get("rule"), str):
        raise _NotARelease("its privacy block has no guarantee or rule")
    public = privacy.get("population_public")
    if not isinstance(public, bool):
        raise _NotARelease("its privacy block does not say whether n is public")
    target_epsilon = _number(privacy, "target_epsilon")
    target_delta = _number(privacy, "target_delta", high=1.0)
    _number(privacy, "max_length", low=2, integer=True, low_open=False)
    n = _number(privacy, "population", low=1, integer=True, low_open=False) if public else None
    if not Protocol(protocol).samples_by_probability:
        theta = _number(privacy, "theta", low=1, integer=True, low_open=False)
        guaranteed = privacy.get("epsilon") is not None
        if public and guaranteed and (_number(privacy, "epsilon") > target_epsilon * (1 + _CLOSE)
                                      or _number(privacy, "delta") > target_delta * (1 + _CLOSE)):
            raise _NotARelease("its achieved (epsilon, delta) exceeds its target")
        if not public:
            return None, "n private: m and so floor(m / theta) are not published"
        m = _number(privacy, "batch_size", low=1, integer=True, low_open=False)
        if m > n:
            raise _NotARelease(f"its batch size {m:,} exceeds its population {n:,}")
        return m // theta, f"floor(batch_size / theta) = floor({m:,} / {theta})"
    tau = _number(privacy, "tau", low=1, integer=True, low_open=False)
    alpha = _number(privacy, "alpha", high=1.0)
    p_s = _number(privacy, "sample_probability", high=1.0)
    eps_r = _number(privacy, "round_epsilon")
    if abs(p_s - alpha * -math.expm1(-eps_r)) > _CLOSE * p_s:
        raise _NotARelease("its sample_probability is not alpha (1 - e^-round_epsilon)")
    if (_number(privacy, "epsilon") > target_epsilon * (1 + _CLOSE)
            or _number(privacy, "delta") > target_delta * (1 + _CLOSE)):
        raise _NotARelease("its (epsilon, delta) exceeds its target")
    if not public:
        return None, "n private: the users sampled are not bounded by what is published"
    return n // tau, f"floor(population / tau) = floor({n:,} / {tau}): a round samples at most n users"


def _own_encoder(encoding: Mapping[str, Any], max_length: int) -> ItemEncoder:
    """The encoder the file's own job used (its encoding block and L)."""
    try:
        return ItemEncoder(ItemKind(encoding.get("kind")), unit_size=encoding.get("unit_size"),
                           max_length=max_length, case_fold=encoding.get("case_fold") is True,
                           int_bits=encoding.get("int_bits"), tokenize=bool(encoding.get("tokenizer")))
    except (TypeError, ValueError) as e:
        raise _NotARelease(f"its encoding block is not one this product writes ({e})") from None


def _check_release(path: str, document: Mapping[str, Any]) -> None:
    """Refuses a document whose content is not what this product publishes: its plan's fields
    inconsistent, an item that its own encoding could not have discovered in the rounds it ran,
    repeated items, or more prefixes in a round than its plan could release."""
    try:
        privacy = document["privacy"]
        bound, how = _plan_bound(privacy)
        rounds = document.get("rounds_run")
        if (isinstance(rounds, bool) or not isinstance(rounds, int) or not 0 <= rounds <= privacy["max_length"]
                or not isinstance(document.get("frequent_prefixes"), list)
                or not all(isinstance(document.get(k), str) for k in ("stop_reason", "job_id", "created_at"))):
            raise _NotARelease("its rounds_run, frequent_prefixes, stop_reason, job_id or created_at is "
                               "missing or not what a discovery writes")
        if document["encoding"].get("long_items") not in ("drop", "truncate"):
            raise _NotARelease("its encoding block has no long_items policy")
        encoder = _own_encoder(document["encoding"], privacy["max_length"])
        sequences = []
        for entry in document["heavy_hitters"]:
            value = _item_value(entry, encoder.kind, path)
            try:
                sequences.append(encoder.encode(value))
            except EncodingError as e:
                raise _NotARelease(f"heavy hitter {value!r} cannot be encoded under its own encoding ({e})") from None
        if len(set(sequences)) != len(sequences):
            raise _NotARelease("it lists a heavy hitter more than once")
        whole_items = privacy["protocol"] == Protocol.WHOLE_ITEMS
        deepest = max((len(s) for s in sequences), default=0)
        if not whole_items and deepest > rounds:
            raise _NotARelease(f"a heavy hitter of {deepest} units, beyond its {rounds} rounds")
        if whole_items:  # one release: the items, no trie
            _check_whole_item_counts(document, privacy, sequences, encoder)
            levels = [(1, len(sequences), "items")]
        else:  # round r keeps every distinct length-r prefix of the heavy hitters (and more)
            levels = [(r, len({s[:r] for s in sequences if len(s) >= r}), f"prefixes of {r} units")
                      for r in range(1, deepest + 1)]
        for r, count, what in levels:
            if bound is not None and count > bound:
                raise _NotARelease(
                    f"{count:,} {what} in its heavy hitters, more than {'its release' if whole_items else f'round {r}'} "
                    f"could keep under its own plan ({how} = {bound:,})")
    except _NotARelease as e:
        raise DenyListError(f"--deny-list {path}: not a release this product published: {e}: {_ONLY_RELEASES}") from None


def _check_whole_item_counts(document: Mapping[str, Any], privacy: Mapping[str, Any], sequences: List[Units],
                             encoder: ItemEncoder) -> None:
    """A whole-item release's ``released`` counts: one per heavy hitter, each at least tau,
    their sum (one report per sampled user) within n when n is published."""
    released = document.get("released")
    if not isinstance(released, list) or len(released) != len(sequences):
        raise _NotARelease("its released counts do not match its heavy hitters")
    counts = [entry.get("count") if isinstance(entry, dict) else None for entry in released]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= privacy["tau"] for c in counts):
        raise _NotARelease(f"a released count is below its tau {privacy['tau']} or not a count")
    if privacy.get("population_public") and sum(counts) > privacy["population"]:
        raise _NotARelease(f"its released counts add up to {sum(counts):,} reports, more than its "
                           f"{privacy['population']:,} users")


def _item_value(entry: Any, kind: ItemKind, path: str) -> Any:
    """A published heavy hitter as the item it is: text as is, bytes from hex, an integer."""
    value = entry.get("item") if isinstance(entry, dict) else entry  # with estimates: an object
    try:
        if kind is ItemKind.BYTES and isinstance(value, str):
            return bytes.fromhex(value)
        if kind is ItemKind.INT and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is ItemKind.TEXT and isinstance(value, str):
            return value
    except ValueError:
        pass
    raise DenyListError(f"--deny-list {path}: heavy hitter {entry!r} is not a {kind.value} item as "
                        "heavy_hitters.json writes them")


def _encode(path: str, document: Mapping[str, Any], encoder: ItemEncoder) -> List[Units]:
    sequences = []
    for entry in document["heavy_hitters"]:
        value = _item_value(entry, encoder.kind, path)
        try:
            sequences.append(encoder.encode(value))
        except ItemTooLongError:
            raise DenyListError(
                f"--deny-list {path}: heavy hitter {value!r} is longer than this job's --max-length "
                f"{encoder.max_length} allows at --unit-size {encoder.unit_size}: no user can vote for it "
                "here, so listing it means another encoding; raise L or leave this file out") from None
        except EncodingError as e:
            raise DenyListError(f"--deny-list {path}: heavy hitter {value!r} cannot be encoded here ({e})") from None
    return sequences


def load(paths: Optional[Sequence[str]], encoder: ItemEncoder) -> Optional[DenyList]:
    """The deny set of ``paths`` (None when there are none), every file read and checked.

    Raises:
      DenyListError: a file that cannot be read, is not a published ``heavy_hitters.json`` (in
        shape or in content: ``_check_release``), was encoded with another item meaning, or
        lists an item this job cannot encode.
    """
    if not paths:
        return None
    files: List[str] = []
    for path in paths:
        canonical = canonical_path(path)
        if canonical not in files:
            files.append(canonical)
    sequences = set()
    for path in files:
        document = _read(path)
        _check_encoding(path, document["encoding"], encoder)
        _check_release(path, document)
        sequences.update(_encode(path, document, encoder))
    frozen = frozenset(sequences)
    return DenyList(tuple(files), frozen, sequences_digest(frozen, encoder, files),
                    sequences_digest(frozen, encoder))
