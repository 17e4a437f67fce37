"""A simulated fleet of devices for federated rounds, for tests and demos: one ``DeviceClient``
per user of a population (built from the records with the reader ``triehh discover`` uses, so
that the devices hold the job's items), one subscription to the announce topic for the whole
fleet, dispatching invitations by their ``device`` attribute, and each invited device answering
on the reports topic after a lognormal latency, with the faults of ``fleet_faults`` (dropout,
malformed, late, duplicate), drawn so that runs repeat. Pub/Sub does not order messages: an
invitation that arrives before its announcement waits for it (and is given up, counted, after
``announcement_timeout_s``). Threads, not processes: the pull loop parses and schedules, a
scheduler thread publishes each answer when it is due through one batching publisher; a device
that is not invited costs nothing. The estimate round (``--estimate-frequencies``) goes the same
way: its announcement read by ``read_announcement``, every device invited, its faults drawn as a
round's. ``counts`` says exactly what was received and published.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import threading
import time
import uuid
from typing import Counter, Dict, List, Mapping, Optional, Tuple, Union

from triehh_beam.device import DeviceClient, InvitationMismatchError
from triehh_beam.evaluation.fleet.faults import FleetOptions, corrupt_report, device_fate
from triehh_beam.evaluation.fleet.secagg import SecureDevices, phase_of
from triehh_beam.evaluation.population import Population
from triehh_beam.io.pubsub import client as pubsub
from triehh_beam.io.pubsub import federated_attributes as fa
from triehh_beam.protocol.federated.estimate import EstimateAnnouncement, read_announcement
from triehh_beam.protocol.federated.messages import FederatedFormatError, Invitation, RoundAnnouncement
from triehh_beam.protocol.items.encoding import Item
from triehh_beam.protocol.secagg.messages import SecAggRequest

__all__ = ["COUNTS", "SimulatedFleet"]

#: What ``SimulatedFleet.counts`` reports (every key always present).
COUNTS = (
    "announcements",   # distinct round announcements received
    "invitations",     # distinct invitations received for devices of the fleet (secure rounds: setups)
    "secagg_requests", # distinct secure-aggregation requests received (setups included)
    "reports",         # well-formed reports published (first copies; abstentions and late included;
                       # secure rounds: one per exchange answered)
    "abstentions",     # of the reports, those that abstain
    "late",            # of the reports, those sent after the close on purpose (the late fault: after the
                       # deadline, or after the server heard all the others, ``heard_from_all``)
    "after_deadline",  # of the messages published, those sent after their round's deadline
    "duplicates",      # second copies of reports
    "malformed",       # corrupt messages sent instead of a report
    "dropped",         # invited devices that never answer (the dropout fault; secure rounds: at an exchange)
    "unannounced",     # invitations given up: their announcement never came
    "refused",         # invitations the device refused (unparseable, or not matching the announcement;
                       # secure rounds: requests refused or to a device that stopped)
    "unknown_device",  # invitations for a device the fleet does not have
    "redelivered",     # messages Pub/Sub delivered again (ignored)
    "bad_messages",    # messages on the announce topic that are neither (bad attributes or body)
    "pending",         # answers scheduled and not yet published
    "buffered",        # invitations waiting for their announcement
)


@dataclasses.dataclass(order=True)
class _Send:
    due: float
    seq: int
    data: bytes = dataclasses.field(compare=False)
    attributes: Dict[str, str] = dataclasses.field(compare=False)
    kinds: Tuple[str, ...] = dataclasses.field(compare=False)  # the counters it adds to
    deadline_wall: float = dataclasses.field(compare=False)
    key: Tuple[str, int] = dataclasses.field(compare=False)  # (job, round)
    owed: bool = dataclasses.field(compare=False)  # an answer the round will hear before it closes
    latency_s: float = dataclasses.field(default=0.0, compare=False)  # a late answer's, after the close


@dataclasses.dataclass
class _Round:
    announcement: Union[RoundAnnouncement, EstimateAnnouncement]
    deadline_mono: float
    received_mono: float = 0.0


class SimulatedFleet:
    """Devices answering federated rounds through Pub/Sub.

    Start it (``start``, or as a context manager) BEFORE the server publishes a round: its
    subscription to the announce topic is created by ``start``, and Pub/Sub keeps only what is
    published after a subscription exists.

    Args:
      devices: device id (bytes, UTF-8 text: it is the ``device`` attribute) -> its records
        (item -> local count), e.g. ``Population.users``. Not copied: do not change it.
      announce_topic: ``projects/P/topics/T`` the server publishes announcements and
        invitations to.
      reports_topic: ``projects/P/topics/T`` the devices publish their reports to.
      options: faults, latencies, seed (``FleetOptions``).
      subscription: the fleet's subscription to ``announce_topic``; None: a fresh one, deleted
        by ``stop``.

    Raises:
      ValueError: a device id that cannot be a Pub/Sub attribute (empty, not UTF-8, too long).
    """

    def __init__(self, devices: Mapping[bytes, Mapping[Item, int]], announce_topic: str, reports_topic: str,
                 options: FleetOptions = FleetOptions(), subscription: Optional[str] = None):
        for device_id in devices:
            fa.device_text(device_id)
        self.devices = devices
        self.announce_topic = announce_topic
        self.reports_topic = reports_topic
        self.options = options
        self._own_subscription = subscription is None
        project = announce_topic.split("/topics/")[0]
        self.subscription = subscription or f"{project}/subscriptions/fleet-{uuid.uuid4().hex[:12]}"
        self._clients: Dict[bytes, DeviceClient] = {}
        self._condition = threading.Condition()
        self._counts: Counter[str] = collections.Counter()
        self._rounds: Dict[Tuple[str, int], _Round] = {}
        # (job, round) -> [(arrival, routed device id, invitation)] waiting for the announcement
        self._waiting: Dict[Tuple[str, int], List[Tuple[float, bytes, Invitation]]] = {}
        self._seen: set = set()
        # (job, round) -> invitations received; answers scheduled before the close, not yet published
        self._invited: Counter[Tuple[str, int]] = collections.Counter()
        self._owed: Counter[Tuple[str, int]] = collections.Counter()
        self._heap: List[_Send] = []
        self._publishing = 0  # taken from the heap, not yet counted
        self._answering = 0  # invitations being answered (out of _waiting, not yet on the heap)
        self._seq = itertools.count()
        self._stopping = False
        self._scheduler: Optional[threading.Thread] = None
        self._scheduler_error: Optional[BaseException] = None
        self._pull: Optional[pubsub.PullLoop] = None
        self._publisher: Optional[pubsub.BatchPublisher] = None
        self._secure = SecureDevices(options)

    @classmethod
    def from_population(cls, population: Population, announce_topic: str, reports_topic: str,
                        options: FleetOptions = FleetOptions(), subscription: Optional[str] = None) -> "SimulatedFleet":
        """A fleet of one device per user of ``population`` (``evaluation.population.load_population``
        of the job's records with its ``record_options``: the items ``triehh discover`` reads)."""
        return cls(population.users, announce_topic, reports_topic, options, subscription)

    # ---- running --------------------------------------------------------------------------

    def start(self) -> "SimulatedFleet":
        """Creates the subscription (if missing), then starts pulling and the scheduler.

        Raises:
          PubsubUnavailableError: Pub/Sub did not answer (the text names the host).
          RuntimeError: already started.
        """
        if self._scheduler is not None:
            raise RuntimeError("the fleet is already running")
        pubsub.ensure_subscription(self.subscription, self.announce_topic, ack_deadline_seconds=60)
        self._publisher = pubsub.BatchPublisher()
        self._scheduler = threading.Thread(target=self._schedule_loop, name="FleetScheduler", daemon=True)
        self._scheduler.start()
        try:
            self._pull = pubsub.PullLoop(self.subscription, self._on_message).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stops pulling and publishing (answers not yet due are abandoned: see ``counts``'s
        ``pending``), waits for what was published to be stored, and deletes a subscription the
        fleet created.

        Raises:
          PullCallbackError: handling a message failed (a bug: every expected problem is
            counted instead).
          PublishError: some published messages were not stored.
          RuntimeError: the scheduler failed (``__cause__``).
        """
        pull, self._pull = self._pull, None
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        try:
            if pull is not None:
                pull.stop()
        finally:
            if self._scheduler is not None:
                self._scheduler.join()
            if self._publisher is not None:
                try:
                    self._publisher.wait()
                finally:
                    self._publisher.close()
            if self._own_subscription and self._scheduler is not None:
                pubsub.delete_subscription(self.subscription)
        if self._scheduler_error is not None:
            raise RuntimeError(f"the fleet's scheduler failed: {self._scheduler_error}") from self._scheduler_error

    def __enter__(self) -> "SimulatedFleet":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def wait_idle(self, timeout: float) -> bool:
        """Waits until no answer is scheduled, no invitation waits for its announcement, and
        every published message is stored; True if so within ``timeout`` seconds.

        It cannot know of messages Pub/Sub has not delivered yet: wait for ``counts`` to show
        the invitations first.

        Raises:
          PublishError: some published messages were not stored.
        """
        deadline = time.monotonic() + timeout
        with self._condition:
            self._condition.wait_for(
                lambda: self._idle() or self._stopping or self._scheduler_error is not None,
                timeout=timeout)
            idle, error = self._idle(), self._scheduler_error
        if error is not None:
            raise RuntimeError(f"the fleet's scheduler failed: {error}") from error
        if not idle or self._publisher is None:
            return idle
        self._publisher.wait(max(0.0, deadline - time.monotonic()))
        return True

    def _idle(self) -> bool:  # under the lock
        return not (self._heap or self._waiting or self._publishing or self._answering)

    def heard_from_all(self, job_id: str, round_index: int, invited: int, phase: Optional[int] = None) -> bool:
        """Whether the server has heard every answer the fleet will send round ``round_index`` of
        ``job_id`` before its deadline: all ``invited`` invitations received, none waiting for its
        announcement or being answered, and every answer not late by its fate (reports, second
        copies, corrupt messages) published and stored. Dropouts never answer and late devices
        answer after the close, so a round the server closes then cuts off no report it would
        have counted at its deadline. The fleet injects the faults, so only it can tell; a real
        fleet cannot.

        Once True, the round is closed for the fleet: its late devices answer ``late_margin_s``
        plus their latency from now (after the server's close), not after the announced deadline.
        Under secure aggregation the same holds per exchange (``phase``: 0 to 3, ``invited`` the
        devices asked in it).
        """
        key = (job_id, round_index) if phase is None else (job_id, round_index, phase)
        with self._condition:
            if (self._invited[key] < invited or (job_id, round_index) in self._waiting or self._answering or self._owed[key]
                    or self._publisher is None or self._publisher.pending):
                return False
            now, moved = time.monotonic(), False
            for send in self._heap:
                if send.key == key and not send.owed and send.due > now + self.options.late_margin_s:
                    send.due = now + self.options.late_margin_s + send.latency_s
                    moved = True
            if moved:
                heapq.heapify(self._heap)
                self._condition.notify_all()
        return True

    def counts(self) -> Dict[str, int]:
        """A snapshot of ``COUNTS``."""
        with self._condition:
            snapshot = {name: int(self._counts[name]) for name in COUNTS}
            snapshot["pending"] = len(self._heap) + self._publishing
            snapshot["buffered"] = sum(len(v) for v in self._waiting.values())
        return snapshot

    # ---- receiving (the pull loop's thread) ------------------------------------------------

    def _count(self, name: str, n: int = 1) -> None:
        with self._condition:
            self._counts[name] += n

    def _on_message(self, message: pubsub.PulledMessage) -> None:
        try:
            envelope = fa.read_attributes(message.attributes)
        except fa.EnvelopeError:
            self._count("bad_messages")
        else:
            if envelope.kind == fa.ANNOUNCEMENT:
                self._on_announcement(envelope, message.data)
            elif envelope.kind == fa.INVITATION:
                self._on_invitation(envelope, message.data)
            elif envelope.kind == fa.SECAGG:
                self._on_secagg(envelope, message.data)
            else:  # a report on the announce topic
                self._count("bad_messages")
        message.ack()

    def _on_announcement(self, envelope: fa.Envelope, data: bytes) -> None:
        key = (envelope.job_id, envelope.round_index)
        if key in self._rounds:
            self._count("redelivered")
            return
        try:
            announcement = read_announcement(data, f"the announcement of {key}")
        except FederatedFormatError:
            self._count("bad_messages")
            return
        if (announcement.job_id, announcement.round_index) != key:
            self._count("bad_messages")
            return
        now = time.monotonic()
        state = _Round(announcement, now + (announcement.deadline_millis / 1000.0 - time.time()), now)
        with self._condition:
            self._rounds[key] = state
            self._counts["announcements"] += 1
            waiting = self._waiting.pop(key, [])
            self._answering += len(waiting)
        for _, device_id, invitation in waiting:
            self._answer(state, device_id, invitation, now)

    def _on_invitation(self, envelope: fa.Envelope, data: bytes) -> None:
        device_id = envelope.device
        if device_id not in self.devices:
            self._count("unknown_device")
            return
        key = (envelope.job_id, envelope.round_index)
        if (key, device_id) in self._seen:
            self._count("redelivered")
            return
        self._seen.add((key, device_id))
        with self._condition:
            self._counts["invitations"] += 1
            self._invited[key] += 1
        try:
            invitation = Invitation.from_bytes(data, f"the invitation of {device_id!r}")
        except FederatedFormatError:
            self._count("refused")
            return
        with self._condition:
            state = self._rounds.get(key)
            if state is None:
                self._waiting.setdefault(key, []).append((time.monotonic(), device_id, invitation))
                self._condition.notify_all()  # the scheduler times it out
                return
            self._answering += 1
        self._answer(state, device_id, invitation, time.monotonic())

    def _on_secagg(self, envelope: fa.Envelope, data: bytes) -> None:
        device_id = envelope.device
        if device_id not in self.devices:
            self._count("unknown_device")
            return
        key = (envelope.job_id, envelope.round_index)
        try:
            request = SecAggRequest.from_bytes(data, f"the secure-aggregation request of {device_id!r}")
        except FederatedFormatError:
            self._count("refused")
            return
        phase = phase_of(request)
        if (key, device_id, phase) in self._seen:
            self._count("redelivered")
            return
        self._seen.add((key, device_id, phase))
        with self._condition:
            self._counts["secagg_requests"] += 1
            self._counts["invitations"] += phase == 0
            self._invited[key + (phase,)] += 1
            state = self._rounds.get(key)
            if state is None:
                self._waiting.setdefault(key, []).append((time.monotonic(), device_id, request))
                self._condition.notify_all()
                return
            self._answering += 1
        self._answer(state, device_id, request, time.monotonic())

    def _client(self, device_id: bytes) -> DeviceClient:
        client = self._clients.get(device_id)
        if client is None:
            client = self._clients[device_id] = DeviceClient(self.devices[device_id], device_id)
        return client

    def _answer(self, state: _Round, device_id: bytes, invitation: Union[Invitation, SecAggRequest],
                ready: float) -> None:
        """Schedules what the device the invitation was routed to sends (or counts that it never
        will); the caller counted it in ``_answering``."""
        sends: List[_Send] = []
        try:
            if isinstance(invitation, SecAggRequest):
                sends = self._secure_sends(state, device_id, invitation, ready)
            else:
                sends = self._sends(state, device_id, invitation, ready)
        finally:
            with self._condition:
                for send in sends:
                    heapq.heappush(self._heap, send)
                    self._owed[send.key] += send.owed
                self._answering -= 1
                self._condition.notify_all()

    def _sends(self, state: _Round, device_id: bytes, invitation: Invitation, ready: float) -> List[_Send]:
        """What the device sends, and when; counts a device that sends nothing."""
        announcement = state.announcement
        try:
            report = self._client(device_id).respond(announcement, invitation)
        except InvitationMismatchError:  # another job, round or device than the routing said
            self._count("refused")
            return []
        fate = device_fate(self.options, announcement.job_id, announcement.round_index, device_id)
        if fate.fate == "dropout":
            self._count("dropped")
            return []
        data = report.to_bytes()
        kinds: Tuple[str, ...] = ("reports", "abstentions") if report.abstains else ("reports",)
        due = ready + fate.latency_s
        if fate.fate == "malformed":
            data, kinds = corrupt_report(data, announcement.encoder, fate.corruption), ("malformed",)
        elif fate.fate == "late":
            due = max(ready, state.deadline_mono + self.options.late_margin_s) + fate.latency_s
            kinds += ("late",)
        attributes = fa.report_attributes(announcement.job_id, announcement.round_index)
        deadline_wall = announcement.deadline_millis / 1000.0
        key, owed = (announcement.job_id, announcement.round_index), fate.fate != "late"
        sends = [_Send(due, next(self._seq), data, attributes, kinds, deadline_wall, key, owed, fate.latency_s)]
        if fate.fate == "duplicate":
            sends.append(_Send(due + self.options.duplicate_delay_s, next(self._seq), data, attributes,
                               ("duplicates",), deadline_wall, key, owed))
        return sends

    def _secure_sends(self, state: _Round, device_id: bytes, request: SecAggRequest, ready: float) -> List[_Send]:
        """What the device answers a secure-aggregation request, and when; counts silence."""
        answer = self._secure.answer(self._client(device_id), state.announcement, device_id, request)
        if answer.data is None:
            self._count(answer.silent)
            return []
        fate, phase = answer.fate, phase_of(request)
        kinds: Tuple[str, ...] = ("malformed",) if fate.fate == "malformed" else ("reports",)
        due = ready + fate.latency_s
        deadline_wall = state.announcement.deadline_millis / 1000.0 if phase == 0 else float("inf")
        if fate.fate == "late":  # after the exchange closes: a round deadline after it opened
            opened = state.received_mono if phase == 0 else ready
            due = max(ready, opened + (state.deadline_mono - state.received_mono) + self.options.late_margin_s)
            due += fate.latency_s
            kinds += ("late",)
        attributes = fa.report_attributes(request.job_id, request.round_index)
        key, owed = (request.job_id, request.round_index, phase), fate.fate != "late"
        sends = [_Send(due, next(self._seq), answer.data, attributes, kinds, deadline_wall, key, owed, fate.latency_s)]
        if fate.fate == "duplicate":
            sends.append(_Send(due + self.options.duplicate_delay_s, next(self._seq), answer.data, attributes,
                               ("duplicates",), deadline_wall, key, owed))
        return sends

    # ---- publishing (the scheduler's thread) -----------------------------------------------

    def _expire_waiting(self, now: float) -> Optional[float]:
        """Gives up the invitations waiting too long (under the lock); returns the next expiry."""
        timeout = self.options.announcement_timeout_s
        next_expiry = None
        for key in list(self._waiting):
            kept = [entry for entry in self._waiting[key] if entry[0] + timeout > now]
            self._counts["unannounced"] += len(self._waiting[key]) - len(kept)
            if kept:
                self._waiting[key] = kept
                first = min(entry[0] for entry in kept) + timeout
                next_expiry = first if next_expiry is None else min(next_expiry, first)
            else:
                del self._waiting[key]
        return next_expiry

    def _schedule_loop(self) -> None:
        try:
            while True:
                with self._condition:
                    due: List[_Send] = []
                    while not self._stopping:
                        now = time.monotonic()
                        next_expiry = self._expire_waiting(now)
                        while self._heap and self._heap[0].due <= now:
                            due.append(heapq.heappop(self._heap))
                        if due:
                            self._publishing = len(due)
                            break
                        wakes = [t for t in (next_expiry, self._heap[0].due if self._heap else None) if t is not None]
                        if self._idle():
                            self._condition.notify_all()  # wait_idle
                        self._condition.wait(timeout=(min(wakes) - now) if wakes else None)
                    if self._stopping:
                        return
                wall = time.time()
                for send in due:
                    self._publisher.publish(self.reports_topic, send.data, send.attributes)
                with self._condition:
                    for send in due:
                        for kind in send.kinds:
                            self._counts[kind] += 1
                        self._counts["after_deadline"] += wall > send.deadline_wall
                        self._owed[send.key] -= send.owed
                    self._publishing = 0
                    if self._idle():
                        self._condition.notify_all()
        except Exception as e:  # kept for stop() and wait_idle(): a thread would only print it
            with self._condition:
                self._scheduler_error = e
                self._condition.notify_all()
