"""The federated messages (protocol/federated/messages.py): round trips for every item kind, bytes that
do not depend on the frontier's order, every cut of every message refused, and every malformed
field refused with a FederatedFormatError that names the source."""

import pytest

from triehh_beam.proto import federated_pb2, vote_pb2
from triehh_beam.protocol.federated.messages import (SCHEMA_VERSION, TOKEN_BYTES, FederatedFormatError,
                                                     Invitation, RoundAnnouncement, VoteReport)
from triehh_beam.protocol.items.encoding import ItemEncoder
from triehh_beam.protocol.rounds.wire import encoding_to_proto

TEXT = ItemEncoder(max_length=6)
TOKEN = bytes(range(TOKEN_BYTES))
DEADLINE = 1_790_000_000_000

# (encoder, round, frontier, a vote of that round that extends the frontier)
CASES = {
    "text": (TEXT, 3, {("t", "h"), ("h", "e"), ("h", "a"), ("é", "t")}, ("h", "e", "")),
    "text-round-1": (TEXT, 1, {()}, ("a",)),
    "text-units-2-tokenized": (ItemEncoder(unit_size=2, max_length=5, case_fold=True, tokenize=True), 3,
                               {("he", "ll"), ("日本", "語"), ("wo", "rl")}, ("he", "ll", "o")),
    "bytes-units-2": (ItemEncoder(kind="bytes", unit_size=2, max_length=4), 2,
                      {(b"\x00\xff",), (b"ab",), (b"\x00\x01",)}, (b"ab", b"c")),
    "int-8-bits-units-2": (ItemEncoder(kind="int", int_bits=8, unit_size=2, max_length=5), 4,
                           {(b"10", b"00", b"11"), (b"01", b"11", b"11")}, (b"10", b"00", b"11", b"01")),
}


def announcement(case="text", **changes):
    encoder, round_index, frontier, _ = CASES[case]
    fields = dict(job_id="job-7", round_index=round_index, encoder=encoder, frontier=frontier,
                  deadline_millis=DEADLINE, report_goal=0, too_long="drop")
    fields.update(changes)
    return RoundAnnouncement(**fields)


def invitation(**changes):
    fields = dict(job_id="job-7", round_index=3, device_id=b"device-42", token=TOKEN, choice_word=2**63 + 5)
    fields.update(changes)
    return Invitation(**fields)


# ---------------------------------------------------------------------------------------------
# Round trips.


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("too_long, goal", [("drop", 0), ("truncate", 12_345)])
def test_an_announcement_round_trips(case, too_long, goal):
    sent = announcement(case, too_long=too_long, report_goal=goal)
    received = RoundAnnouncement.from_bytes(sent.to_bytes())
    assert received == sent
    assert received.frontier == frozenset(CASES[case][2])
    assert received.truncate is (too_long == "truncate")
    assert received.to_bytes() == sent.to_bytes()


def test_announcement_bytes_do_not_depend_on_the_frontier_order():
    frontier = sorted(CASES["text"][2])
    forward = announcement(frontier=frontier).to_bytes()
    assert announcement(frontier=list(reversed(frontier))).to_bytes() == forward
    assert announcement(frontier=set(frontier)).to_bytes() == forward


def test_the_frontier_is_front_coded_in_byte_order():
    message = federated_pb2.RoundAnnouncement.FromString(announcement().to_bytes())
    # Sorted by UTF-8 bytes: ha, he, th, ét (é is 0xc3 0xa9).
    assert list(message.frontier_shared) == [0, 1, 0, 0]
    assert list(message.frontier_unit_lengths) == [1, 1, 1, 1, 1, 2, 1]  # é has 2 bytes
    assert message.frontier_unit_width == 0
    assert message.frontier_units == "haethét".encode()
    ascii_only = federated_pb2.RoundAnnouncement.FromString(announcement(frontier={("h", "a"), ("t", "o")}).to_bytes())
    assert ascii_only.frontier_unit_width == 1 and list(ascii_only.frontier_unit_lengths) == []
    assert ascii_only.frontier_units == b"hato"
    assert message.frontier_count == 4
    assert message.schema_version == SCHEMA_VERSION == 1
    assert message.long_items == federated_pb2.RoundAnnouncement.DROP


@pytest.mark.parametrize("word", [0, 1, 2**53, 2**64 - 1])
def test_an_invitation_round_trips(word):
    sent = invitation(choice_word=word)
    assert Invitation.from_bytes(sent.to_bytes()) == sent


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_report_round_trips_with_a_prefix_or_an_abstention(case):
    encoder, _, _, vote = CASES[case]
    for prefix in (vote, None):
        sent = VoteReport("job-7", len(vote), TOKEN, prefix)
        received = VoteReport.from_bytes(sent.to_bytes(), encoder)
        assert received == sent
        assert received.abstains is (prefix is None)


def test_an_abstention_is_explicit_on_the_wire():
    message = federated_pb2.VoteReport.FromString(VoteReport("job-7", 2, TOKEN, None).to_bytes())
    assert message.WhichOneof("answer") == "abstain"
    message = federated_pb2.VoteReport.FromString(VoteReport("job-7", 1, TOKEN, ("a",)).to_bytes())
    assert message.WhichOneof("answer") == "prefix"
    assert list(message.prefix.units) == [b"a"]


# ---------------------------------------------------------------------------------------------
# Cut short.


def _every_cut_is_refused(data, parse):
    for end in range(len(data)):
        with pytest.raises(FederatedFormatError):
            parse(data[:end])


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_cut_of_an_announcement_is_refused(case):
    _every_cut_is_refused(announcement(case, report_goal=99).to_bytes(), RoundAnnouncement.from_bytes)


def test_every_cut_of_an_invitation_and_of_a_report_is_refused():
    _every_cut_is_refused(invitation().to_bytes(), Invitation.from_bytes)
    for prefix in (("h", "e", "l"), None):
        data = VoteReport("job-7", 3, TOKEN, prefix).to_bytes()
        _every_cut_is_refused(data, lambda d: VoteReport.from_bytes(d, TEXT))


def test_a_frontier_cut_between_prefixes_is_detected_by_the_count():
    message = announcement().to_proto()
    del message.frontier_shared[-1]  # the last prefix's (0 shared) ...
    message.frontier_units = message.frontier_units[:-3]  # ... and its units, "ét", gone
    del message.frontier_unit_lengths[-2:]
    with pytest.raises(FederatedFormatError, match="3 frontier prefixes but frontier_count 4"):
        RoundAnnouncement.from_bytes(message.SerializeToString())
    message.ClearField("frontier_count")
    with pytest.raises(FederatedFormatError, match="but frontier_count no count"):
        RoundAnnouncement.from_bytes(message.SerializeToString())


# ---------------------------------------------------------------------------------------------
# Malformed announcements.


def _edited(edit, case="text"):
    message = announcement(case).to_proto()
    edit(message)
    return message.SerializeToString()


def _set(**fields):
    def edit(message):
        for name, value in fields.items():
            if value is None:
                message.ClearField(name)
            elif isinstance(value, list):  # a repeated field
                field = getattr(message, name)
                del field[:]
                field.extend(value)
            else:
                setattr(message, name, value)
    return edit


@pytest.mark.parametrize("edit, problem", [
    (_set(schema_version=0), "no schema_version; this reader understands schema_version 1"),
    (_set(schema_version=2), "schema_version 2: an estimate round's announcement"),
    (_set(schema_version=3), "schema_version 3; this reader understands schema_version 1"),
    (_set(encoding=None), "no encoding"),
    (lambda m: setattr(m.encoding, "kind", 0), "unknown or unspecified encoding kind"),
    (lambda m: setattr(m.encoding, "tokenizer", "words-v9"), "unknown tokenizer"),
    (lambda m: setattr(m.encoding, "max_length", 1), "invalid encoding"),
    (_set(long_items=0), "unknown or unspecified long_items 0"),
    (_set(long_items=7), "unknown or unspecified long_items 7"),
    (_set(job_id=""), "the job id must be a non-empty string"),
    (_set(round_index=0), "round_index 0: rounds are numbered from 1"),
    (_set(round_index=7), "round_index 7 exceeds max_length=6"),
    (_set(deadline_millis=0), r"deadline_millis must be an integer in \[1, "),
    (_set(deadline_millis=-5), "deadline_millis must be"),
    (_set(frontier_count=5), "4 frontier prefixes but frontier_count 5"),
    (_set(frontier_shared=[0, 0, 0, 0]), "frontier: prefix 1 does not come after prefix 0"),
    (_set(frontier_shared=[0, 2, 0, 0], frontier_count=4), "frontier: prefix 1 shares 2 units"),
    (_set(frontier_units="haeahét".encode()), "frontier: prefix 2 does not come after prefix 1"),
    (_set(frontier_units=b"haeth\xc3\x28t"), "frontier prefix 3: unit .* is not UTF-8"),
    (_set(frontier_unit_lengths=[1, 1, 1, 1, 1, 2, 2]), "a unit of 2 bytes at byte 7 of 8"),
    (_set(frontier_unit_width=1), "both a unit width and unit lengths"),
    (_set(frontier_unit_lengths=[], frontier_unit_width=1), "frontier: 1 units and 1 unit bytes left over"),
    (_set(frontier_shared=[0], frontier_unit_lengths=[2, 1], frontier_units=b"abc", frontier_count=1),
     "longer than unit_size=1"),
])
def test_a_malformed_announcement_is_refused(edit, problem):
    with pytest.raises(FederatedFormatError, match=problem) as caught:
        RoundAnnouncement.from_bytes(_edited(edit), source="topic announce-7")
    assert str(caught.value).startswith("topic announce-7: ")
    assert caught.value.source == "topic announce-7"


def test_an_announcement_of_prefixes_of_the_wrong_length_is_refused():
    # Round 3 extends prefixes of 2 units: a coding of 1-unit prefixes leaves units over.
    round_2 = announcement(round_index=2, frontier={("h",), ("t",)}).to_proto()
    round_2.round_index = 3
    with pytest.raises(FederatedFormatError, match="the 2 units written are too few"):
        RoundAnnouncement.from_bytes(round_2.SerializeToString())


def test_an_announcement_refuses_units_the_encoding_cannot_make():
    int_case = announcement("int-8-bits-units-2").to_proto()
    int_case.frontier_units = int_case.frontier_units.replace(b"11", b"12", 1)
    with pytest.raises(FederatedFormatError, match="holds something other than binary digits"):
        RoundAnnouncement.from_bytes(int_case.SerializeToString())
    short_unit = announcement("bytes-units-2", round_index=3, frontier={(b"ab", b"cd")}).to_proto()
    assert short_unit.frontier_unit_width == 2
    short_unit.frontier_unit_width = 0
    short_unit.frontier_unit_lengths.extend([3, 1])  # (b"abc", b"d")
    with pytest.raises(FederatedFormatError, match="longer than unit_size=2"):
        RoundAnnouncement.from_bytes(short_unit.SerializeToString())
    short_unit.frontier_units = b"abc"
    del short_unit.frontier_unit_lengths[:]
    short_unit.frontier_unit_lengths.extend([1, 2])  # (b"a", b"bc")
    with pytest.raises(FederatedFormatError, match="shorter than unit_size=2 but not the item's last"):
        RoundAnnouncement.from_bytes(short_unit.SerializeToString())


def test_an_announcement_refuses_garbage():
    with pytest.raises(FederatedFormatError, match="not a triehh_beam.RoundAnnouncement message"):
        RoundAnnouncement.from_bytes(b"\xff\xff\xff", source="x")
    with pytest.raises(TypeError):
        RoundAnnouncement.from_bytes("text, not bytes")


@pytest.mark.parametrize("changes, problem", [
    (dict(job_id=""), "the job id must be a non-empty string"),
    (dict(round_index=0), "rounds are numbered from 1"),
    (dict(round_index=True), "rounds are numbered from 1"),
    (dict(round_index=7, frontier={("a",) * 6}), "exceeds max_length=6"),
    (dict(frontier=set()), "an empty frontier"),
    (dict(frontier={("a", "b"), ("a",)}), r"frontier prefix \('a',\) has 1 units; round 3 extends prefixes of 2"),
    (dict(frontier={("a", "")}), "is the empty item|is a complete item|terminator"),
    (dict(frontier={("ab", "c")}), "longer than unit_size=1"),
    (dict(frontier={(b"a", b"b")}), "unit 0 is bytes, expected str"),
    (dict(frontier={"ab"}), "a prefix is a tuple of units"),
    (dict(deadline_millis=0), "deadline_millis"),
    (dict(report_goal=-1), "report_goal"),
    (dict(report_goal=2**64), "report_goal"),
    (dict(too_long="keep"), "too_long must be one of"),
    (dict(encoder="text"), "encoder must be an ItemEncoder"),
])
def test_an_invalid_announcement_cannot_be_built(changes, problem):
    with pytest.raises(FederatedFormatError, match=problem) as caught:
        announcement(**changes)
    assert isinstance(caught.value, ValueError)


def test_a_complete_item_is_never_on_the_frontier():
    # ("a", "") is a valid prefix of the encoding (the item "a"), but it has nothing to extend.
    with pytest.raises(FederatedFormatError, match="is a complete item"):
        announcement(frontier={("a", ""), ("b", "c")})


# ---------------------------------------------------------------------------------------------
# Malformed invitations and reports.


@pytest.mark.parametrize("changes, problem", [
    (dict(token=TOKEN[:15]), "the token must be 16 bytes, got 15 bytes"),
    (dict(token=TOKEN + b"x"), "got 17 bytes"),
    (dict(token="x" * 16), "got str"),
    (dict(device_id=b""), "the device id must be non-empty bytes"),
    (dict(device_id="device"), "the device id must be non-empty bytes"),
    (dict(choice_word=-1), r"choice_word must be an integer in \[0, 18446744073709551616\)"),
    (dict(choice_word=2**64), "choice_word must be"),
    (dict(choice_word=0.5), "choice_word must be"),
    (dict(round_index=-1), "rounds are numbered from 1"),
    (dict(job_id=None), "the job id"),
])
def test_an_invalid_invitation_cannot_be_built(changes, problem):
    with pytest.raises(FederatedFormatError, match=problem):
        invitation(**changes)


def _invitation_bytes(**fields):
    message = federated_pb2.Invitation(schema_version=1, job_id="job-7", round_index=3, device_id=b"d",
                                       token=TOKEN, choice_word=7)
    for name, value in fields.items():
        if value is None:
            message.ClearField(name)
        else:
            setattr(message, name, value)
    return message.SerializeToString()


@pytest.mark.parametrize("fields, problem", [
    (dict(schema_version=3), "schema_version 3"),
    (dict(choice_word=None), "no choice_word"),
    (dict(token=b"short"), "the token must be 16 bytes, got 5 bytes"),
    (dict(token=None), "got 0 bytes"),
    (dict(device_id=None), "the device id"),
    (dict(round_index=0), "rounds are numbered from 1"),
    (dict(job_id=None), "the job id"),
])
def test_a_malformed_invitation_is_refused(fields, problem):
    assert Invitation.from_bytes(_invitation_bytes()).choice_word == 7
    with pytest.raises(FederatedFormatError, match=problem) as caught:
        Invitation.from_bytes(_invitation_bytes(**fields), source="device d")
    assert caught.value.source == "device d"


def _report_bytes(answer="prefix", units=(b"h", b"e", b"l"), **fields):
    message = federated_pb2.VoteReport(schema_version=1, job_id="job-7", round_index=3, token=TOKEN)
    if answer == "prefix":
        message.prefix.CopyFrom(vote_pb2.Prefix(units=list(units)))
    elif answer == "abstain":
        message.abstain.SetInParent()
    for name, value in fields.items():
        setattr(message, name, value)
    return message.SerializeToString()


@pytest.mark.parametrize("data, problem", [
    (_report_bytes(schema_version=0), "no schema_version"),
    (_report_bytes(answer=None), "neither a prefix nor an abstention"),
    (_report_bytes(units=(b"h", b"e")), r"prefix \('h', 'e'\) has 2 units, a round-3 vote needs 3"),
    (_report_bytes(units=(b"h", b"e", b"l", b"l")), "has 4 units"),
    (_report_bytes(units=(b"h", b"el", b"l")), "longer than unit_size=1"),
    (_report_bytes(units=(b"h", b"", b"l")), "terminator at position 1"),
    (_report_bytes(units=(b"h", b"\xff", b"l")), "is not UTF-8"),
    (_report_bytes(token=TOKEN * 2), "the token must be 16 bytes, got 32 bytes"),
    (_report_bytes(round_index=0), "rounds are numbered from 1"),
    (_report_bytes(round_index=7, units=(b"a",) * 7), "round_index 7 exceeds max_length=6"),
    (_report_bytes(job_id=""), "the job id"),
    (b"\x0a\x05abc", "not a triehh_beam.VoteReport message"),
])
def test_a_malformed_report_is_refused(data, problem):
    assert VoteReport.from_bytes(_report_bytes(), TEXT).prefix == ("h", "e", "l")
    with pytest.raises(FederatedFormatError, match=problem) as caught:
        VoteReport.from_bytes(data, TEXT, source="subscription s, message 9")
    assert caught.value.source == "subscription s, message 9"


def test_a_report_is_read_against_the_job_encoding():
    data = VoteReport("job-7", 2, TOKEN, (b"10", b"01")).to_bytes()
    ints = ItemEncoder(kind="int", int_bits=8, unit_size=2, max_length=5)
    assert VoteReport.from_bytes(data, ints).prefix == (b"10", b"01")
    assert VoteReport.from_bytes(data, ItemEncoder(unit_size=2)).prefix == ("10", "01")
    with pytest.raises(FederatedFormatError, match="longer than unit_size=1"):
        VoteReport.from_bytes(data, TEXT)


@pytest.mark.parametrize("changes, problem", [
    (dict(prefix=("a", "b")), "has 2 units, a round-3 vote needs 3"),
    (dict(prefix=("a", b"b", "c")), "units are all str or all bytes"),
    (dict(prefix="abc"), "a prefix is a tuple of units"),
    (dict(token=b""), "the token must be 16 bytes"),
    (dict(round_index=0, prefix=None), "rounds are numbered from 1"),
])
def test_an_invalid_report_cannot_be_built(changes, problem):
    fields = dict(job_id="job-7", round_index=3, token=TOKEN, prefix=("a", "b", "c"))
    fields.update(changes)
    with pytest.raises(ValueError, match=problem):
        VoteReport(**fields)


def test_the_encoding_message_is_the_trie_files_own():
    message = federated_pb2.RoundAnnouncement.FromString(announcement("text-units-2-tokenized").to_bytes())
    assert message.encoding == encoding_to_proto(CASES["text-units-2-tokenized"][0])
    assert message.encoding.tokenizer == "words-v1"


def test_the_docs_tables_list_every_field_with_its_number():
    """docs/federated_protocol.md describes each message field by field: its tables must list
    exactly the fields the .proto defines, by number and name."""
    import pathlib
    import re

    doc = (pathlib.Path(__file__).resolve().parents[3] / "docs" / "federated_protocol.md").read_text(encoding="utf-8")
    for message in (federated_pb2.RoundAnnouncement, federated_pb2.Invitation, federated_pb2.VoteReport,
                    federated_pb2.EstimateAnnouncement):
        name = message.DESCRIPTOR.name
        section = doc.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", section, re.M)
        assert [(int(n), f) for n, f in rows] == [(f.number, f.name) for f in message.DESCRIPTOR.fields], name
