"""What a federated job publishes and records: its trust model (what the guarantee assumes of
devices, what the server sees) and the guarantee under dropouts (in ``heavy_hitters.json``'s
``federated`` section; with frequency estimates, what they estimate when devices do not report), the finished state the outputs are written from (plan, rounds,
trie, the released estimates; never a count), and the private label totals over a whole job
(the operator report and the fleet simulator's summary). Used by ``job.federated.serve``."""

from __future__ import annotations

from typing import Dict, List, Optional

from triehh_beam.job.settings.config import DiscoveryConfig
from triehh_beam.job.state.clock import now_iso
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.federated.tally import ESTIMATE_KINDS, KINDS
from triehh_beam.protocol.protocols import Protocol
from triehh_beam.protocol.rounds.trie import Trie
from triehh_beam.protocol.secagg.round import KINDS as SECURE_KINDS

__all__ = ["DEVICE_ASSUMPTION", "SECURE_MAJORITY", "SECURE_MINORITY", "SERVER_SEES_SECURE", "TRUST_MODEL", "TRUST_MODEL_SECURE", "ESTIMATES_WITH_DROPOUTS", "ROUND_CLOSE", "SERVER_SEES", "SERVER_SEES_ESTIMATES",
           "console_guarantee", "dropout_guarantee", "label_totals", "published_section", "state_for_outputs"]

#: The published statement of what federated frequency estimates estimate.
ESTIMATES_WITH_DROPOUTS = (
    "The frequency estimates count the devices that reported in the estimate round, after the last "
    "vote round: every enrolled device was invited, and one that did not report before the round "
    "closed contributes nothing. They are estimates of the reporting devices, biased low by the "
    "fraction that did not report (with no dropout: every device, as discover counts every user). "
    "Their guarantee does not depend on who reported: each device adds at most one to one count "
    "(sensitivity 1), so the geometric noise gives epsilon_est whatever the dropouts."
)


#: The published trust model: what the guarantee assumes of devices.
DEVICE_ASSUMPTION = (
    "The guarantee assumes honest, non-colluding devices, and one enrolled device per person. A "
    "selected device learns that it was selected (its invitation), so devices that collude can "
    "defeat the threshold: theta - 1 of them selected together and voting for a target prefix make "
    "its release depend on one other device's vote. With more than one device per person the "
    "guarantee is per device, not per person (a person's k devices are k users)."
)

#: The privacy block's trust model (``outputs.published_plan_document``) of a federated release.
TRUST_MODEL = "federated: " + DEVICE_ASSUMPTION[0].lower() + DEVICE_ASSUMPTION[1:]

#: The published statement of what the server sees (central DP: it is trusted with it).
SERVER_SEES = (
    "The server sees, per round, each selected device's report (its vote or abstention) linked to "
    "the token it issued that device, so it knows which device chose which prefix, as a "
    "central server knows each user's records; it keeps the reports only until they are counted. "
    "What is published (the trie) is the only output the (epsilon, delta) guarantee covers."
)

#: What the server sees under secure aggregation (``--secure-aggregation``).
SERVER_SEES_SECURE = (
    "Secure aggregation (Bonawitz et al. 2017, the semi-honest protocol with dropout recovery, within "
    "each cohort of a round's selected devices): the server sees, per round and cohort, only the sum of "
    "the one-hot votes of the cohort's devices that finished, at least the cohort's threshold of them "
    "(never fewer than the minimum cohort size), hence counts below theta and which "
    "devices took part, but never one device's vote and no link of a vote to a token: from each device "
    "it receives only public keys, shares encrypted to other devices, a masked vector and unmasking "
    "shares. This holds against a server that follows the protocol, even with up to threshold - 1 "
    "devices of a cohort colluding with it. A cohort that falls below its threshold at any exchange is "
    "dropped whole: its votes are lost, never unmasked."
)

#: What a majority threshold adds (``--cohort-threshold`` above 1/2), and what it does not.
SECURE_MAJORITY = (
    "The threshold is a majority of each cohort, so a server that deviates (lies about who dropped out) "
    "still cannot recover both masks of an honest device (each device reveals one kind of share per "
    "peer), unless it also controls devices it enrolled itself (Sybils): devices are not authenticated "
    "to one another here."
)

#: What a threshold of at most half a cohort leaves open.
SECURE_MINORITY = (
    "The threshold is at most half of each cohort: a server that deviates (tells some devices that a "
    "device dropped out and others that it did not) could recover both of its masks and so its vote; "
    "devices trust the server to follow the protocol."
)

#: The privacy block's trust model of a release whose rounds ran under secure aggregation.
TRUST_MODEL_SECURE = TRUST_MODEL + " The server saw only per-cohort sums of votes (secure aggregation)."

#: What the estimate round adds to what the server sees.
SERVER_SEES_ESTIMATES = (
    "In the estimate round every enrolled device is invited, and the server sees each reporting "
    "device's chosen leaf (the heavy hitter or frequent prefix its records choose) linked to its "
    "token, and so to the device: exact, before any noise. Only the published estimates carry the "
    "geometric noise (epsilon_est)."
)

#: What the estimate round adds under secure aggregation.
SERVER_SEES_SECURE_ESTIMATES = (
    "In the estimate round every enrolled device is invited, in cohorts as in a round, and the server "
    "sees only each cohort's sum of the one-hot vectors of the leaves its devices chose (or abstain), "
    "exact, never one device's choice. Only the published estimates carry the geometric noise "
    "(epsilon_est)."
)

#: What the estimates count under secure aggregation, after ``ESTIMATES_WITH_DROPOUTS``.
SECURE_ESTIMATES_WITH_DROPOUTS = (
    "Under secure aggregation a device is counted when its cohort was unmasked and it sent its masked "
    "vector; a cohort below its threshold at any exchange is dropped whole (counted in the operator "
    "report), never summed in part."
)

#: How rounds close while a guarantee is claimed (``job.federated.serve``: a report goal below 1 is refused).
ROUND_CLOSE = (
    "A round closes at its deadline, or as soon as every selected device has reported: never at a "
    "fraction of them, since one device's early report would then cut off another's vote (one user "
    "changing two counts)."
)


def dropout_guarantee(config: DiscoveryConfig) -> str:
    """The published statement of what holds when selected devices do not report."""
    selection = ("each enrolled device independently with probability p_s per round"
                 if config.protocol is Protocol.TRIEHH_PP else "m of the n enrolled devices per round")
    return (
        "With honest, non-colluding devices (see trust_model), the (epsilon, delta) guarantee holds "
        "whatever fraction of the selected devices report. It comes "
        f"from the selection, which the server draws at random (keyed by its secret seed) before any "
        f"device answers, {selection}, and from the threshold: a selected device that does not report "
        "is, for the analysis, a device with nothing to vote for, a case it covers. Dropouts lower the "
        "number of votes, and so what can be discovered, never the privacy. Assumed: whether a device "
        "reports does not depend on other devices' data, and who was selected (the invitations and "
        "their tokens) stays within the server's trust boundary, as the seed does. " + ROUND_CLOSE
    )


def console_guarantee(estimated: bool = False, secure: bool = False) -> str:
    """The guarantee's one line for ``serve``'s and ``simulate``'s console."""
    seen = ("each selected device's vote, and in the estimate round each reporting device's chosen leaf, "
            "linked to its token" if estimated else "each selected device's vote linked to its token")
    if secure:
        seen = ("only each cohort's sum of votes" + (" and of chosen leaves" if estimated else "")
                + " (secure aggregation), never one device's vote")
    return ("guarantee: (epsilon, delta) on what is published, assuming honest, non-colluding devices and "
            f"one enrolled device per person; the server saw {seen} (heavy_hitters.json: federated)")


def state_for_outputs(config: DiscoveryConfig, job_id: str, plan: state_pb2.PrivacyPlan, trie: Trie, records: List[dict],
                      stop_reason: str, estimates: Optional[state_pb2.FrequencyEstimates] = None) -> state_pb2.JobState:
    """The finished job's state as the outputs read it: its plan, rounds, trie and released
    (noisy) estimates (no count)."""
    state = state_pb2.JobState(job_id=job_id, created_at=now_iso(), input=config.input_spec(),
                               truncate_long_items=config.truncate_long_items, plan=plan,
                               stop_reason=stop_reason, finished=True)
    for record in records:
        state.rounds.add(round_index=record["round"], frontier_size=record["frontier_size"],
                         prefixes_kept=len(record["kept"]))
    state.trie.CopyFrom(trie.to_proto())
    if estimates is not None:
        state.estimates.CopyFrom(estimates)
    return state


def published_section(config: DiscoveryConfig, estimated: bool = False, secure=None) -> dict:
    """What ``heavy_hitters.json`` adds for a federated job (how rounds closed, and every count,
    stay in the operator report); ``estimated``: the job released frequency estimates;
    ``secure``: the ``SecureAggregation`` its rounds ran under, or None."""
    if secure is not None:
        section = {
            "mode": ("federated with secure aggregation: devices kept their records; each round the server "
                     "learned only each cohort's sum of one-hot votes"
                     + (" (in the estimate round, of chosen leaves)" if estimated else "")
                     + "; the guarantee assumes honest, non-colluding devices, one per person"),
            "trust_model": DEVICE_ASSUMPTION,
            "server_sees": SERVER_SEES_SECURE + " " + (
                SECURE_MAJORITY if secure.policy.majority else SECURE_MINORITY)
            + (" " + SERVER_SEES_SECURE_ESTIMATES if estimated else ""),
            "cohorts": {"max_size": secure.policy.max_size, "min_size": secure.policy.min_size,
                        "threshold_fraction": round(secure.policy.fraction, 6), "alphabet": secure.alphabet},
            "guarantee_with_dropouts": dropout_guarantee(config) + (
                " Under secure aggregation a device that drops out of a later exchange is either still in "
                "its cohort's sum (it sent its masked vote) or not; a cohort below its threshold is dropped "
                "whole, which like any dropout lowers the votes, never the privacy."),
        }
    else:
        section = {
            "mode": ("federated: devices kept their records and sent one vote (or an abstention) per round, "
                     "which the server saw linked to the device's token"
                     + ("; in the estimate round, each reporting device's chosen leaf, linked to its token"
                        if estimated else "")
                     + "; the guarantee assumes honest, non-colluding devices, one per person"),
            "trust_model": DEVICE_ASSUMPTION,
            "server_sees": SERVER_SEES + (" " + SERVER_SEES_ESTIMATES if estimated else ""),
            "guarantee_with_dropouts": dropout_guarantee(config),
        }
    if estimated:
        section["estimates_with_dropouts"] = ESTIMATES_WITH_DROPOUTS + (
            "" if secure is None else " " + SECURE_ESTIMATES_WITH_DROPOUTS)
    return section


def label_totals(result) -> Dict[str, int]:
    """Every label's count over the whole job (private): rounds, the estimate round (its own
    labels ``counted`` and ``off_target`` beside the rounds') and the drain after them."""
    totals = {kind: 0 for kind in KINDS + ESTIMATE_KINDS + SECURE_KINDS}
    for record in result.rounds + ([result.estimate] if result.estimate else []):
        for kind, n in record["labels"].items():
            totals[kind] += n
    for kind, n in result.after_last_round.items():
        totals[kind] += n
    return totals
