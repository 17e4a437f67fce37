"""The federated job's estimate round (``--estimate-frequencies``): after the last vote round
the released trie's leaves are announced to every enrolled device, each reports the leaf its
records choose or abstains, and the round closes like a vote round
(``FederatedServer.close_round``); the first report of each issued token is counted and the
counts released once with the central estimate's keyed noise (with no fault, equal to
``discover --estimate-frequencies``' on the same records and keys). Devices that do not report
contribute nothing (the estimates are of the reporting devices; the guarantee is unchanged).
The round's record is committed like a round's, so a crash re-announces it with the same
deadline, or publishes the committed estimates. Under secure aggregation the devices' choices
are summed per cohort (``job.federated.secagg.run_secure_estimates``), the server never sees
one, and a crash during the round is not resumed (it would unmask the same choices twice).
"""

from __future__ import annotations

import json
import math
import time
from typing import List, Optional, Tuple

from triehh_beam.io.pubsub import federated_attributes as attributes
from triehh_beam.job.federated import state as federated_state
from triehh_beam.job.federated.log import LoggedMessage, ReportLog
from triehh_beam.job.federated.secagg import run_secure_estimates
from triehh_beam.job.federated.server import FederatedServer
from triehh_beam.job.release import outputs
from triehh_beam.job.state.clock import now_iso
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.estimates.frequency_estimates import (LEVEL, EstimateKeys, EstimateTargets,
                                                                release)
from triehh_beam.protocol.federated.estimate import EstimateAnnouncement, estimate_invitations
from triehh_beam.protocol.federated.messages import Invitation
from triehh_beam.protocol.federated.tally import EstimateTally
from triehh_beam.protocol.randomness.discrete_laplace import TwoSidedGeometric
from triehh_beam.protocol.rounds.trie import Trie

__all__ = ["ESTIMATE_KEY", "run_estimate_round"]

#: The progress's key of the committed estimate round (``job.federated.state``).
ESTIMATE_KEY = federated_state.ESTIMATE_KEY


def _announce(server: FederatedServer, announcement_of, invited, invite: bool = True) -> Tuple[int, int]:
    """Publishes the estimate announcement and (``invite``) every device's invitation; returns
    (deadline, goal). The deadline is recorded before the first publication, so a resumed round
    keeps it."""
    r = invited.round_index
    goal = math.ceil(server.source.report_goal * len(invited))
    path = server.path("estimate", "announced.json")
    announced = outputs.read_json(path)
    if announced is None:
        announced = {"round": r, "deadline_millis": int(time.time() * 1000) + int(server.source.round_deadline * 1000),
                     "invited": len(invited), "goal": goal}
        outputs.write_json(path, announced, private=True)
    deadline = announced["deadline_millis"]
    public_goal = goal if outputs.population_is_public(server.plan) else 0
    announcement = announcement_of(deadline, public_goal)
    server.publish(server.source.announce_topic,
                   [(announcement.to_bytes(), attributes.announcement_attributes(server.job_id, r))])
    if not invite:  # secure aggregation: each invitation travels inside its device's setup
        return deadline, goal
    server.publish(server.source.announce_topic, [
        (Invitation(server.job_id, r, device, token, int(word), estimate=True).to_bytes(),
         attributes.invitation_attributes(server.job_id, r, device))
        for device, token, word in zip(invited.device_ids, invited.tokens, invited.choice_words)])
    return deadline, goal


def _empty(epsilon: float) -> state_pb2.FrequencyEstimates:
    return state_pb2.FrequencyEstimates(epsilon=epsilon, half_width=TwoSidedGeometric(epsilon).half_width(LEVEL))


def run_estimate_round(server: FederatedServer, trie: Trie, log: ReportLog, pool: List[LoggedMessage],
                       rounds_run: int) -> Tuple[Optional[state_pb2.FrequencyEstimates], List[LoggedMessage]]:
    """The estimate round after ``rounds_run`` vote rounds (or its committed record, on a
    resume); returns the released estimates as the state records them (None without
    ``--estimate-frequencies``) and the messages published after the round closed.

    A trie without leaves releases nothing and announces nothing.
    """
    epsilon = server.plan.estimate_epsilon
    if not epsilon:
        return None, pool
    committed = server.progress_doc.get(ESTIMATE_KEY)
    if committed is not None:
        return _recorded(committed["released"], server), [m for m in pool if m.time_micros > committed["close_micros"]]
    targets = EstimateTargets.from_trie(trie)
    if not len(targets):
        server.progress("estimates: the trie has no leaf; nothing to estimate")
        return _empty(epsilon), pool
    r = rounds_run + 1
    invited = estimate_invitations(server.sampler, server.source.registry, r)
    too_long = "truncate" if server.config.truncate_long_items else "drop"

    def announcement_of(deadline: int, goal: int) -> EstimateAnnouncement:
        return EstimateAnnouncement(server.job_id, r, server.encoder, targets, deadline, goal, too_long)

    if server.source.secure is not None:
        return _secure_round(server, r, targets, invited, lambda: _announce(server, announcement_of, invited, False),
                             log, pool, epsilon)
    deadline, goal = _announce(server, announcement_of, invited)
    server.progress(f"estimates: announced {len(targets):,} targets to every enrolled device (round {r}); "
                    f"{server.waits_for(deadline, 'enrolled')}")
    tally = EstimateTally(server.job_id, r, server.encoder, targets, invited.token_set())
    close, closed_by, rest = server.close_round(r, invited.token_set(), tally, log, pool, deadline, goal)
    released = tally.release(epsilon, EstimateKeys.derive(server.sampler.seed, server.sampler.identity))
    document = json.loads(outputs.estimates_to_json(released, server.encoder))
    server.progress_doc[ESTIMATE_KEY] = {
        "round": r, "closed_by": closed_by, "close_micros": close, "targets": len(targets),
        "invited": len(invited), "goal": goal, "labels": tally.label_counts(), "released": document,
        "closed_at": now_iso()}
    server.commit()  # the released estimates, committed before anything is published
    server.progress(f"estimates: closed ({closed_by})" + ("" if tally.reported else
                    "; no device reported: check that the announce topic's messages reach the devices"))
    return _recorded(document, server), rest


def _secure_round(server: FederatedServer, r: int, targets: EstimateTargets, invited, announce, log: ReportLog,
                  pool: List[LoggedMessage], epsilon: float):
    """The estimate round under secure aggregation: the counts are each cohort's sum, released
    with the same keyed noise as a plain round's tally (equal counts, equal estimates)."""
    counts, record, rest = run_secure_estimates(server, r, targets, invited, announce, log, pool)
    released = release(counts, targets, epsilon, EstimateKeys.derive(server.sampler.seed, server.sampler.identity))
    document = json.loads(outputs.estimates_to_json(released, server.encoder))
    reported = record.pop("reported", 0)
    server.progress_doc[ESTIMATE_KEY] = {"round": r, **record, "targets": len(targets), "invited": len(invited),
                                         "released": document, "closed_at": now_iso()}
    server.commit()  # the released estimates, committed before anything is published
    server.progress(f"estimates: closed ({record['closed_by']})" + ("" if reported else
                    "; no device reported: check that the announce topic's messages reach the devices"))
    return _recorded(document, server), rest


def _recorded(document: dict, server: FederatedServer) -> state_pb2.FrequencyEstimates:
    return outputs.estimates_from_json(json.dumps(document).encode(), server.encoder)

