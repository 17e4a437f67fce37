"""The device in the estimate round (``--estimate-frequencies``): for the same keys every device
reports exactly the target the central estimate draws for its user (``user_choice`` with
``EstimateKeys.choice_uniforms``), so the release of the device reports equals
``reference_estimates`` (the Beam step's oracle); a device holding none of the targets abstains
explicitly; and a device refuses an estimate invitation with a vote round's announcement (and
the reverse)."""

import random
from collections import Counter

import pytest

from tests.device.device_populations import DEADLINE, JOB, POPULATIONS, SAMPLER, invitation_token
from triehh_beam.device import DeviceClient, InvitationMismatchError
from triehh_beam.protocol.estimates.frequency_estimates import (EstimateKeys, EstimateTargets,
                                                                reference_estimates, release,
                                                                user_choice)
from triehh_beam.protocol.federated.estimate import EstimateAnnouncement
from triehh_beam.protocol.federated.messages import Invitation, RoundAnnouncement, VoteReport
from triehh_beam.protocol.items.encoding import ItemEncoder, is_terminated
from triehh_beam.protocol.randomness import keyed_hash
from triehh_beam.reference.simulation import encode_population

KEYS = EstimateKeys.derive(SAMPLER.seed, SAMPLER.identity)
ROUND = 5


def _targets(held, rng) -> EstimateTargets:
    """Leaves as a released trie has them: some length-2 prefixes (frequent prefixes), and
    some complete items that start with none of them (heavy hitters)."""
    prefixes = sorted({s[:2] for s in held if len(s) > 2 and not is_terminated(s[:2])})
    chosen = set(rng.sample(prefixes, max(1, len(prefixes) // 4)))
    items = [s for s in held if is_terminated(s) and s[:2] not in chosen]
    return EstimateTargets(tuple(chosen) + tuple(rng.sample(items, min(len(items), 30))))


@pytest.mark.parametrize("name", sorted(POPULATIONS))
def test_every_device_reports_the_central_estimates_choice(name):
    encoder, too_long, device_records, central_records = POPULATIONS[name]
    central = encode_population(central_records, encoder, too_long)
    held = sorted({s for weighted in central.weighted for s, _ in weighted})
    targets = _targets(held, random.Random(7))
    announcement = EstimateAnnouncement(JOB, ROUND, encoder, targets, DEADLINE, 0, too_long)
    data = announcement.to_bytes()
    words = KEYS.choice_words_packed(*keyed_hash.pack_messages(central.user_ids)).tolist()
    uniforms = KEYS.choice_uniforms(central.user_ids).tolist()
    counts = [0] * len(targets)
    outcomes = Counter()
    for i, (user_id, weighted) in enumerate(zip(central.user_ids, central.weighted)):
        device = DeviceClient(device_records[_record_key(device_records, user_id)], device_id=user_id)
        invitation = Invitation(JOB, ROUND, user_id, invitation_token(user_id, ROUND), words[i],
                                estimate=True)
        expected = user_choice(weighted, targets, uniforms[i])
        report = device.respond(announcement, invitation)
        assert report.estimate and report.prefix == (None if expected is None else targets.sequences[expected])
        if i % 50 == 0:  # through the wire
            assert device.respond_bytes(data, invitation.to_bytes()) == report.to_bytes()
        if expected is not None:
            counts[expected] += 1
        outcomes["abstain" if expected is None else "target"] += 1
        outcomes["several targets"] += len({targets.index_of(s) for s, _ in weighted} - {-1}) > 1
    # Not vacuous: many reports of each kind, and users whose choice among targets mattered.
    assert outcomes["target"] > 300 and outcomes["abstain"] > 30 and outcomes["several targets"] > 30, outcomes
    # The release of the devices' reports is the per-user reference's (same keys, same noise).
    by_user = dict(zip(central.user_ids, central.weighted))
    assert release(counts, targets, 1.0, KEYS) == reference_estimates(by_user, targets, 1.0, KEYS)


def _record_key(records, user_id: bytes):
    """The key of ``records`` whose canonical id bytes are ``user_id``."""
    for key in (user_id, user_id.decode("utf-8", "replace")):
        if key in records:
            return key
    return int(user_id)


TEXT = ItemEncoder(max_length=6)
TARGETS = EstimateTargets((("f", "e", "d", ""), ("t", "r")))


def _estimate_announcement():
    return EstimateAnnouncement(JOB, ROUND, TEXT, TARGETS, DEADLINE)


def _invitation(word, estimate=True):
    return Invitation(JOB, ROUND, b"d", b"t" * 16, word, estimate=estimate)


def test_a_device_holding_none_of_the_targets_abstains_explicitly():
    device = DeviceClient({"hello": 3, "fee": 1, "t": 2})  # "t" is shorter than the prefix "tr"
    for word in (0, 2**63, 2**64 - 1):
        report = device.respond(_estimate_announcement(), _invitation(word))
        assert report.abstains and report.estimate
        assert VoteReport.from_bytes(report.to_bytes(), TEXT) == report
    assert DeviceClient({}).respond(_estimate_announcement(), _invitation(5)).abstains


def test_a_device_reports_its_chosen_target_by_local_count_among_the_targets_only():
    """"hello" (5) is on no target, so it never takes the draw: "fed" once, "tree" and "trip"
    (both under the prefix "tr") three times: u < 1/4 chooses "fed", u >= 1/4 "tr"."""
    device = DeviceClient({"hello": 5, "fed": 1, "tree": 1, "trip": 2})
    assert device.respond(_estimate_announcement(), _invitation(2**62 - 1)).prefix == ("f", "e", "d", "")
    assert device.respond(_estimate_announcement(), _invitation(2**62)).prefix == ("t", "r")
    assert device.respond(_estimate_announcement(), _invitation(2**64 - 1)).prefix == ("t", "r")


def test_the_estimate_round_and_a_vote_round_are_never_mixed():
    device = DeviceClient({"fed": 1})
    vote_round = RoundAnnouncement(JOB, ROUND, TEXT, {("f", "e", "e", "d")}, DEADLINE)
    with pytest.raises(InvitationMismatchError, match="to a vote round with the announcement of the estimate"):
        device.respond(_estimate_announcement(), _invitation(5, estimate=False))
    with pytest.raises(InvitationMismatchError, match="to the estimate round with the announcement of a vote"):
        device.respond(vote_round, _invitation(5))
