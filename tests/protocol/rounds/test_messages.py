"""Unit tests of the wire formats: the encoding, the frontier broadcast and the vote."""

import pytest

from triehh_beam.proto import trie_pb2, vote_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.protocol.rounds.wire import (SCHEMA_VERSION, FrontierBroadcast, TrieFormatError, Vote,
                                              encoding_from_proto, encoding_to_proto,
                                              frontier_from_bytes, frontier_from_proto, vote_from_bytes,
                                              vote_from_proto, vote_to_proto)

TEXT = ItemEncoder(kind=ItemKind.TEXT, unit_size=1, max_length=6)
BYTES = ItemEncoder(kind=ItemKind.BYTES, unit_size=1, max_length=6)

def test_encoding_round_trip():
    for encoder in (TEXT, BYTES, ItemEncoder(unit_size=4, max_length=30, case_fold=True)):
        assert encoding_from_proto(encoding_to_proto(encoder)) == encoder
    bad = trie_pb2.Encoding(kind=trie_pb2.Encoding.BYTES, unit_size=1, max_length=4, case_fold=True)
    with pytest.raises(TrieFormatError, match="case_fold applies to text items only"):
        encoding_from_proto(bad, source="cfg")


# ---------------------------------------------------------------------------------------------
# Protobuf: FrontierBroadcast and Vote.


def test_frontier_broadcast_round_one():
    message = Trie.empty(BYTES).frontier_to_proto(1)
    assert message.round_index == 1 and len(message.prefixes) == 1 and not message.prefixes[0].units
    parsed = frontier_from_bytes(message.SerializeToString())
    assert parsed == FrontierBroadcast(1, BYTES, frozenset({()}))


def test_frontier_broadcast_round_trip():
    encoder = ItemEncoder(unit_size=1, max_length=6)
    trie = (
        Trie.empty(encoder)
        .with_level([("é",), ("中",), ("$",)])
        .with_level([("é", ""), ("中", "文"), ("$", "a")])
    )
    message = trie.frontier_to_proto()
    assert message.round_index == 3 and message.prefix_count == 2
    parsed = frontier_from_proto(message)
    assert parsed.round_index == 3 and parsed.encoder == encoder
    assert parsed.prefixes == trie.frontier() == frozenset({("中", "文"), ("$", "a")})
    with pytest.raises(ValueError, match="opens round 3, not round 2"):
        trie.frontier_to_proto(2)


def test_frontier_broadcast_refuses_bad_messages():
    message = Trie.empty(TEXT).with_level([("a",), ("b",)]).frontier_to_proto()
    data = message.SerializeToString()
    for cut in range(len(data)):
        with pytest.raises(TrieFormatError, match=r"^frontier\.pb: "):
            frontier_from_bytes(data[:cut], source="frontier.pb")

    def refused(mutate, problem):
        bad = vote_pb2.FrontierBroadcast()
        bad.CopyFrom(message)
        mutate(bad)
        with pytest.raises(TrieFormatError, match="^f: .*" + problem):
            frontier_from_proto(bad, source="f")

    refused(lambda m: setattr(m, "schema_version", 7), "schema_version 7")
    refused(lambda m: setattr(m, "round_index", 0), "round_index 0")
    refused(lambda m: setattr(m, "round_index", 3), r"has 1 units, round 3 extends prefixes of 2")
    refused(lambda m: setattr(m, "round_index", 9), "exceeds max_length")
    refused(lambda m: m.ClearField("encoding"), "no encoding")
    refused(lambda m: m.prefixes[0].units.append(b""), "has 2 units")
    refused(lambda m: m.prefixes[0].units.__setitem__(0, b""), "empty item")

    def add_duplicate(m):
        m.prefixes.add(units=[b"a"])
        m.prefix_count = 3

    refused(add_duplicate, "prefix 2: duplicate prefix")
    refused(lambda m: setattr(m, "prefix_count", 5), "2 prefixes but prefix_count 5")


def test_frontier_to_proto_refuses_at_max_length():
    encoder = ItemEncoder(unit_size=1, max_length=2)
    trie = Trie.empty(encoder).with_level([("a",)]).with_level([("a", "")])
    with pytest.raises(ValueError, match="no round follows"):
        trie.frontier_to_proto()


def test_terminated_frontier_prefix_refused():
    message = vote_pb2.FrontierBroadcast(
        schema_version=SCHEMA_VERSION,
        round_index=3,
        encoding=encoding_to_proto(TEXT),
        prefixes=[vote_pb2.Prefix(units=[b"a", b""])],
        prefix_count=1,
    )
    with pytest.raises(TrieFormatError, match="is terminated"):
        frontier_from_proto(message, source="f")


@pytest.mark.parametrize(
    "encoder, prefix",
    [
        (TEXT, ("é",)),
        (TEXT, ("👍", "🏽", "")),
        (ItemEncoder(unit_size=3, max_length=4), ("שלו", "ם", "")),
        (BYTES, (b"\x00", b"\x00")),
    ],
)
def test_vote_round_trip(encoder, prefix):
    message = vote_to_proto(prefix, len(prefix), encoder)
    assert message.schema_version == SCHEMA_VERSION and message.round_index == len(prefix)
    data = message.SerializeToString()
    assert vote_from_bytes(data, encoder) == Vote(len(prefix), prefix)
    assert vote_from_proto(message, encoder) == Vote(len(prefix), prefix)
    for cut in range(len(data)):
        with pytest.raises(TrieFormatError, match=r"^device-17: "):
            vote_from_bytes(data[:cut], encoder, source="device-17")


def test_vote_to_proto_checks_its_arguments():
    with pytest.raises(ValueError, match="a round-2 vote needs 2 units"):
        vote_to_proto(("a",), 2, TEXT)
    with pytest.raises(ValueError, match="expected bytes"):
        vote_to_proto(("a",), 1, BYTES)
    with pytest.raises(ValueError, match="terminator at position 0"):
        vote_to_proto(("", "a"), 2, TEXT)


def test_vote_from_proto_refuses_bad_votes():
    def vote(round_index, units, version=SCHEMA_VERSION):
        return vote_pb2.Vote(
            schema_version=version, round_index=round_index, prefix=vote_pb2.Prefix(units=units)
        )

    with pytest.raises(TrieFormatError, match="^v: schema_version 2"):
        vote_from_proto(vote(1, [b"a"], version=2), TEXT, source="v")
    with pytest.raises(TrieFormatError, match="round_index 0"):
        vote_from_proto(vote(0, []), TEXT, source="v")
    with pytest.raises(TrieFormatError, match="a round-2 vote needs 2"):
        vote_from_proto(vote(2, [b"a"]), TEXT, source="v")
    with pytest.raises(TrieFormatError, match="not UTF-8"):
        vote_from_proto(vote(1, [b"\xc3"]), TEXT, source="v")
    with pytest.raises(TrieFormatError, match="longer than unit_size=1"):
        vote_from_proto(vote(1, [b"ab"]), BYTES, source="v")
    with pytest.raises(TrieFormatError, match="more than max_length=6"):
        vote_from_proto(vote(7, [b"a"] * 7), BYTES, source="v")
