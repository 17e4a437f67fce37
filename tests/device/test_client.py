"""The device library against the central vote: for the same keys, every device answers
exactly what the central computation votes for its user (``client_vote`` over the central
encoding with ``Sampler.choice_uniform``), a federated run driven by device reports grows
exactly the keyed simulation's trie (the pipeline's oracle) with exactly the pipeline's
columnar per-round counts, and a device refuses what it must refuse."""

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.device.device_populations import DEADLINE, JOB, POPULATIONS, SAMPLER, USERS, invitation_token
from triehh_beam.device import DeviceClient, InvitationMismatchError
from triehh_beam.protocol.federated.messages import (FederatedFormatError, Invitation, RoundAnnouncement,
                                                     VoteReport)
from triehh_beam.protocol.items.encoding import ItemEncoder, is_terminated
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.protocol.rounds import columnar, loop as rounds
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.protocol.rounds.vote import client_vote
from triehh_beam.reference.simulation import encode_population, simulate


def _words(round_index, user_ids):
    """The choice words a server sends these users in this round (canonical id bytes)."""
    return SAMPLER.round_keys(round_index).choice_words_packed(*keyed_hash.pack_messages(user_ids)).tolist()


@pytest.fixture(scope="module", params=sorted(POPULATIONS))
def population(request):
    encoder, too_long, device_records, central_records = POPULATIONS[request.param]
    central = encode_population(central_records, encoder, too_long)
    by_id = {}
    for user in device_records:
        key = user if isinstance(user, bytes) else str(user).encode()
        by_id[key] = DeviceClient(device_records[user], device_id=key)
    return request.param, encoder, too_long, central, by_id


def test_every_device_votes_exactly_the_central_vote(population):
    name, encoder, too_long, central, devices = population
    rng = random.Random(5)
    held = sorted({s for weighted in central.weighted for s, _ in weighted})
    frontiers = [(1, frozenset({()}))]
    for r in range(2, encoder.max_length + 1):
        prefixes = sorted({s[:r - 1] for s in held if len(s) >= r and not is_terminated(s[:r - 1])})
        if prefixes:
            frontiers.append((r, frozenset(rng.sample(prefixes, max(1, len(prefixes) // 3)))))
    assert len(frontiers) >= 3
    outcomes = Counter()
    for r, frontier in frontiers:
        announcement = RoundAnnouncement(JOB, r, encoder, frontier, DEADLINE, 0, too_long)
        announcement_bytes = announcement.to_bytes()
        # One batch call each (equal to choice_word / choice_uniform per user: test_choice_words).
        words = _words(r, central.user_ids)
        uniforms = SAMPLER.choice_uniforms(r, central.user_ids).tolist()
        for i, (user_id, weighted) in enumerate(zip(central.user_ids, central.weighted)):
            invitation = Invitation(JOB, r, user_id, invitation_token(user_id, r), words[i])
            expected = client_vote(weighted, frontier, r, uniforms[i])
            report = devices[user_id].respond(announcement, invitation)
            assert report.prefix == expected, (user_id, r)
            assert (report.job_id, report.round_index, report.token) == (JOB, r, invitation.token)
            if i % 25 == 0:  # the same through the wire
                data = devices[user_id].respond_bytes(announcement_bytes, invitation.to_bytes())
                assert data == report.to_bytes()
                assert VoteReport.from_bytes(data, encoder) == report
            outcomes["vote" if expected is not None else "abstain"] += 1
            outcomes["several items"] += len(weighted) > 1
    # Not vacuous: many votes, many abstentions, many users who had a real choice to make.
    assert outcomes["vote"] > 1000 and outcomes["abstain"] > 1000 and outcomes["several items"] > 1000, outcomes


def _table(weighted_per_user):
    distinct = sorted({s for weighted in weighted_per_user for s, _ in weighted})
    position = {s: i for i, s in enumerate(distinct)}
    codes = [position[s] for weighted in weighted_per_user for s, _ in weighted]
    counts = [c for weighted in weighted_per_user for _, c in weighted]
    offsets = np.cumsum([0] + [len(w) for w in weighted_per_user])
    return columnar.sequence_table(distinct, offsets, np.array(codes, dtype=np.int64), np.array(counts, dtype=np.int64))


def test_a_run_on_device_reports_grows_the_keyed_simulations_trie(population):
    name, encoder, too_long, central, devices = population
    theta, m = 12, USERS // 2
    trie = Trie.empty(encoder)
    step = rounds.next_round(trie)
    votes_per_round = []
    while isinstance(step, rounds.NextRound):
        announcement = RoundAnnouncement(JOB, step.index, encoder, step.frontier, DEADLINE, m, too_long)
        sampled = SAMPLER.sample(step.index, central.user_ids, m)
        tally = Counter()
        for user_id, word in zip(sampled, _words(step.index, sampled)):
            invitation = Invitation(JOB, step.index, user_id, invitation_token(user_id, step.index), word)
            report = devices[user_id].respond(announcement, invitation)
            if report.prefix is not None:
                tally[report.prefix] += 1
        # The pipeline's own batch vote over the central encoding of the same sample.
        table = _table([central.weighted[central.index[u]] for u in sampled])
        uniforms = SAMPLER.choice_uniforms(step.index, sampled)
        assert columnar.count_votes(table, uniforms, step.frontier, step.index).counts == dict(tally)
        votes_per_round.append(sum(tally.values()))
        kept = {prefix for prefix, votes in tally.items() if votes >= theta}
        trie, step = rounds.apply_round(trie, step, kept)

    _, _, _, central_records = POPULATIONS[name]
    reference = simulate(central_records, encoder, theta, m, SAMPLER, too_long=too_long)
    assert trie.levels == reference.levels
    assert [s.votes_cast for s in reference.round_stats] == votes_per_round
    assert trie.depth >= 3 and trie.heavy_hitter_sequences(), name


# ---------------------------------------------------------------------------------------------
# Abstentions, refusals, caching, resending.

ENCODER = ItemEncoder(max_length=6)


def _round(r=2, frontier=(("h",), ("t",)), **changes):
    fields = dict(job_id=JOB, round_index=r, encoder=ENCODER, frontier=set(frontier), deadline_millis=DEADLINE)
    fields.update(changes)
    return RoundAnnouncement(**fields)


def _invite(r=2, device=b"device-1", job=JOB, word=12345):
    return Invitation(job, r, device, b"\x01" * 16, word)


@pytest.mark.parametrize("records", [
    {"apple": 3, "banana": 1},      # nothing on the frontier {h, t}
    {"much-too-long-word": 2},      # dropped: longer than L
    {"": 1, "zero": 0},             # nothing encodable, or a zero count
    {},                             # no records at all
    [(b"bytes", 1)],                # not text: unencodable under a text encoding
])
def test_a_device_with_nothing_on_the_frontier_abstains_explicitly(records):
    device = DeviceClient(records)
    for word in (0, 2**63, 2**64 - 1):
        report = device.respond(_round(), _invite(word=word))
        assert report.prefix is None and report.abstains
        message = VoteReport.from_bytes(report.to_bytes(), ENCODER)
        assert message.abstains


def test_a_device_votes_its_chosen_items_prefix_and_only_that():
    device = DeviceClient([("hello", 1), ("tree", 3)])
    # Sorted: hello (count 1, u < 1/4), tree (u >= 1/4).
    assert device.respond(_round(), _invite(word=0)).prefix == ("h", "e")
    assert device.respond(_round(), _invite(word=2**62 - 1)).prefix == ("h", "e")
    assert device.respond(_round(), _invite(word=2**62)).prefix == ("t", "r")
    # The chosen item is off the frontier: abstain, never fall back to the other item.
    assert device.respond(_round(frontier=[("h",)]), _invite(word=2**63)).prefix is None
    # Round 1, and an item exactly as long as the round (its terminator is the vote's last unit).
    assert device.respond(_round(1, [()]), _invite(1, word=0)).prefix == ("h",)
    short = DeviceClient({"ab": 1})
    assert short.respond(_round(3, [("a", "b")]), _invite(3)).prefix == ("a", "b", "")
    assert short.respond(_round(4, [("a", "b", "c")]), _invite(4)).prefix is None


def test_the_long_item_policy_of_the_announcement_is_applied():
    device = DeviceClient({"hellooooo": 1})  # 9 letters: longer than L = 6
    assert device.respond(_round(), _invite()).prefix is None
    assert device.respond(_round(too_long="truncate"), _invite()).prefix == ("h", "e")


def test_a_resent_report_is_identical():
    device = DeviceClient({"hello": 2, "tea": 5, "tree": 1})
    announcement, invitation = _round().to_bytes(), _invite(word=2**64 - 7).to_bytes()
    first = device.respond_bytes(announcement, invitation)
    assert DeviceClient({"tree": 1, "tea": 5, "hello": 2}).respond_bytes(announcement, invitation) == first
    assert device.respond_bytes(announcement, invitation) == first


def test_encoded_items_are_cached_per_encoding_and_policy():
    device = DeviceClient([("Hello world", 2), ("hello", 1)])
    tokens = ItemEncoder(tokenize=True, case_fold=True, max_length=6)
    first = device.weighted_sequences(tokens)
    assert device.weighted_sequences(tokens) is first
    assert device.weighted_sequences(ItemEncoder(tokenize=True, case_fold=True, max_length=6)) is first
    assert first == ((("h", "e", "l", "l", "o", ""), 3), (("w", "o", "r", "l", "d", ""), 2))
    assert device.weighted_sequences(ENCODER) == ((("h", "e", "l", "l", "o", ""), 1),)
    assert device.weighted_sequences(ENCODER, truncate=True) == (
        (("H", "e", "l", "l", "o", " "), 2), (("h", "e", "l", "l", "o", ""), 1))


def test_the_callers_records_are_copied():
    records = {"hello": 1}
    device = DeviceClient(records)
    records["tree"] = 100
    assert device.respond(_round(), _invite(word=2**64 - 1)).prefix == ("h", "e")
    assert records == {"hello": 1, "tree": 100}


@pytest.mark.parametrize("invitation, problem", [
    (_invite(job="another-job"), "job 'another-job' round 2, the announcement for job"),
    (_invite(r=3), "round 3, the announcement for job"),
    (_invite(device=b"device-2"), "for device b'device-2', this is b'device-1'"),
])
def test_a_device_refuses_an_invitation_that_is_not_for_this_round_or_device(invitation, problem):
    device = DeviceClient({"hello": 1}, device_id=b"device-1")
    assert device.respond(_round(), _invite()).prefix == ("h", "e")
    with pytest.raises(InvitationMismatchError, match=problem):
        device.respond(_round(), invitation)
    with pytest.raises(InvitationMismatchError):
        device.respond_bytes(_round().to_bytes(), invitation.to_bytes())


def test_a_device_without_an_id_answers_any_device_id():
    assert DeviceClient({"hello": 1}).respond(_round(), _invite(device=b"x")).prefix == ("h", "e")


def test_a_device_refuses_malformed_messages():
    device = DeviceClient({"hello": 1})
    invitation = _invite().to_bytes()
    with pytest.raises(FederatedFormatError, match="^announcement: "):
        device.respond_bytes(_round().to_bytes()[:-2], invitation)
    with pytest.raises(FederatedFormatError, match="^invitation: no choice_word"):
        device.respond_bytes(_round().to_bytes(), invitation[:-9])
    with pytest.raises(TypeError):
        device.respond(_round().to_bytes(), invitation)


@pytest.mark.parametrize("records", [{"a": -1}, {"a": 1.5}, {"a": True}, [("a", None)]])
def test_a_device_refuses_bad_counts(records):
    with pytest.raises(ValueError, match="counts must be non-negative integers"):
        DeviceClient(records)


def test_a_single_item_is_not_records():
    for records in ("hello", b"hello"):
        with pytest.raises(TypeError, match="not one"):
            DeviceClient(records)


def test_a_device_id_is_non_empty_bytes():
    for device_id in (b"", "device"):
        with pytest.raises(ValueError, match="a device id is non-empty bytes"):
            DeviceClient({}, device_id=device_id)


def test_the_device_library_loads_no_beam_no_arrow():
    root = Path(__file__).resolve().parents[2]
    code = ("import sys, triehh_beam.device\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('apache_beam', 'pyarrow'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert result.stdout.strip() == ""
