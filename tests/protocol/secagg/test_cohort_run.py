"""A cohort's secure aggregation end to end in memory: the unmasked sum equals the plaintext sum
over the survivors for many dropout patterns at every phase (fixed seeds; an independent count
of who is left decides success), a cohort below its threshold is refused at each phase by the
server and by the devices, one device's masked vector looks uniform, and out-of-order or
altered messages are refused."""

import random

import numpy as np
import pytest
from scipy import stats

from triehh_beam.protocol.secagg.crypto import CohortContext
from triehh_beam.protocol.secagg.device import SecAggDevice, SecAggProtocolError, ShareKind
from triehh_beam.protocol.secagg.local import run_cohort
from triehh_beam.protocol.secagg.server import CohortFailedError, Phase, SecAggCohort

CONTEXT = CohortContext("job-secagg", 2, 0)


def _one_hot(rng, size, length):
    vectors = []
    for _ in range(size):
        v = np.zeros(length, dtype=np.uint32)
        v[rng.randrange(length)] = 1
        vectors.append(v)
    return vectors


def test_sum_equals_plaintext_sum_over_survivors_for_many_dropout_patterns():
    rng = random.Random(40)
    succeeded = failed = 0
    for trial in range(120):
        size = rng.randrange(3, 14)
        threshold = rng.randrange(2, size + 1)
        vectors = _one_hot(rng, size, rng.randrange(1, 9))
        dropped, left = {}, set(range(1, size + 1))
        ok = True
        for phase in Phase:
            gone = {i for i in left if rng.random() < 0.12}
            dropped[phase] = gone
            left -= gone
            ok = ok and len(left) >= threshold
        outcome = run_cohort(CONTEXT, vectors, threshold, random.Random(trial).randbytes, dropped)
        if ok:
            succeeded += 1
            expected_survivors = set(range(1, size + 1)) - dropped[Phase.KEYS] - dropped[Phase.SHARES] - dropped[Phase.MASKED]
            assert set(outcome.survivors) == expected_survivors, trial
            assert outcome.total.tolist() == sum(vectors[i - 1] for i in expected_survivors).tolist(), trial
        else:
            failed += 1
            assert outcome.total is None and isinstance(outcome.failure, CohortFailedError), trial
    assert succeeded > 40 and failed > 10  # both branches exercised


@pytest.mark.parametrize("phase", list(Phase))
def test_a_cohort_below_its_threshold_at_any_phase_is_refused(phase):
    vectors = _one_hot(random.Random(1), 6, 4)
    outcome = run_cohort(CONTEXT, vectors, 5, random.Random(2).randbytes, {phase: {2, 5}})
    assert outcome.total is None
    assert outcome.failure.phase == phase and "below the threshold 5" in outcome.failure.reason


def test_dropouts_after_masking_are_recovered_by_their_mask_keys():
    vectors = _one_hot(random.Random(3), 8, 5)
    outcome = run_cohort(CONTEXT, vectors, 4, random.Random(4).randbytes, {Phase.MASKED: {1, 8, 4}, Phase.UNMASK: {2}})
    assert outcome.survivors == (2, 3, 5, 6, 7)
    assert outcome.total.tolist() == sum(vectors[i - 1] for i in (2, 3, 5, 6, 7)).tolist()


def test_a_masked_vector_looks_uniform_and_unlike_its_plaintext():
    length = 51200
    vectors = [np.zeros(length, dtype=np.uint32) for _ in range(3)]
    vectors[0][17] = 1
    devices = [SecAggDevice(CONTEXT, i + 1, 3, 2, v, random.Random(10 + i).randbytes) for i, v in enumerate(vectors)]
    roster = {d.index: d.advertise() for d in devices}
    sent = {d.index: d.share(roster) for d in devices}
    masked = devices[0].mask({s: out[1] for s, out in sent.items() if s != 1})
    assert (masked != vectors[0]).mean() > 0.999
    # The top byte of each word in 256 bins: chi-square with 255 df, below its 0.999 quantile.
    counts = np.bincount(masked >> 24, minlength=256)
    expected = length / 256
    statistic = ((counts - expected) ** 2 / expected).sum()
    assert statistic < stats.chi2.ppf(0.999, 255)
    # The low bit (the one a one-hot input would change) is balanced within 4 standard deviations.
    assert abs((masked & 1).mean() - 0.5) < 4 * 0.5 / np.sqrt(length)


def _devices(size, threshold, length=3, seed=0):
    vectors = _one_hot(random.Random(seed), size, length)
    return [SecAggDevice(CONTEXT, i + 1, size, threshold, v, random.Random(seed * 100 + i).randbytes)
            for i, v in enumerate(vectors)]


def test_devices_refuse_rosters_and_survivor_lists_below_the_threshold():
    devices = _devices(4, 3)
    roster = {d.index: d.advertise() for d in devices}
    with pytest.raises(SecAggProtocolError, match="below the threshold 3"):
        devices[0].share({i: roster[i] for i in (1, 2)})
    sent = {d.index: d.share(roster) for d in devices[1:]}
    inbox = {s: out[2] for s, out in sent.items() if s != 2}
    devices[1].mask(inbox)
    with pytest.raises(SecAggProtocolError, match="below the threshold 3"):
        devices[1].unmask({2, 3})


def test_a_device_gives_one_share_per_sharer_never_both_kinds():
    devices = _devices(5, 3, seed=1)
    roster = {d.index: d.advertise() for d in devices}
    sent = {d.index: d.share(roster) for d in devices}
    for d in devices:
        d.mask({s: out[d.index] for s, out in sent.items() if s != d.index})
    answer = devices[0].unmask({1, 2, 4})
    assert {s: kind for s, (kind, _) in answer.items()} == {
        1: ShareKind.SELF_MASK, 2: ShareKind.SELF_MASK, 3: ShareKind.MASK_KEY, 4: ShareKind.SELF_MASK, 5: ShareKind.MASK_KEY}
    with pytest.raises(SecAggProtocolError, match="phase"):
        devices[0].unmask({1, 2, 3, 4, 5})


def test_out_of_order_and_altered_messages_are_refused():
    devices = _devices(3, 2, seed=2)
    devices[0].advertise()
    with pytest.raises(SecAggProtocolError, match="mask message in the share phase"):
        devices[0].mask({})
    devices = _devices(3, 2, seed=2)
    roster = {d.index: d.advertise() for d in devices}
    sent = {d.index: d.share(roster) for d in devices}
    altered = bytearray(sent[2][3])
    altered[5] ^= 1
    with pytest.raises(SecAggProtocolError, match="authenticate"):
        devices[2].mask({2: bytes(altered), 1: sent[1][3]})


def test_the_server_refuses_calls_out_of_order_and_shares_that_do_not_recover_a_key():
    server = SecAggCohort(CONTEXT, 3, 2, 4)
    with pytest.raises(RuntimeError, match="out of order"):
        server.masked({})
    devices = _devices(3, 2, length=4, seed=3)
    roster = server.keys({d.index: d.advertise() for d in devices})
    inbox = server.shares({d.index: d.share(roster) for d in devices})
    survivors = server.masked({d.index: d.mask(inbox[d.index]) for d in devices[:2]})
    responses = {d.index: d.unmask(survivors) for d in devices[:2]}
    kind, share = responses[1][3]
    responses[1][3] = (kind, bytes([share[0] ^ 1]) + share[1:])
    with pytest.raises(CohortFailedError, match="mask key|inconsistent|prime"):
        server.unmask(responses)


def test_a_roster_with_an_unusable_key_is_refused_as_a_protocol_error():
    devices = _devices(3, 2, seed=4)
    roster = {d.index: d.advertise() for d in devices}
    roster[3] = (bytes(32), roster[3][1])  # a small-order cipher key for device 3
    with pytest.raises(SecAggProtocolError, match="unusable"):
        devices[0].share(roster)
