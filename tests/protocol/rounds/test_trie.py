"""Unit tests of the trie and its persisted format, on tiny hand-built tries."""

import pickle
from collections import Counter

import pytest
from google.protobuf import text_format

from triehh_beam.proto import trie_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.protocol.rounds.vote import prefix_vote
from triehh_beam.protocol.rounds.wire import SCHEMA_VERSION, TrieFormatError

TEXT = ItemEncoder(kind=ItemKind.TEXT, unit_size=1, max_length=6)
BYTES = ItemEncoder(kind=ItemKind.BYTES, unit_size=1, max_length=6)


def grow(encoder, sequences):
    """The trie that discovers every prefix of ``sequences`` (all survive the threshold)."""
    trie = Trie.empty(encoder)
    for r in range(1, max(map(len, sequences)) + 1):
        trie = trie.with_level({s[:r] for s in sequences if len(s) >= r})
    return trie


def trie_of(encoder, items):
    return grow(encoder, [encoder.encode(item) for item in items])


# ---------------------------------------------------------------------------------------------
# Structure and growth.


def test_empty_trie():
    trie = Trie.empty(TEXT)
    assert trie.depth == 0
    assert trie.levels == ()
    assert trie.frontier() == frozenset({()})
    assert trie.heavy_hitters() == []
    assert trie.frequent_prefixes() == []
    assert trie.all_prefixes() == []
    assert trie.level(0) == frozenset({()})
    assert trie == Trie(TEXT)
    assert trie != Trie.empty(BYTES)


def test_levels_and_frontier():
    level1 = {("a",), ("b",)}
    level2 = {("a", "b"), ("a", ""), ("b", "c")}
    trie = Trie.empty(TEXT).with_level(level1).with_level(level2)
    assert trie.depth == 2
    assert trie.levels == (frozenset(level1), frozenset(level2))
    # ("a", "") is terminated: nothing extends a complete item.
    assert trie.frontier() == frozenset({("a", "b"), ("b", "c")})
    assert ("a", "") in trie and ("a",) in trie and ("z",) not in trie and () not in trie


def test_frontier_empty_when_every_deepest_prefix_is_terminated():
    trie = trie_of(TEXT, ["ab"])
    assert trie.depth == 3
    assert trie.frontier() == frozenset()


def test_frontier_empty_at_max_length():
    encoder = ItemEncoder(unit_size=1, max_length=2)
    trie = Trie.empty(encoder).with_level([("a",)]).with_level([("a", "b")])
    assert trie.frontier() == frozenset()
    with pytest.raises(ValueError, match="max_length=2"):
        trie.with_level([("a", "b", "")])
    assert trie.frequent_prefixes() == ["ab"]


def test_with_level_returns_new_trie_and_leaves_arguments_alone():
    empty = Trie.empty(TEXT)
    level = [("a",), ("b",)]
    level_set = {("a",), ("b",)}
    grown = empty.with_level(level)
    grown2 = empty.with_level(level_set)
    assert level == [("a",), ("b",)] and level_set == {("a",), ("b",)}
    assert empty.depth == 0 and grown.depth == 1
    assert grown == grown2 and hash(grown) == hash(grown2)
    with pytest.raises(AttributeError):
        grown.depth = 3
    with pytest.raises(AttributeError):
        grown._levels = ()


def test_with_level_accepts_lists_and_collapses_duplicates():
    trie = Trie.empty(TEXT).with_level([["a"], ("a",), iter(["b"])])
    assert trie.levels == (frozenset({("a",), ("b",)}),)


@pytest.mark.parametrize(
    "prefixes, message",
    [
        ([], "level 1 is empty"),
        ([("a", "b")], r"prefix \('a', 'b'\) has 2 units, level 1 needs 1"),
        ([("",)], "empty item"),
        ([(b"a",)], "unit 0 is bytes, expected str"),
        ([("ab",)], "longer than unit_size=1"),
        (["ab"], "a prefix is a tuple of units, got str"),
    ],
)
def test_with_level_rejects_bad_first_level(prefixes, message):
    with pytest.raises(ValueError, match=message):
        Trie.empty(TEXT).with_level(prefixes)


def test_with_level_rejects_prefixes_off_the_frontier():
    trie = Trie.empty(TEXT).with_level([("a",), ("b",)]).with_level([("a", ""), ("b", "c")])
    terminated = r"prefix \('a', '', 'x'\) does not extend .* is terminated"
    with pytest.raises(ValueError, match=terminated):
        trie.with_level([("a", "", "x")])
    absent = r"prefix \('z', 'z', 'z'\) does not extend .* not in the trie"
    with pytest.raises(ValueError, match=absent):
        trie.with_level([("b", "c", "d"), ("z", "z", "z")])
    # ("a",) is in the trie but not on the frontier (level 1 is no longer the deepest).
    with pytest.raises(ValueError, match=r"has 2 units, level 3 needs 3"):
        trie.with_level([("a", "b")])


def test_with_level_rejects_misplaced_terminator_and_short_inner_unit():
    encoder = ItemEncoder(unit_size=2, max_length=5)
    trie = Trie.empty(encoder).with_level([("ab",), ("c",)])
    with pytest.raises(ValueError, match=r"unit 0 \('c'\) is shorter than unit_size=2 but not"):
        trie.with_level([("c", "de")])
    # A short unit may be followed by the terminator: "c" is a whole item.
    assert trie.with_level([("c", ""), ("ab", "c")]).heavy_hitters() == ["c"]


def test_constructor_validates_levels():
    grown = Trie.empty(TEXT).with_level([("a",)]).with_level([("a", "")])
    assert Trie(TEXT, [[("a",)], [("a", "")]]) == grown
    with pytest.raises(ValueError, match="does not extend"):
        Trie(TEXT, [[("a",)], [("b", "")]])


def test_pickle_round_trip():
    trie = trie_of(TEXT, ["ab", "ac", "b"])
    assert pickle.loads(pickle.dumps(trie)) == trie


def test_repr_is_informative():
    text = repr(trie_of(TEXT, ["ab", "b"]))
    assert "depth=3" in text and "heavy_hitters=['ab', 'b']" in text and "kind='text'" in text


# ---------------------------------------------------------------------------------------------
# Results: heavy hitters and frequent prefixes, decoded back to the items.

UNICODE_ITEMS = [
    "é",
    "e\u0301x",  # NFC turns it into "éx"
    "straße",
    "中文",
    "中国",
    "👍🏽",  # thumbs up + skin tone modifier: two code points
    "👍",
    "a$b",
    "$",
    "שלום",  # RTL
    "مرحبا",
    "a b",
]


@pytest.mark.parametrize("unit_size", [1, 2, 3, 4])
def test_heavy_hitters_decode_unicode_items(unit_size):
    encoder = ItemEncoder(kind=ItemKind.TEXT, unit_size=unit_size, max_length=8)
    trie = trie_of(encoder, UNICODE_ITEMS)
    expected = sorted({encoder.normalize(item) for item in UNICODE_ITEMS})
    assert trie.heavy_hitters() == expected
    assert "éx" in trie.heavy_hitters()
    assert trie.heavy_hitter_sequences() == sorted({encoder.encode(i) for i in UNICODE_ITEMS})
    assert trie.frequent_prefixes() == []
    assert Trie.from_bytes(trie.to_bytes()) == trie


@pytest.mark.parametrize("unit_size", [1, 2, 3, 4])
def test_heavy_hitters_decode_bytes_items(unit_size):
    encoder = ItemEncoder(kind=ItemKind.BYTES, unit_size=unit_size, max_length=12)
    items = [b"\x00", b"\x00\x00", b"a\x00b", b"\xff\xfe", "中".encode("utf-8"), b"$", b"abcdefgh"]
    trie = trie_of(encoder, items)
    assert trie.heavy_hitters() == sorted(items)
    assert Trie.from_bytes(trie.to_bytes()) == trie


def test_item_and_its_extension_both_found():
    trie = trie_of(TEXT, ["a", "ab", "abc"])
    assert trie.heavy_hitters() == ["a", "ab", "abc"]
    assert trie.frontier() == frozenset()


def test_frequent_prefixes_are_non_terminated_leaves():
    # "abc" and "abd" stopped growing at ("a", "b", "c") / ("a", "b", "d"); "x" is an item.
    trie = (
        Trie.empty(TEXT)
        .with_level([("a",), ("x",), ("q",)])
        .with_level([("a", "b"), ("x", "")])
        .with_level([("a", "b", "c"), ("a", "b", "d")])
    )
    assert trie.heavy_hitters() == ["x"]
    # ("q",) had no child in round 2; level 3's prefixes are leaves too.
    assert trie.frequent_prefixes() == ["abc", "abd", "q"]
    assert trie.frequent_prefix_sequences() == [("a", "b", "c"), ("a", "b", "d"), ("q",)]
    assert trie.all_prefixes() == [
        ("a",), ("q",), ("x",), ("a", "b"), ("x", ""), ("a", "b", "c"), ("a", "b", "d"),
    ]


def test_truncated_long_item_is_a_frequent_prefix():
    encoder = ItemEncoder(unit_size=1, max_length=3)
    trie = grow(encoder, [encoder.encode_truncated("abcdef"), encoder.encode("ab")])
    assert trie.heavy_hitters() == ["ab"]
    assert trie.frequent_prefixes() == ["abc"]


def test_rounds_with_client_votes_until_nothing_is_added():
    """The driver's loop in miniature: frontier -> one vote per user -> threshold -> level."""
    encoder = ItemEncoder(unit_size=1, max_length=5)
    population = ["ab"] * 3 + ["ac"] * 2 + ["b"] * 2 + ["abcdefg"] * 2 + ["z"]
    sequences = [encoder.encode_truncated(item) for item in population]
    trie = Trie.empty(encoder)
    while trie.frontier():
        frontier, r = trie.frontier(), trie.depth + 1
        votes = Counter(prefix_vote(s, frontier, r) for s in sequences)
        kept = {prefix for prefix, count in votes.items() if prefix and count >= 2}
        if not kept:
            break
        trie = trie.with_level(kept)
    assert trie.heavy_hitters() == ["ab", "ac", "b"]
    assert trie.frequent_prefixes() == ["abcde"]  # cut at max_length, never terminated
    assert trie.depth == 5 and trie.frontier() == frozenset()


# ---------------------------------------------------------------------------------------------
# Radix view.


def test_radix_compresses_chains_and_marks_items():
    trie = (
        Trie.empty(TEXT)
        .with_level([("r",), ("x",)])
        .with_level([("r", "o"), ("x", "")])
        .with_level([("r", "o", "m"), ("r", "o", "s")])
        .with_level([("r", "o", "m", "a"), ("r", "o", "s", "")])
        .with_level([("r", "o", "m", "a", "n"), ("r", "o", "m", "a", "")])
    )
    root = trie.radix()
    assert root.prefix == () and root.label == "" and not root.terminal
    ro, x = root.children
    assert (ro.label, ro.units, ro.terminal) == ("ro", ("r", "o"), False)
    assert (x.label, x.terminal, x.children) == ("x", True, ())
    rom, ros = ro.children
    # "roma" is an item, so the chain stops there even though "roman" continues it.
    assert (rom.label, rom.prefix, rom.terminal) == ("ma", ("r", "o", "m", "a"), True)
    assert (ros.label, ros.terminal) == ("s", True)
    (n,) = rom.children
    assert (n.label, n.terminal, n.is_frequent_prefix) == ("n", False, True)
    assert trie.render() == "\n".join(
        [
            "<root>",
            "  'ro'",
            "    'ma' [item]",
            "      'n' [prefix]",
            "    's' [item]",
            "  'x' [item]",
        ]
    )


def test_render_unicode_and_bytes():
    # unit_size=2: "中文" and "中国" are single units, so they share no node.
    two = trie_of(ItemEncoder(unit_size=2, max_length=6), ["中文", "中国", "שלום"]).render()
    assert two.splitlines() == ["<root>", "  'שלום' [item]", "  '中国' [item]", "  '中文' [item]"]
    text = trie_of(TEXT, ["中文", "中国", "a$b"]).render()
    assert text.splitlines() == [
        "<root>",
        "  'a$b' [item]",
        "  '中'",
        "    '国' [item]",
        "    '文' [item]",
    ]
    raw = trie_of(BYTES, [b"\x00a", b"\x00\\", b"'\""]).render()
    assert raw == "\n".join(
        ["<root>", "  b'\\x00'", "    b'\\\\' [item]", "    b'a' [item]", "  b'\\'\"' [item]"]
    )


def test_render_empty_trie():
    assert Trie.empty(TEXT).render() == "<root>"


# ---------------------------------------------------------------------------------------------
# Protobuf: Trie.


def sample_trie():
    encoder = ItemEncoder(unit_size=2, max_length=5, case_fold=True)
    return trie_of(encoder, ["Straße", "stop", "中文字", "é"])


def test_trie_proto_round_trip_and_determinism():
    trie = sample_trie()
    message = trie.to_proto()
    assert message.schema_version == SCHEMA_VERSION
    assert message.encoding == trie_pb2.Encoding(
        kind=trie_pb2.Encoding.TEXT, unit_size=2, max_length=5, case_fold=True
    )
    assert message.depth == trie.depth == len(message.levels)
    assert list(message.levels[0].parents) == [0] * len(trie.levels[0])
    assert Trie.from_proto(message) == trie
    assert Trie.from_bytes(trie.to_bytes()) == trie
    # Built in another order, the same trie serializes to the same bytes.
    again = Trie(trie.encoder, [sorted(level, reverse=True) for level in trie.levels])
    assert again.to_bytes() == trie.to_bytes()


def test_empty_trie_round_trip():
    for encoder in (TEXT, BYTES):
        assert Trie.from_bytes(Trie.empty(encoder).to_bytes()) == Trie.empty(encoder)


def test_from_bytes_refuses_unknown_schema_version():
    message = sample_trie().to_proto()
    message.schema_version = SCHEMA_VERSION + 1
    with pytest.raises(TrieFormatError, match=r"^state/trie-0003\.pb: schema_version 2;") as error:
        Trie.from_bytes(message.SerializeToString(), source="state/trie-0003.pb")
    assert error.value.source == "state/trie-0003.pb"
    message.schema_version = 0
    with pytest.raises(TrieFormatError, match="no schema_version"):
        Trie.from_proto(message, source="t.pb")


def test_from_bytes_refuses_every_truncation():
    data = sample_trie().to_bytes()
    for cut in range(len(data)):
        with pytest.raises(TrieFormatError, match=r"^trie\.pb: "):
            Trie.from_bytes(data[:cut], source="trie.pb")


def test_from_bytes_refuses_garbage():
    with pytest.raises(TrieFormatError, match=r"^junk\.bin: not a triehh_beam\.Trie message"):
        Trie.from_bytes(b"\xff\xff\xff\xff", source="junk.bin")
    assert issubclass(TrieFormatError, ValueError)


# A valid depth-2 trie holding "a" (as text, unit_size 1), in text format; each case below
# breaks one thing.
GOOD = """
  schema_version: 1
  encoding { kind: TEXT unit_size: 1 max_length: 4 }
  levels { parents: [0, 0] units: ["a", "b"] }
  levels { parents: [0, 1] units: ["", "c"] }
  depth: 2
"""
BAD_TRIES = {
    "no encoding": (GOOD.replace("encoding {", "# encoding {"), "no encoding"),
    "unspecified kind": (GOOD.replace("kind: TEXT", ""), "unknown or unspecified encoding kind 0"),
    "future kind": (GOOD.replace("kind: TEXT", "kind: 9"), "unspecified encoding kind 9"),
    "unknown tokenizer": (GOOD.replace("max_length: 4", "max_length: 4 tokenizer: \"words-v9\""), "unknown tokenizer"),
    "unit size 0": (GOOD.replace("unit_size: 1", "unit_size: 0"), "invalid encoding: unit_size"),
    "too deep": (
        GOOD.replace("max_length: 4", "max_length: 2")
        .replace("depth: 2", 'levels { parents: [1] units: ["d"] } depth: 3'),
        "depth 3 exceeds max_length=2",
    ),
    "no depth": (GOOD.replace("depth: 2", ""), "2 levels but depth no depth"),
    "wrong depth": (GOOD.replace("depth: 2", "depth: 3"), "2 levels but depth 3"),
    "parent out of range": (GOOD.replace("parents: [0, 1]", "parents: [0, 2]"),
                            "level 2 node 1: parent index 2 out of range"),
    "root parent out of range": (GOOD.replace("parents: [0, 0]", "parents: [0, 1]"),
                                 "level 1 node 1: parent index 1 out of range"),
    "parents and units differ": (GOOD.replace("parents: [0, 1]", "parents: [0, 1, 1]"),
                                 "level 2 has 3 parents for 2 units"),
    "not UTF-8": (GOOD.replace('units: ["a", "b"]', 'units: ["\\377", "b"]'),
                  r"level 1 node 0: unit b'\\xff' is not UTF-8"),
    "unit too long": (GOOD.replace('"c"', '"cd"'), "longer than unit_size=1"),
    "empty item": (GOOD.replace('units: ["a", "b"]', 'units: ["", "b"]'), "empty item"),
    "duplicate": (
        GOOD.replace('units: ["a", "b"]', 'units: ["a", "a"]'),
        "level 1 node 1: duplicate prefix",
    ),
    "empty level": (GOOD.replace('levels { parents: [0, 1] units: ["", "c"] }', "levels { }"),
                    "level 2 is empty"),
    "child of terminated": (
        GOOD.replace("depth: 2", 'levels { parents: [0] units: ["x"] } depth: 3'),
        r"level 3 node 0: extends the terminated prefix \('a', ''\)",
    ),
}


def test_good_text_format_trie_is_readable():
    trie = Trie.from_proto(text_format.Parse(GOOD, trie_pb2.Trie()))
    assert trie.heavy_hitters() == ["a"] and trie.frontier() == frozenset({("b", "c")})


@pytest.mark.parametrize("case", sorted(BAD_TRIES))
def test_from_bytes_refuses_inconsistent_messages(case):
    text, problem = BAD_TRIES[case]
    data = text_format.Parse(text, trie_pb2.Trie()).SerializeToString()
    with pytest.raises(TrieFormatError, match=r"^state/bad\.pb: .*" + problem) as error:
        Trie.from_bytes(data, source="state/bad.pb")
    assert error.value.source == "state/bad.pb"


def test_from_proto_does_not_modify_the_message():
    message = sample_trie().to_proto()
    before = message.SerializeToString()
    Trie.from_proto(message)
    assert message.SerializeToString() == before
