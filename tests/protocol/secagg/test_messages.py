"""The secure-aggregation messages: every phase round-trips through its bytes, and truncated,
mutated, mis-versioned or inconsistent bytes are refused with FederatedFormatError."""

import pytest

from triehh_beam.proto import secagg_pb2
from triehh_beam.protocol.federated.messages import FederatedFormatError
from triehh_beam.protocol.secagg.device import ShareKind
from triehh_beam.protocol.secagg.messages import (CIPHERTEXT_BYTES, Inbox, Keys, Masked, Roster,
                                                  SecAggReport, SecAggRequest, Setup, Shares, Survivors,
                                                  Unmask)

TOKEN = bytes(range(16))
REQUESTS = [Setup(0, 2, 5, 4, (b"a", b"b"), 13, b"invitation"), Roster(((2, b"c" * 32, b"m" * 32), (1, b"C" * 32, b"M" * 32))),
            Inbox(((3, b"x" * CIPHERTEXT_BYTES),)), Survivors((4, 1, 2))]
REPORTS = [Keys(b"c" * 32, b"m" * 32), Shares(((1, b"y" * CIPHERTEXT_BYTES), (3, b"z" * CIPHERTEXT_BYTES))),
           Masked(bytes(range(12))), Unmask(((1, ShareKind.SELF_MASK, b"s" * 44), (2, ShareKind.MASK_KEY, b"k" * 44)))]


@pytest.mark.parametrize("phase", REQUESTS)
def test_requests_round_trip(phase):
    request = SecAggRequest("job", 3, TOKEN, phase)
    assert SecAggRequest.from_bytes(request.to_bytes()) == request


@pytest.mark.parametrize("phase", REPORTS)
def test_reports_round_trip(phase):
    report = SecAggReport("job", 3, TOKEN, phase)
    assert SecAggReport.from_bytes(report.to_bytes()) == report


def test_masked_values_are_little_endian_words():
    assert Masked.of([1, 2**32 - 1]).vector == b"\x01\x00\x00\x00\xff\xff\xff\xff"
    assert Masked(b"\x01\x00\x00\x00").values.tolist() == [1]


@pytest.mark.parametrize("build, match", [
    (lambda: Setup(0, 6, 5, 4, (), 3, b"i"), "index"), (lambda: Setup(0, 1, 5, 1, (), 3, b"i"), "threshold"),
    (lambda: Setup(0, 1, 5, 2, (b"a", b"a"), 3, b"i"), "distinct"), (lambda: Setup(0, 1, 5, 2, (), 3, b""), "invitation"), (lambda: Roster(((1, b"c", b"m" * 32),)), "32 bytes"),
    (lambda: Survivors((1, 1)), "repeated"), (lambda: Inbox(((1, b"x"),)), "ciphertext"),
    (lambda: Masked(b"abc"), "multiple of 4"), (lambda: Unmask(((1, ShareKind.SELF_MASK, b"s"),)), "44 bytes"),
    (lambda: SecAggReport("job", 3, TOKEN, Setup(0, 1, 5, 2, (), 3, b"i")), "phase"),
    (lambda: SecAggRequest("job", 3, b"short", Survivors((1,))), "token"),
])
def test_inconsistent_values_are_refused(build, match):
    with pytest.raises(FederatedFormatError, match=match):
        build()


def test_bad_bytes_are_refused():
    data = SecAggReport("job", 3, TOKEN, REPORTS[3]).to_bytes()
    with pytest.raises(FederatedFormatError):
        SecAggReport.from_bytes(data[:-3])
    no_phase = secagg_pb2.SecAggReport(schema_version=1, job_id="job", round_index=3, token=TOKEN).SerializeToString()
    with pytest.raises(FederatedFormatError, match="no phase"):
        SecAggReport.from_bytes(no_phase)
    version = secagg_pb2.SecAggRequest(schema_version=2, job_id="job", round_index=3, token=TOKEN)
    version.survivors.indices.append(1)
    with pytest.raises(FederatedFormatError, match="schema_version 2"):
        SecAggRequest.from_bytes(version.SerializeToString())
    kind = secagg_pb2.SecAggReport(schema_version=1, job_id="job", round_index=3, token=TOKEN)
    kind.unmask.shares.add(owner=1, kind=0, share=b"s" * 44)
    with pytest.raises(FederatedFormatError, match="unknown kind"):
        SecAggReport.from_bytes(kind.SerializeToString())
