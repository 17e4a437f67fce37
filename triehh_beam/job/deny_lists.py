"""Deny lists across runs (``--deny-list``): earlier releases' heavy hitters, which a new run's
sampled users do not vote for (``vote.client_vote``'s ``denied``: each draws among its other
items, abstaining if it holds none), so that a recurring discovery spends its rounds on what is
new. Each file must be a ``heavy_hitters.json`` that a discovery published (its
``heavy_hitters``, ``privacy`` and ``encoding`` blocks): the list is then post-processing of
released DP outputs and costs nothing more, which a hand-written list of raw data would not be
(README, "Deny lists across runs"). Files are read through Beam's ``FileSystems`` (local or
``gs://``). Matching is in the encoded sequence space: each listed item is encoded with this
job's encoder (``ItemEncoder.encode``, the complete item with its terminator), so an earlier run
with another unit size or L is usable whenever its items encode here; an earlier run whose items
mean something else (another item type, case folding or tokenisation) is refused, and so is an
item this job cannot encode (too long for its L, or not of its type), naming the file and the
item. The ``digest`` of the sorted encoded items and the sorted file list is part of the job's
identity (a resume with another list, or a changed file, is refused); ``items_digest``, of the
items alone, is what the published result records.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

from triehh_beam.job.paths import canonical_path
from triehh_beam.protocol.encoding import EncodingError, ItemEncoder, ItemKind, ItemTooLongError, Units

__all__ = ["DenyList", "DenyListError", "load", "parse_paths", "sequences_digest"]

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
      DenyListError: a file that cannot be read, is not a published ``heavy_hitters.json``, was
        encoded with another item meaning, or lists an item this job cannot encode.
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
        sequences.update(_encode(path, document, encoder))
    frozen = frozenset(sequences)
    return DenyList(tuple(files), frozen, sequences_digest(frozen, encoder, files),
                    sequences_digest(frozen, encoder))
