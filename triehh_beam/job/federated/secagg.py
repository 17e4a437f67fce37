"""A federated job's rounds under secure aggregation (``--secure-aggregation``): each round's
selected devices are split into cohorts (``protocol.secagg.round.SecureRound``), and in place of
invitations and one report per device the server runs four exchanges over the same topics
(setup -> keys, roster -> shares, inbox -> masked, survivors -> unmask), each closing once every
device asked has answered or ``round_deadline`` after it opened; then it keeps the candidates
whose summed count reaches theta, exactly as a plain round does. The server sees masked vectors
and shares, never a device's vote."""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

from triehh_beam.io.pubsub import federated_attributes as attributes
from triehh_beam.job.federated.log import LoggedMessage, ReportLog, count_until
from triehh_beam.job.release import outputs
from triehh_beam.job.state.clock import now_millis
from triehh_beam.protocol.estimates.frequency_estimates import EstimateTargets
from triehh_beam.protocol.federated.messages import FederatedFormatError, Invitation
from triehh_beam.protocol.items.encoding import ItemEncoder, ItemKind
from triehh_beam.protocol.rounds import loop as rounds
from triehh_beam.protocol.secagg.cohorts import CohortPolicy, TooFewDevicesError
from triehh_beam.protocol.secagg.messages import SecAggReport
from triehh_beam.protocol.secagg.round import KINDS, SecureRound
from triehh_beam.protocol.secagg.server import Phase
from triehh_beam.protocol.secagg.vectors import CandidateSlots, round_candidates

__all__ = ["DEFAULT_ALPHABET", "KINDS", "SecureAggregation", "is_secagg_report", "refuse_rerun", "run_secure_estimates",
           "run_secure_round"]

#: The characters a unit may be unless ``--secure-alphabet`` says otherwise.
DEFAULT_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_REPORT_OF = {Phase.KEYS: "keys", Phase.SHARES: "shares", Phase.MASKED: "masked", Phase.UNMASK: "unmask"}


@dataclasses.dataclass(frozen=True)
class SecureAggregation:
    """How a job's rounds are aggregated securely.

    Attributes:
      policy: the cohorts' sizes and thresholds.
      alphabet: the characters that extend a frontier prefix into a candidate (besides the end
        marker); a vote for any other extension counts in the ``other`` slot, never kept.
    """

    policy: CohortPolicy = CohortPolicy()
    alphabet: str = DEFAULT_ALPHABET

    def __post_init__(self):
        if not isinstance(self.alphabet, str) or not self.alphabet or len(set(self.alphabet)) != len(self.alphabet):
            raise ValueError(f"--secure-alphabet must be distinct characters, got {self.alphabet!r}")

    def check(self, encoder: ItemEncoder) -> None:
        """Refuses a job secure aggregation does not cover yet.

        Raises:
          ValueError: items that are not text of one-character units, or an alphabet character
            the encoding cannot hold.
        """
        if encoder.kind is not ItemKind.TEXT or encoder.unit_size != 1:
            raise ValueError("--secure-aggregation needs text items of one-character units (the candidates are "
                             "the frontier extended by --secure-alphabet): not built for other encodings")
        for unit in self.alphabet:
            problem = encoder.prefix_problem((unit,))
            if problem or encoder.normalize(unit) != unit:
                raise ValueError(f"--secure-alphabet character {unit!r} is not a unit of this encoding "
                                 f"({problem or 'not normalised'})")

    def check_selection(self, expected: float) -> None:
        """Refuses a plan that selects fewer devices per round than one cohort's minimum.

        Raises:
          ValueError: ``expected`` (m, or n * p_s) below ``--cohort-minimum``.
        """
        if expected < self.policy.min_size:
            raise ValueError(f"the plan selects {expected:,.1f} devices per round, fewer than one cohort's minimum "
                             f"(--cohort-minimum {self.policy.min_size}): no round could be aggregated securely")

    def round(self, job_id: str, step: rounds.NextRound, tokens, encoder: ItemEncoder) -> SecureRound:
        slots = round_candidates(step.frontier, list(self.alphabet), encoder.eos)
        return SecureRound(job_id, step.index, tokens, self.policy, slots,
                           tuple(u.encode("utf-8") for u in self.alphabet))


def is_secagg_report(data: bytes, job_id: str) -> bool:
    """Whether ``data`` is a well-formed secure-aggregation report of job ``job_id``."""
    try:
        return SecAggReport.from_bytes(data).job_id == job_id
    except FederatedFormatError:
        return False


def _first_reports(pool: List[LoggedMessage], cache: Dict[str, Optional[SecAggReport]], job_id: str, r: int,
                   phase: Phase, asked: frozenset, deadline_micros: int) -> Dict[bytes, int]:
    """token -> publish time of its first report of ``phase`` (by the deadline)."""
    firsts: Dict[bytes, int] = {}
    for message in pool:
        if message.message_id not in cache:
            try:
                cache[message.message_id] = SecAggReport.from_bytes(message.data)
            except FederatedFormatError:
                cache[message.message_id] = None
        report = cache[message.message_id]
        if (report is None or report.job_id != job_id or report.round_index != r or report.token not in asked
                or type(report.phase).__name__.lower() != _REPORT_OF[phase] or message.time_micros > deadline_micros):
            continue
        firsts[report.token] = min(firsts.get(report.token, message.time_micros), message.time_micros)
    return firsts


def _close_phase(server, secure: SecureRound, phase: Phase, asked: frozenset, log: ReportLog,
                 pool: List[LoggedMessage], deadline_millis: int) -> Tuple[int, str, List[LoggedMessage]]:
    """Waits for the phase's reports; labels those published by its close; returns (close time,
    why, the messages published after it)."""
    deadline = deadline_millis * 1000
    cache: Dict[str, Optional[SecAggReport]] = {}
    heard, heard_at = server.source.heard_from_all, []
    r = secure.round_index

    def closed() -> bool:
        firsts = _first_reports(pool, cache, server.job_id, r, phase, asked, deadline)
        if len(firsts) >= len(asked) or now_millis() * 1000 >= deadline:
            return True
        if heard is not None and heard(server.job_id, r, len(asked), phase=int(phase)):
            heard_at.append(now_millis() * 1000)
            return True
        return False

    def everyone() -> bool:  # every device asked answered: no later message can be counted
        return len(_first_reports(pool, cache, server.job_id, r, phase, asked, deadline)) >= len(asked)

    server._wait_for(log, pool, closed, complete=everyone)
    firsts = _first_reports(pool, cache, server.job_id, r, phase, asked, deadline)
    if asked and len(firsts) >= len(asked):
        close, why = max(firsts.values()), "every device asked answered"
    elif heard_at and heard_at[0] < deadline:
        close, why = heard_at[0], "every answer the simulated fleet sends in time"
    else:
        close, why = deadline, "deadline" if asked else "no device asked"
    return close, why, count_until(pool, close, secure.add)


def _exchanges(server, secure: SecureRound, requests: List[Tuple[bytes, bytes]], device_of: Dict[bytes, bytes],
               deadline: int, log: ReportLog, pool: List[LoggedMessage]) -> Tuple[List[dict], int, int, List]:
    """The four exchanges of ``secure``, from its setups ``requests`` (the first closing at
    ``deadline``, each later one ``round_deadline`` after it opened); returns each exchange's
    record, how many devices answered the setup, the last close time and the messages after it."""
    r = secure.round_index
    phases, reported, close = [], 0, 0
    for phase in Phase:
        server.publish(server.source.announce_topic,
                       [(data, attributes.secagg_attributes(server.job_id, r, device_of[token]))
                        for token, data in requests])
        asked = frozenset(token for token, _ in requests)
        before = secure.kinds["counted"]
        close, why, pool = _close_phase(server, secure, phase, asked, log, pool, deadline)
        answered = secure.kinds["counted"] - before
        reported = reported or answered
        requests = secure.close_phase()
        phases.append({"phase": _REPORT_OF[phase], "asked": len(asked), "answered": answered, "closed_by": why})
        deadline = now_millis() + int(server.source.round_deadline * 1000)
    return phases, reported, close, pool


def refuse_rerun(server, what: str, announced_path: str) -> None:
    """Refuses to re-run ``what`` (a round, the estimate round) once it was announced under
    secure aggregation.

    Raises:
      ValueError: it was announced before this run (a restart mid-round: re-running it would
        unmask a second sum of the same inputs over another set of devices, whose difference
        could single one out; not resumable).
    """
    if outputs.read_json(announced_path) is not None:
        raise ValueError(f"{what} of {server.job_id} was announced under secure aggregation before this run "
                         "stopped: re-running it would unmask the same votes twice over different devices, so it "
                         "is not resumable; start a new job (another --output or --state-dir)")


def run_secure_estimates(server, r: int, targets: EstimateTargets, invited, announce: Callable[[], Tuple[int, int]],
                         log: ReportLog, pool: List[LoggedMessage]) -> Tuple[List[int], dict, List[LoggedMessage]]:
    """The estimate round ``r`` under secure aggregation: every enrolled device (``invited``)
    in cohorts, each masking the one-hot vector of the target its records choose (or
    ``abstain``) over the targets; ``announce()`` publishes the announcement alone and returns
    (deadline, goal). Returns the exact count of each target in ``targets``' order (private:
    only their noisy release leaves the server), the round's record and the messages after its
    last close."""
    refuse_rerun(server, "the estimate round", server.path("estimate", "announced.json"))
    slots = CandidateSlots(tuple(targets.sequences))
    try:
        secure = SecureRound(server.job_id, r, invited.tokens, server.source.secure.policy, slots)
    except TooFewDevicesError:
        server.progress(f"estimates: fewer enrolled devices than one cohort's minimum "
                        f"({server.source.secure.policy.min_size}): nothing announced; every count is 0")
        return [0] * len(targets), {"closed_by": "fewer enrolled devices than one cohort", "goal": 0,
                                    "close_micros": now_millis() * 1000, "labels": {k: 0 for k in KINDS}}, pool
    deadline, goal = announce()
    device_of = dict(zip(invited.tokens, invited.device_ids))
    invitations = {token: Invitation(server.job_id, r, device, token, int(word), estimate=True).to_bytes()
                   for device, token, word in zip(invited.device_ids, invited.tokens, invited.choice_words)}
    server.progress(f"estimates: announced {len(targets):,} targets to every enrolled device's cohort (round {r}); "
                    f"{server.waits_for(deadline, 'enrolled')} (then three more exchanges)")
    phases, reported, close, pool = _exchanges(server, secure, secure.setups(invitations), device_of, deadline, log,
                                               pool)
    counts = slots.counts(secure.total())
    summary = secure.summary()
    record = {"closed_by": phases[-1]["closed_by"], "close_micros": close, "goal": goal,
              "labels": summary.pop("labels"), "reported": reported, "secure_aggregation": {**summary, "phases": phases}}
    return [counts.get(tuple(t), 0) for t in targets.sequences], record, pool


def run_secure_round(server, step: rounds.NextRound, selection, log: ReportLog,
                     pool: List[LoggedMessage]) -> Tuple[List, dict, List[LoggedMessage], int]:
    """Round ``step.index`` of ``server`` (a ``FederatedServer``) under secure aggregation.

    Returns the kept prefixes, the round's record (private), the messages published after its
    last close, and how many devices answered the setup.

    Raises:
      ValueError: the round was announced before this run (a restart mid-round: re-running it
        would unmask a second sum of the same votes over another set of devices, whose
        difference could single one out; not resumable).
    """
    r, secure_options = step.index, server.source.secure
    refuse_rerun(server, f"round {r}", server.path(f"round={r:03d}", "announced.json"))
    try:
        secure = secure_options.round(server.job_id, step, selection.tokens, server.encoder)
    except TooFewDevicesError:  # TrieHH++'s Bernoulli selection fell below one cohort: nothing to sum
        # (How many were selected is private under TrieHH++'s Bernoulli selection: the state has it.)
        server.progress(f"round {r}: fewer devices selected than one cohort's minimum "
                        f"({secure_options.policy.min_size}): nothing announced, nothing kept")
        record = {"round": r, "closed_by": "fewer selected devices than one cohort", "close_micros": now_millis() * 1000,
                  "frontier_size": len(step.frontier), "kept": [], "selected": len(selection), "goal": 0,
                  "labels": {k: 0 for k in KINDS},
                  "secure_aggregation": {"cohorts": 0, "unmasked": 0, "dropped_by_phase": {},
                                         "devices_in_dropped_cohorts": len(selection), "devices_summed": 0}}
        return [], record, pool, len(selection)
    deadline, goal = server.announce(step, selection, invite=False)
    device_of = dict(zip(selection.tokens, selection.device_ids))
    invitations = {token: Invitation(server.job_id, r, device, token, int(word)).to_bytes()
                   for device, token, word in zip(selection.device_ids, selection.tokens, selection.choice_words)}
    requests = secure.setups(invitations)
    # Not how many cohorts: that bounds how many devices were selected, which is private.
    server.progress(f"round {r}: announced the frontier ({len(step.frontier):,} prefixes) to the selected devices' "
                    f"cohorts; {server.waits_for(deadline, 'selected')} (then three more exchanges)")
    phases, reported, close, pool = _exchanges(server, secure, requests, device_of, deadline, log, pool)
    summary = secure.summary()
    kept = secure.kept(server.plan.theta)
    record = {"round": r, "closed_by": phases[-1]["closed_by"], "close_micros": close,
              "frontier_size": len(step.frontier), "kept": [outputs.units_to_json(p, server.encoder) for p in kept],
              "selected": len(selection), "goal": goal, "labels": summary.pop("labels"),
              "secure_aggregation": {**summary, "phases": phases}}
    return kept, record, pool, reported
