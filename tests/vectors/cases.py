"""The device test vectors' inputs (``generate.py`` adds the Python device's answers): record sets
of every item kind (unicode text, bytes, integers, several items with counts, items too long,
deny-listed words, nothing at all) crossed with vote and estimate rounds under a dozen encodings
and both long-item policies, choice words at the edges of [0, 2^64); then hand-made malformed
announcements and invitations (versions, encodings, frontiers and targets not canonically coded,
tokens, mismatches) and every cut and every one-bit flip of a few valid messages. Deterministic:
fixed seeds, no clock."""

from __future__ import annotations

import dataclasses
import random
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from triehh_beam.device import DeviceClient
from triehh_beam.proto import federated_pb2, trie_pb2, vote_pb2
from triehh_beam.protocol.estimates.frequency_estimates import EstimateTargets
from triehh_beam.protocol.federated.estimate import EstimateAnnouncement
from triehh_beam.protocol.federated.messages import Invitation, RoundAnnouncement
from triehh_beam.protocol.items.encoding import ItemEncoder, is_terminated

JOB = "job-vectors-7f3a"
DEADLINE = 1_790_000_000_000
DEVICE = b"device-0042"
#: Record sets of several kinds that get every round under every encoding (the others, one case).
DEEP = ("big_counts", "mixed_types")
WORDS = (0, (1 << 62) - 1, 1 << 62, (1 << 64) - 1)


@dataclasses.dataclass(frozen=True)
class RecordSet:
    """A device's records (item, count) pairs, its id (or None) and the item kinds it holds."""

    records: Tuple[Tuple[object, int], ...]
    kinds: Tuple[str, ...]
    device_id: Optional[bytes] = None

    def to_json(self) -> dict:
        return {"device_id": None if self.device_id is None else self.device_id.hex(),
                "records": [[_item_json(item), count] for item, count in self.records]}


def _item_json(item) -> dict:
    if isinstance(item, bool):
        return {"bool": item}
    if isinstance(item, int):
        return {"int": str(item)}
    if isinstance(item, bytes):
        return {"bytes": item.hex()}
    return {"text": item}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    records: str
    announcement: bytes
    invitation: bytes


def record_sets() -> Dict[str, RecordSet]:
    """name -> the record set (every case names one)."""
    rng = random.Random(29)
    words = ["the", "tree", "trees", "hello", "help", "he", "zebra", "ab", "abc", "abd", "a"]
    many = tuple((rng.choice(words), rng.randrange(0, 6)) for _ in range(40))
    sentences = (
        ("Hello, world! Don't stop: the tree, the TREE.", 2),
        ("東京タワー 々木 한국어 ＡＢＣ 123abc can’t e\u0301 \u0301x", 1),
        ("🇫🇷🇩🇪 👨\u200d👩\u200d👧 👍🏽 🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F 🫠", 3),
        ("soft\u00adhyphen zero\u200bwidth Straße İstanbul ΣΊΣΥΦΟΣ", 1),
        ("", 4), ("   ...   ", 2), (b"not text", 1), (7, 1),
    )
    return {
        **fuzz_record_sets(),
        "worked": RecordSet((("hello", 1), ("tree", 3)), ("text",)),
        "worked_with_id": RecordSet((("hello", 1), ("tree", 3)), ("text",), DEVICE),
        "unicode": RecordSet((("café", 2), ("cafe\u0301", 1), ("日本語テキスト", 3), ("𝔘𝔫𝔦𝔠𝔬𝔡𝔢", 1),
                              ("👍🏽ok", 2), ("\uffff\U0010FFFF", 1), ("\U0001F600", 1), ("ÅÅ", 1)), ("text",)),
        "casefold": RecordSet((("Straße", 1), ("STRASSE", 2), ("ﬁle", 1), ("İstanbul", 2), ("ΣΊΣΥΦΟΣ", 1),
                               ("ǅemal", 1), ("Ꭰꭰ", 1), ("ᾳ\u0345", 2), ("HELLO", 1)), ("text",)),
        "surrogates": RecordSet((("\ud800abc", 5), ("ok", 1), ("x\udfffy", 2)), ("text",)),
        "sentences": RecordSet(sentences, ("text",)),
        "bytes": RecordSet(((b"\x00\x01\x02", 2), (b"\xff\xfe", 1), (b"abc", 3), (b"", 4), (b"\x80" * 9, 1),
                            (b"\xff", 2), (b"\xff\x00", 1)), ("bytes",)),
        "ints": RecordSet(((0, 2), (-1, 1), (1, 1), (42, 3), (-42, 1), (127, 1), (-128, 2), (128, 5), (-129, 5),
                           (2**31 - 1, 1), (-(2**31), 1), (2**63 - 1, 1), (-(2**63), 1), (2**63, 4), (2**70, 4)),
                          ("int",)),
        "int_text": RecordSet(((" -7 ", 2), ("+5", 1), ("\u00a012\u3000", 1), ("1e3", 3), ("٣", 3), ("0x10", 3),
                               ("-0", 1), ("--1", 2), ("", 2)), ("int",)),
        "many": RecordSet(many, ("text",)),
        "long": RecordSet((("supercalifragilistic", 3), ("abcdefghij", 2), ("abcdefghi", 1), ("short", 1)),
                          ("text",)),
        "deny_listed": RecordSet((("password", 3), ("secret", 2), ("hello", 1)), ("text",)),
        "empty": RecordSet((), ("text", "bytes", "int")),
        "zeros": RecordSet((("a", 0), (b"b", 0), (3, 0)), ("text", "bytes", "int")),
        "big_counts": RecordSet((("a", 2**53 + 1), ("b", 2**62), ("c", 1), (b"a", 2**61), (b"b", 3), (5, 2**62),
                                 (6, 2**60 + 7)), ("text", "bytes", "int")),
        "mixed_types": RecordSet((("abc", 1), (b"abc", 2), (5, 3), (True, 4), ("12", 1)), ("text", "bytes", "int")),
    }


#: Characters the fuzzed text draws from: every class and script words-v1 tells apart, marks that
#: NFC composes, characters case folding expands, symbols, joiners, flags, tags, spaces.
_FUZZ_POOL = ("aZ09_-.,!?' \u2019\u00a0\u3000\t"
              "éÉçñÅ\u0301\u0308\u0327\u0345ßẞİıſﬁﬀŉǅΣσςΐΰЁёӁ"
              "東京木々〇ひらがなゝゞカタカナーヽヾｶﾀｰ한국어\u1100\u1161\u11a8ᄀ"
              "\u200b\u200c\u200d\u00ad\u2060\ufeff"
              "👍🏽🏿👨👩👧❤\ufe0f☃🇫🇷🇩🇪🏴\U000E0067\U000E0062\U000E007F\U0001FAE0\U0001FAFF"
              "𝔘𝔫𝐀𐐀𐐨Ꭰꭰ\uffff\U0010FFFF٣٤")


def _fuzz_text(rng: random.Random) -> str:
    text = "".join(rng.choice(_FUZZ_POOL) if rng.random() < 0.85 else chr(rng.choice(
        [rng.randrange(0x20, 0xD800), rng.randrange(0xE000, 0x30000)])) for _ in range(rng.randint(1, 14)))
    return text + "\ud83d" if rng.random() < 0.03 else text  # now and then a lone surrogate


def fuzz_record_sets() -> Dict[str, RecordSet]:
    """Random text records (``_FUZZ_POOL``): what NFC, case folding and words-v1 must agree on."""
    rng = random.Random(4242)
    return {f"fuzz-text-{i:02d}": RecordSet(tuple((_fuzz_text(rng), rng.randint(1, 3))
                                                  for _ in range(rng.randint(1, 3))), ("fuzz",))
            for i in range(80)}


def fuzz_cases(rng: random.Random) -> Iterator[Case]:
    """The fuzzed records in estimate rounds whose targets are every sequence they hold, so that a
    report names a whole item: three draws under four text encodings each."""
    chosen = ("words-casefold", "words", "text-3-casefold", "text-1")
    for set_name, record_set in fuzz_record_sets().items():
        device = DeviceClient(record_set.records, record_set.device_id)
        for enc_name in chosen:
            encoder, too_long = encoders()[enc_name]
            held = sorted({s for s, _ in device.weighted_sequences(encoder, too_long == "truncate")})
            kept = [t for i, t in enumerate(held) if not any(t[:len(k)] == k for k in held[:i])]
            decoy = _decoy(encoder, 2)
            targets = EstimateTargets(tuple(kept) if kept else (decoy,))
            e = encoder.max_length + 1
            announcement = EstimateAnnouncement(JOB, e, encoder, targets, DEADLINE, 0, too_long).to_bytes()
            for word in (0, 1 << 63, rng.getrandbits(64)):
                yield Case(f"{set_name}/{enc_name}/estimate-{e}/word-{word:016x}", set_name, announcement,
                           _invitation(e, word, estimate=True))


def encoders() -> Dict[str, Tuple[ItemEncoder, str]]:
    """name -> (encoder, long-item policy)."""
    return {
        "text-1": (ItemEncoder(max_length=10), "drop"),
        "text-1-truncate": (ItemEncoder(max_length=6), "truncate"),
        "text-2": (ItemEncoder(unit_size=2, max_length=6), "truncate"),
        "text-3-casefold": (ItemEncoder(unit_size=3, max_length=5, case_fold=True), "drop"),
        "words-casefold": (ItemEncoder(tokenize=True, case_fold=True, max_length=12), "drop"),
        "words": (ItemEncoder(tokenize=True, max_length=8), "truncate"),
        "bytes-1": (ItemEncoder(kind="bytes", max_length=8), "drop"),
        "bytes-3": (ItemEncoder(kind="bytes", unit_size=3, max_length=4), "truncate"),
        "int-8": (ItemEncoder(kind="int", int_bits=8, max_length=9), "drop"),
        "int-64-units-4": (ItemEncoder(kind="int", int_bits=64, unit_size=4, max_length=17), "drop"),
        "int-16-units-3": (ItemEncoder(kind="int", int_bits=16, unit_size=3, max_length=7), "drop"),
        "int-64-units-16": (ItemEncoder(kind="int", unit_size=16, max_length=3), "truncate"),
    }


def _token(seed: int) -> bytes:
    return bytes((seed * 37 + i * 11) % 256 for i in range(16))


def _invitation(round_index: int, word: int, estimate: bool = False, device: bytes = DEVICE) -> bytes:
    return Invitation(JOB, round_index, device, _token(round_index + word % 251), word, estimate).to_bytes()


def _decoy(encoder: ItemEncoder, length: int) -> Optional[Tuple]:
    """A prefix of ``length`` units no record set holds, or None if the encoding cannot make one."""
    item = {"text": "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", "bytes": b"\x7f" * 64, "int": 99}[encoder.kind.value]
    units = encoder.units(item)
    return tuple(units[:length]) if len(units) >= length else None


def _frontiers(sequences: Sequence[Tuple], encoder: ItemEncoder, round_index: int, rng) -> List[frozenset]:
    """A round's frontiers: every prefix the device holds plus a decoy, then half of them."""
    width = round_index - 1
    held = sorted({s[:width] for s in sequences if len(s) > width and not is_terminated(s[:width])})
    decoy = _decoy(encoder, width)
    full = set(held) | ({decoy} if decoy is not None else set())
    if not full:
        return []
    out = [frozenset(full)]
    if len(held) > 1:
        out.append(frozenset(held[::2]) | ({decoy} if decoy is not None else set()))
    return out


def _targets(sequences: Sequence[Tuple], encoder: ItemEncoder) -> List[EstimateTargets]:
    """Estimate targets: the device's items whole, then some as two-unit prefixes (prefix-free)."""
    whole = sorted(set(sequences))
    out = []
    decoy = _decoy(encoder, 2)
    candidates = [whole + ([decoy] if decoy else []), [s[:2] for s in whole][::2] + ([decoy] if decoy else [])]
    for chosen in candidates:
        kept: List[Tuple] = []
        for target in sorted(set(chosen)):
            if target and not any(target[:len(k)] == k or k[:len(target)] == target for k in kept):
                kept.append(target)
        if kept:
            out.append(EstimateTargets(tuple(kept)))
    return out


def round_cases(rng: random.Random) -> Iterator[Case]:
    """Valid vote and estimate rounds for every record set under every encoding."""
    sets = record_sets()
    for set_name, record_set in sets.items():
        if "fuzz" in record_set.kinds:
            continue
        device = DeviceClient(record_set.records, record_set.device_id)
        for enc_name, (encoder, too_long) in encoders().items():
            matching = encoder.kind.value in record_set.kinds and (len(record_set.kinds) == 1 or set_name in DEEP)
            words = WORDS + (rng.getrandbits(64),) if matching else (rng.getrandbits(64),)
            sequences = [s for s, _ in device.weighted_sequences(encoder, too_long == "truncate")]
            # The first rounds, and the last two (an integer's low bits, a long item's tail).
            last = encoder.max_length
            rounds = sorted({r for r in (1, 2, 3, 4, last - 1, last) if 1 <= r <= last}) if matching else [1]
            for r in rounds:
                for f, frontier in enumerate(_frontiers(sequences, encoder, r, rng) or [frozenset({()})] * (r == 1)):
                    announcement = RoundAnnouncement(JOB, r, encoder, frontier, DEADLINE, 100 * f, too_long).to_bytes()
                    for word in words:
                        yield Case(f"{set_name}/{enc_name}/round-{r}/frontier-{f}/word-{word:016x}", set_name,
                                   announcement, _invitation(r, word))
            if not matching:
                continue
            for t, targets in enumerate(_targets(sequences, encoder)):
                e = encoder.max_length + 1 + t
                announcement = EstimateAnnouncement(JOB, e, encoder, targets, DEADLINE, 0, too_long).to_bytes()
                for word in words:
                    yield Case(f"{set_name}/{enc_name}/estimate-{e}/word-{word:016x}", set_name, announcement,
                               _invitation(e, word, estimate=True))


# ---------------------------------------------------------------------------------------------
# Malformed messages, built field by field (the dataclasses refuse to build them).

TEXT = dict(kind=trie_pb2.Encoding.TEXT, unit_size=1, max_length=10)


def _announcement(**fields) -> bytes:
    base = dict(schema_version=1, job_id=JOB, round_index=2, encoding=trie_pb2.Encoding(**TEXT),
                long_items=federated_pb2.RoundAnnouncement.DROP, deadline_millis=DEADLINE,
                frontier_shared=[0, 0], frontier_units=b"ht", frontier_unit_width=1, frontier_count=2)
    base.update(fields)
    base = {k: v for k, v in base.items() if v is not None}
    return federated_pb2.RoundAnnouncement(**base).SerializeToString(deterministic=True)


def _estimate(**fields) -> bytes:
    base = dict(schema_version=2, job_id=JOB, round_index=11, encoding=trie_pb2.Encoding(**TEXT),
                long_items=federated_pb2.RoundAnnouncement.DROP, deadline_millis=DEADLINE,
                targets=[vote_pb2.Prefix(units=[b"h", b"e"]), vote_pb2.Prefix(units=[b"t", b"r", b"e", b"e", b""])],
                target_count=2)
    base.update(fields)
    base = {k: v for k, v in base.items() if v is not None}
    return federated_pb2.EstimateAnnouncement(**base).SerializeToString(deterministic=True)


def _raw_invitation(**fields) -> bytes:
    base = dict(schema_version=1, job_id=JOB, round_index=2, device_id=DEVICE, token=_token(5), choice_word=1 << 63)
    base.update(fields)
    base = {k: v for k, v in base.items() if v is not None}
    return federated_pb2.Invitation(**base).SerializeToString(deterministic=True)


def _encoding(**fields):
    return trie_pb2.Encoding(**{**TEXT, **fields})


def _prefixes(*units_lists):
    return [vote_pb2.Prefix(units=list(units)) for units in units_lists]


def crafted_cases() -> Iterator[Case]:
    """Hand-made messages, each wrong (or odd but valid) in one way."""
    vote_inv = _raw_invitation()
    est_inv = _raw_invitation(schema_version=2, round_index=11)
    announcements = {
        "valid": _announcement(),
        "version-0": _announcement(schema_version=0),
        "version-3": _announcement(schema_version=3),
        "version-2-with-frontier": _announcement(schema_version=2),
        "no-encoding": _announcement(encoding=None),
        "kind-unspecified": _announcement(encoding=_encoding(kind=0)),
        "kind-unknown": _announcement(encoding=_encoding(kind=9)),
        "unit-size-0": _announcement(encoding=_encoding(unit_size=0)),
        "max-length-1": _announcement(encoding=_encoding(max_length=1), round_index=1, frontier_shared=[0],
                                      frontier_units=b"", frontier_unit_width=0, frontier_count=1),
        "int-bits-on-text": _announcement(encoding=_encoding(int_bits=8)),
        "case-fold-on-bytes": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.BYTES, case_fold=True)),
        "tokenizer-unknown": _announcement(encoding=_encoding(tokenizer="words-v2")),
        "tokenizer-on-bytes": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.BYTES, tokenizer="words-v1")),
        "int-bits-65": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.INT, int_bits=65, max_length=10)),
        "int-max-length-too-big": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.INT, int_bits=8,
                                                                   max_length=10)),
        "int-unit-17": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.INT, int_bits=64, unit_size=17,
                                                        max_length=3)),
        "int-default-bits": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.INT, unit_size=16,
                                                             max_length=5), frontier_units=b"01", frontier_count=2),
        "unit-size-huge": _announcement(encoding=_encoding(unit_size=2**32 - 1)),
        "max-length-huge": _announcement(encoding=_encoding(max_length=2**32 - 1)),
        "round-huge": _announcement(encoding=_encoding(max_length=2**32 - 1), round_index=2**32 - 1),
        "int-bits-huge": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.INT, int_bits=2**32 - 1)),
        "long-items-0": _announcement(long_items=0),
        "long-items-7": _announcement(long_items=7),
        "long-items-truncate": _announcement(long_items=2),
        "deadline-0": _announcement(deadline_millis=0),
        "deadline-negative": _announcement(deadline_millis=-5),
        "report-goal-max": _announcement(report_goal=2**64 - 1),
        "round-0": _announcement(round_index=0),
        "round-above-L": _announcement(round_index=11),
        "round-1": _announcement(round_index=1, frontier_shared=[0], frontier_units=b"", frontier_unit_width=0),
        "round-1-count-2": _announcement(round_index=1, frontier_shared=[0, 0], frontier_units=b"",
                                         frontier_unit_width=0),
        "empty-job": _announcement(job_id=""),
        "no-count": _announcement(frontier_count=None),
        "count-3": _announcement(frontier_count=3),
        "count-0-empty": _announcement(frontier_shared=[], frontier_units=b"", frontier_unit_width=0,
                                       frontier_count=0),
        "unsorted": _announcement(frontier_units=b"th"),
        "repeated": _announcement(frontier_units=b"hh"),
        "shared-first": _announcement(frontier_shared=[1, 0]),
        "shared-whole": _announcement(frontier_shared=[0, 1]),
        "width-and-lengths": _announcement(frontier_unit_lengths=[1, 1]),
        "lengths-all-equal": _announcement(frontier_unit_width=0, frontier_unit_lengths=[1, 1]),
        "lengths-valid": _announcement(frontier_unit_width=0, frontier_unit_lengths=[1, 2], frontier_units=b"h\xc3\xa9"),
        "lengths-zero": _announcement(frontier_unit_width=0, frontier_unit_lengths=[0, 2], frontier_units=b"ht"),
        "lengths-short": _announcement(frontier_unit_width=0, frontier_unit_lengths=[1], frontier_units=b"ht"),
        "bytes-left-over": _announcement(frontier_units=b"htx"),
        "bytes-missing": _announcement(frontier_units=b"h"),
        "width-2-unit-size-1": _announcement(frontier_units=b"hhtt", frontier_unit_width=2),
        "width-2-unit-size-2": _announcement(encoding=_encoding(unit_size=2, max_length=5), frontier_units=b"hhtt",
                                             frontier_unit_width=2),
        "invalid-utf8": _announcement(frontier_units=b"h\xff"),
        "encoded-surrogate": _announcement(frontier_unit_width=0, frontier_unit_lengths=[1, 3],
                                           frontier_units=b"h\xed\xa0\x80"),
        "short-unit-before-last": _announcement(encoding=_encoding(unit_size=2, max_length=5), round_index=3,
                                                frontier_shared=[0], frontier_unit_width=0,
                                                frontier_unit_lengths=[1, 2], frontier_units=b"abc",
                                                frontier_count=1),
        "int-unit-not-binary": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.INT, int_bits=8, max_length=9),
                                             frontier_units=b"02"),
        "int-unit-valid": _announcement(encoding=_encoding(kind=trie_pb2.Encoding.INT, int_bits=8, max_length=9),
                                        frontier_units=b"01"),
        "unknown-field-14": _announcement() + bytes([14 << 3, 5]),
        "unknown-field-after-count": _announcement() + bytes([0x82, 0x01, 2]) + b"zz",  # field 16, 2 bytes
        "count-not-last": bytes([15 << 3, 2]) + _announcement(frontier_count=None),
        "count-twice": _announcement(frontier_count=7) + bytes([15 << 3, 2]),
        "wrong-wire-type-count": _announcement(frontier_count=None) + bytes([15 << 3 | 2, 1, 2]),
        "shared-unpacked": _announcement(frontier_shared=[]) + bytes([8 << 3, 0, 8 << 3, 0]),  # two varints
        "job-invalid-utf8": _announcement(job_id=None) + bytes([2 << 3 | 2, 2, 0xC3, 0x28]),
        "garbage": b"\xff\xff\xff\xff",
        "empty-bytes": b"",
    }
    for name, data in announcements.items():
        yield Case(f"crafted/announcement/{name}", "worked", data, vote_inv)
    estimates = {
        "valid": _estimate(),
        "version-1": _estimate(schema_version=1),
        "version-3": _estimate(schema_version=3),
        "no-count": _estimate(target_count=None),
        "count-3": _estimate(target_count=3),
        "no-targets": _estimate(targets=[], target_count=0),
        "unsorted": _estimate(targets=_prefixes([b"t", b"r"], [b"h", b"e"])),
        "repeated": _estimate(targets=_prefixes([b"h", b"e"], [b"h", b"e"])),
        "prefix-of-another": _estimate(targets=_prefixes([b"h"], [b"h", b"e"])),
        "empty-target": _estimate(targets=_prefixes([], [b"h", b"e"])),
        "terminator-first": _estimate(targets=_prefixes([b""], [b"h", b"e"])),
        "unit-too-long": _estimate(targets=_prefixes([b"ha"], [b"t"])),
        "too-many-units": _estimate(targets=_prefixes([b"a"] * 11, [b"t"])),
        "round-above-L": _estimate(round_index=300),
        "round-0": _estimate(round_index=0),
        "deadline-0": _estimate(deadline_millis=0),
        "long-items-0": _estimate(long_items=0),
        "frontier-fields": _estimate() + bytes([8 << 3 | 2, 1, 0]),
        "frontier-fields-bad-packed": _estimate() + bytes([8 << 3 | 2, 1, 0x80]),
    }
    for name, data in estimates.items():
        yield Case(f"crafted/estimate/{name}", "worked", data, est_inv)
    invitations = {
        "version-0": _raw_invitation(schema_version=0),
        "version-3": _raw_invitation(schema_version=3),
        "no-choice-word": _raw_invitation(choice_word=None),
        "choice-word-0": _raw_invitation(choice_word=0),
        "token-15": _raw_invitation(token=_token(5)[:15]),
        "token-17": _raw_invitation(token=_token(5) + b"x"),
        "no-device": _raw_invitation(device_id=b""),
        "empty-job": _raw_invitation(job_id=""),
        "round-0": _raw_invitation(round_index=0),
        "other-job": _raw_invitation(job_id=JOB + "x"),
        "other-round": _raw_invitation(round_index=3),
        "other-device": _raw_invitation(device_id=b"device-0043"),
        "estimate-to-vote-round": _raw_invitation(schema_version=2),
        "choice-word-varint": _raw_invitation(choice_word=None) + bytes([6 << 3, 5]),
        "garbage": b"\x0a\xff",
    }
    for name, data in invitations.items():
        for records in ("worked", "worked_with_id"):
            yield Case(f"crafted/invitation/{name}/{records}", records, announcements["valid"], data)
    yield Case("crafted/invitation/vote-to-estimate-round", "worked", estimates["valid"],
               _raw_invitation(round_index=11))
    yield Case("crafted/invitation/estimate-other-round", "worked", estimates["valid"],
               _raw_invitation(schema_version=2, round_index=12))


def damaged_cases() -> Iterator[Case]:
    """Every cut and every one-bit flip of a vote announcement, an estimate announcement and an
    invitation (the other message valid)."""
    encoder = ItemEncoder(max_length=10)
    vote = RoundAnnouncement(JOB, 2, encoder, {("h",), ("t",), ("é",)}, DEADLINE, 3).to_bytes()
    estimate = EstimateAnnouncement(JOB, 11, encoder, EstimateTargets((("h", "e"), ("t", "r", "e", "e", ""))),
                                    DEADLINE).to_bytes()
    invitation = _invitation(2, 1 << 63)
    est_invitation = _invitation(11, 1 << 62, estimate=True)
    messages = (("vote", vote, invitation, True), ("estimate", estimate, est_invitation, True),
                ("invitation", invitation, vote, False))
    for label, data, other, is_announcement in messages:
        variants = [(f"cut-{n}", data[:n]) for n in range(len(data))]
        variants += [(f"flip-{i}-{b}", data[:i] + bytes([data[i] ^ (1 << b)]) + data[i + 1:])
                     for i in range(len(data)) for b in range(8)]
        for name, damaged in variants:
            pair = (damaged, other) if is_announcement else (other, damaged)
            yield Case(f"damaged/{label}/{name}", "worked_with_id", *pair)


def all_cases() -> List[Case]:
    """Every case, in a stable order."""
    rng = random.Random(2029)
    return list(round_cases(rng)) + list(fuzz_cases(rng)) + list(crafted_cases()) + list(damaged_cases())
