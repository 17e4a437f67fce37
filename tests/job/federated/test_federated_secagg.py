"""``job.federated.secagg``'s checks before anything is announced (the encodings secure
aggregation covers, a plan selecting fewer devices per round than one cohort's minimum), and the
estimate round under secure aggregation run by a real ``FederatedServer`` against in-process
devices: with no dropout it releases exactly the plain estimate round's estimates (the same
release, keys and noise; both equal to an oracle counting the devices' plaintext choices), and
with dropouts at the keys, after sharing and after the masked vectors it sums whole cohorts
only: a cohort below its threshold is dropped whole and counted, the others give the exact count
of their devices that sent a masked vector. And an exchange stops reading the log as soon as
every device asked has answered (no quiet period then: nothing later could be counted)."""

import itertools
import json
import time
import types

import pytest

from triehh_beam.device import DeviceClient
from triehh_beam.device.secagg import SecureVoteSession
from triehh_beam.evaluation.fleet.secagg import phase_of
from triehh_beam.io.pubsub import federated_attributes as attributes
from triehh_beam.job.federated.estimates import ESTIMATE_KEY, run_estimate_round
from triehh_beam.job.federated.log import LoggedMessage
from triehh_beam.job.federated.secagg import SecureAggregation
from triehh_beam.job.federated.server import FederatedServer, FederatedSource
from triehh_beam.job.federated.state import progress_from_state
from triehh_beam.job.release import lifecycle as release_lib
from triehh_beam.job.release import outputs
from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.protocol.estimates.frequency_estimates import EstimateKeys, EstimateTargets, release
from triehh_beam.protocol.federated.estimate import read_announcement
from triehh_beam.protocol.federated.messages import Invitation
from triehh_beam.protocol.federated.selection import Registry
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.protocol.secagg.cohorts import CohortPolicy
from triehh_beam.protocol.secagg.messages import SecAggRequest


def test_text_of_one_character_units_is_covered():
    SecureAggregation().check(ItemEncoder(max_length=8))
    SecureAggregation(alphabet="ab").check(ItemEncoder(max_length=8, case_fold=True))


@pytest.mark.parametrize("encoder, match", [
    (ItemEncoder(max_length=8, unit_size=2), "one-character units"),
    (ItemEncoder(kind=ItemKind.BYTES, max_length=8), "one-character units"),
])
def test_what_is_not_covered_is_refused(encoder, match):
    with pytest.raises(ValueError, match=match):
        SecureAggregation().check(encoder)


def test_a_plan_below_one_cohort_is_refused():
    secure = SecureAggregation(CohortPolicy(max_size=100, min_size=20))
    secure.check_selection(20)
    with pytest.raises(ValueError, match="selects 19.5 devices per round, fewer than one cohort's minimum"):
        secure.check_selection(19.5)


def test_a_repeated_alphabet_character_is_refused():
    with pytest.raises(ValueError, match="distinct characters"):
        SecureAggregation(alphabet="abca")


# ---- the estimate round under secure aggregation, against in-process devices ----------------

SEED = bytes(range(40, 72))
JOB_TOPIC, JOB_SUBSCRIPTION = "projects/p/topics/announce", "projects/p/subscriptions/reports"


def _users(n: int):
    """Devices holding one-letter items: "a" (half), "b" (two fifths), "c" or nothing usable (a
    word longer than max_length allows), every seventh one more letter twice (its choice then
    matters)."""
    users = {}
    for i in range(n):
        word = "a" if i % 2 == 0 else ("b" if i % 10 not in (7, 9) else ("c" if i % 10 == 7 else "toolong"))
        items = {word: 1}
        if i % 7 == 0:
            items["b" if word == "a" else "a"] = 2
        users[f"device-{i}"] = items
    return users


class _Fleet:
    """Devices answering in process what the server publishes: plain invitations with
    ``DeviceClient.respond``, secure requests with a ``SecureVoteSession``; a device whose
    (cohort, index) ``drops(cohort, index, exchange)`` says stops answering from that exchange
    on (0: setup, 3: survivors). Their reports wait in ``read_new``, the server's report log."""

    def __init__(self, users, drops=lambda cohort, index, exchange: False):
        self.clients = {d.encode(): DeviceClient(items, d.encode()) for d, items in users.items()}
        self.drops, self.announcements, self.sessions, self.where = drops, {}, {}, {}
        self.choices = {}  # device -> its plaintext estimate report (what the server must not see)
        self.masked = set()  # devices that sent their masked vector
        self._queue, self._ids = [], itertools.count()

    def publish(self, topic, messages):
        for data, attrs in messages:
            envelope = attributes.read_attributes(attrs)
            key = (envelope.job_id, envelope.round_index)
            if envelope.kind == attributes.ANNOUNCEMENT:
                self.announcements[key] = read_announcement(data)
            elif envelope.kind == attributes.INVITATION:
                report = self.clients[envelope.device].respond(self.announcements[key], Invitation.from_bytes(data))
                self._send(report.to_bytes())
            else:
                self._secure(envelope.device, self.announcements[key], SecAggRequest.from_bytes(data))

    def _secure(self, device, announcement, request):
        exchange = phase_of(request)
        if exchange == 0:
            setup = request.phase
            self.where[device] = (setup.cohort, setup.index)
            session = SecureVoteSession(self.clients[device], announcement, request)
            self.choices[device] = self.clients[device].respond(announcement, session.invitation)
        if self.drops(*self.where[device], exchange) or device in self.sessions and self.sessions[device] is None:
            self.sessions[device] = None
            return
        if exchange == 0:
            self.sessions[device] = session
            self._send(session.keys())
        else:
            self._send(self.sessions[device].handle(request))
            self.masked |= {device} if exchange == 2 else set()

    def _send(self, data):
        # Publish times in whole milliseconds, as the server's clock reads its close.
        self._queue.append(LoggedMessage(int(time.time() * 1000) * 1000, str(next(self._ids)), data))

    def read_new(self):
        out, self._queue = self._queue, []
        return out


def _server(tmp_path, fleet, users, secure):
    config = DiscoveryConfig(input_pattern=str(tmp_path / "registry.txt"), output_dir=str(tmp_path / "out"),
                             epsilon=8.0, delta=1e-6, max_length=2, seed=SEED, estimate_frequencies=1.0)
    # Every answer is in the log once a publication returns: the fleet has then sent all it will.
    source = FederatedSource(Registry.from_ids(users), JOB_TOPIC, JOB_SUBSCRIPTION, round_deadline=30,
                             poll_seconds=0.01, quiet_seconds=0.05, secure=secure,
                             heard_from_all=lambda job_id, r, invited, phase=None: True)
    server = FederatedServer(config, source, SEED, fleet.publish, lambda line: None, None)
    server.charge()
    return server


def _trie(encoder):
    """The released trie of two rounds: "a" and "b" kept, then both ended."""
    trie, step = Trie.empty(encoder), rounds.next_round(Trie.empty(encoder), 2)
    trie, step = rounds.apply_round(trie, step, [("a",), ("b",)], 2)
    trie, _ = rounds.apply_round(trie, step, [("a", encoder.eos), ("b", encoder.eos)], 2)
    return trie


def _released(server, trie, counted):
    """The estimates of the devices ``counted`` (their plaintext reports), with the job's keys:
    the oracle, counted apart from any tally."""
    targets = EstimateTargets.from_trie(trie)
    counts = [sum(1 for r in counted if r.prefix is not None and tuple(r.prefix) == t) for t in targets.sequences]
    keys = EstimateKeys.derive(server.sampler.seed, server.sampler.identity)
    return json.loads(outputs.estimates_to_json(release(counts, targets, 1.0, keys), server.encoder))


POLICY = CohortPolicy(max_size=10, min_size=4, fraction=0.5)


def test_the_secure_estimate_round_releases_the_plain_rounds_estimates(tmp_path, monkeypatch):
    users = _users(60)
    plain_fleet, secure_fleet = _Fleet(users), _Fleet(users)
    plain = _server(tmp_path / "plain", plain_fleet, users, None)
    # The same release (nonce, keys, job id) in another state directory.
    monkeypatch.setattr(release_lib.Release, "fresh", classmethod(lambda cls, seed, identity: plain.release))
    secure = _server(tmp_path / "secure", secure_fleet, users, SecureAggregation(POLICY))
    assert secure.job_id == plain.job_id
    trie = _trie(plain.encoder)
    plain_estimates, _ = run_estimate_round(plain, trie, plain_fleet, [], 2)
    secure_estimates, _ = run_estimate_round(secure, trie, secure_fleet, [], 2)
    assert secure_estimates == plain_estimates
    every = list(secure_fleet.choices.values())
    # Five hold only "c" (no target), five only "toolong" (dropped): they abstain.
    assert len(every) == 60 and sum(r.prefix is None for r in every) == 10
    assert secure.progress_doc[ESTIMATE_KEY]["released"] == _released(secure, trie, every)
    record = secure.progress_doc[ESTIMATE_KEY]["secure_aggregation"]
    assert (record["cohorts"], record["unmasked"], record["devices_summed"]) == (6, 6, 60)
    # The state committed it, cohorts included, for a rerun to read back.
    assert progress_from_state(secure.store.load())[ESTIMATE_KEY]["secure_aggregation"]["unmasked"] == 6


def test_dropouts_in_the_estimate_round_sum_whole_cohorts_only(tmp_path):
    users = _users(60)
    # Cohort 0 loses 6 of 10 at the keys (below t = 5: dropped whole); cohort 1 loses 3 after
    # sharing (their pairwise masks removed, their votes out); cohort 2 loses 2 after sending
    # their masked vectors (their votes in: the others' shares remove their self masks).
    drops = {0: (0, range(1, 7)), 1: (2, range(1, 4)), 2: (3, range(1, 3))}

    def dropped(cohort, index, exchange):
        at, indices = drops.get(cohort, (9, ()))
        return exchange >= at and index in indices

    fleet = _Fleet(users, dropped)
    server = _server(tmp_path, fleet, users, SecureAggregation(POLICY))
    trie = _trie(server.encoder)
    run_estimate_round(server, trie, fleet, [], 2)
    record = server.progress_doc[ESTIMATE_KEY]
    secure = record["secure_aggregation"]
    assert secure["dropped_by_phase"] == {"keys": 1} and secure["devices_in_dropped_cohorts"] == 10
    assert (secure["cohorts"], secure["unmasked"]) == (6, 5)
    summed = [r for d, r in fleet.choices.items() if fleet.where[d][0] != 0 and d in fleet.masked]
    assert len(summed) == secure["devices_summed"] == 60 - 10 - 3
    assert record["released"] == _released(server, trie, summed)
    assert record["released"] != _released(server, trie, list(fleet.choices.values()))


class _Reads:
    """A report log whose ``read_new`` hands out ``batches`` in turn, counting the calls."""

    def __init__(self, *batches):
        self.batches, self.calls = list(batches), 0

    def read_new(self):
        self.calls += 1
        return self.batches.pop(0) if self.batches else []


def _waiting_server(quiet_seconds):
    # catch_up_seconds bounds the wait: a wait that ignored complete() fails after 2 s, never hangs.
    source = types.SimpleNamespace(poll_seconds=0.001, quiet_seconds=quiet_seconds, catch_up_seconds=2.0)
    return types.SimpleNamespace(source=source, renew=lambda: None)


def test_an_exchange_stops_reading_once_every_answer_is_in_the_pool():
    # complete() at the close: no quiet period at all (the log is never read after done()).
    log, pool = _Reads(), []
    FederatedServer._wait_for(_waiting_server(3600.0), log, pool, lambda: True, complete=lambda: True)
    assert log.calls == 0
    # The last answer arrives during the quiet period: the wait ends with it, not an hour later.
    message = LoggedMessage(1, "m", b"answer")
    log, pool = _Reads([], [message]), []
    FederatedServer._wait_for(_waiting_server(3600.0), log, pool, lambda: True, complete=lambda: bool(pool))
    assert pool == [message] and log.calls == 2
    # Without complete(): the log is read until it stays quiet for quiet_seconds.
    log, pool = _Reads([message]), []
    FederatedServer._wait_for(_waiting_server(0.01), log, pool, lambda: True)
    assert pool == [message] and log.calls >= 2
