"""A federated job's progress in its ``StateStore`` state (``JobState.federated``, beside the
release's plan, nonce and ledger record): the round loop keeps it as a dict (``progress``: its
rounds' records, the estimate round's, how the job finished), and these two functions are the
symmetric conversion, so every commit is one versioned protobuf published by the manifest."""

from __future__ import annotations

from triehh_beam.proto import state_pb2, vote_pb2

__all__ = ["ESTIMATE_KEY", "progress_from_state", "progress_to_state"]

#: The progress dict's key of the committed estimate round.
ESTIMATE_KEY = "estimate"


def _round_to_proto(record: dict) -> state_pb2.FederatedRound:
    message = state_pb2.FederatedRound(
        round_index=record["round"], closed_by=record["closed_by"], close_micros=record["close_micros"],
        frontier_size=record.get("frontier_size", 0), selected=record.get("selected", record.get("invited", 0)),
        goal=record["goal"], closed_at=record["closed_at"], targets=record.get("targets", 0))
    message.labels.update(record["labels"])
    secure = record.get("secure_aggregation")
    if secure:
        message.secure_aggregation.update({k: v for k, v in secure.items() if isinstance(v, int)})
        message.secure_aggregation.update({f"dropped_{phase}": n for phase, n in secure["dropped_by_phase"].items()})
    for prefix in record.get("kept", ()):
        message.kept.append(vote_pb2.Prefix(units=[bytes.fromhex(u) for u in prefix]))
    return message


def _round_from_proto(message: state_pb2.FederatedRound) -> dict:
    record = {"round": message.round_index, "closed_by": message.closed_by, "close_micros": message.close_micros,
              "frontier_size": message.frontier_size, "kept": [[u.hex() for u in p.units] for p in message.kept],
              "selected": message.selected, "goal": message.goal, "labels": dict(message.labels),
              "closed_at": message.closed_at}
    if message.secure_aggregation:
        counts = dict(message.secure_aggregation)
        dropped = {k[len("dropped_"):]: v for k, v in counts.items() if k.startswith("dropped_")}
        record["secure_aggregation"] = {**{k: v for k, v in counts.items() if not k.startswith("dropped_")},
                                        "dropped_by_phase": dict(sorted(dropped.items()))}
    return record


def _estimates_to_proto(document: dict) -> state_pb2.FrequencyEstimates:
    """The released estimates' document (``outputs.estimates_to_json``'s) as the state records them."""
    recorded = state_pb2.FrequencyEstimates(epsilon=document["epsilon"], half_width=document["half_width"])
    for units, estimate in document["items"]:
        recorded.items.add(units=[bytes.fromhex(u) for u in units], estimate=int(estimate))
    return recorded


def _estimates_from_proto(recorded: state_pb2.FrequencyEstimates) -> dict:
    return {"epsilon": recorded.epsilon, "half_width": recorded.half_width,
            "items": [[[u.hex() for u in item.units], item.estimate] for item in recorded.items]}


def progress_to_state(progress: dict, state: state_pb2.JobState) -> None:
    """Writes ``progress`` (the round loop's dict) into ``state`` (a copy the caller commits)."""
    federated = state_pb2.FederatedProgress(registry_sha256=progress["job"]["registry_sha256"],
                                            devices=progress["job"]["devices"])
    for record in progress["rounds"]:
        federated.rounds.append(_round_to_proto(record))
    state.rounds_completed = len(progress["rounds"])
    estimate = progress.get(ESTIMATE_KEY)
    if estimate is not None:
        federated.estimate_round.CopyFrom(_round_to_proto(estimate))
        state.estimates.CopyFrom(_estimates_to_proto(estimate["released"]))
    finished = progress.get("finished")
    if finished is not None:
        state.finished, state.stop_reason = True, finished["stop_reason"]
        federated.after_last_round.update(finished["after_last_round"])
        federated.redelivered, federated.finished_at = finished["redelivered"], finished["at"]
    state.federated.CopyFrom(federated)


def progress_from_state(state: state_pb2.JobState) -> dict:
    """The round loop's dict of a committed ``state`` (``job``: the registry and the plan's
    fields a resume must find unchanged)."""
    federated, plan = state.federated, state.plan
    plan_facts = {"theta": plan.theta, "batch_size": plan.batch_size, "sample_probability": plan.sample_probability}
    progress = {"job_id": state.job_id, "created_at": state.created_at,
                "job": {"registry_sha256": federated.registry_sha256, "devices": federated.devices, **plan_facts},
                "rounds": [_round_from_proto(r) for r in federated.rounds]}
    if federated.HasField("estimate_round"):
        found = _round_from_proto(federated.estimate_round)
        record = {"round": found["round"], "closed_by": found["closed_by"], "close_micros": found["close_micros"],
                  "targets": federated.estimate_round.targets, "invited": found["selected"], "goal": found["goal"],
                  "labels": found["labels"],
                  "released": _estimates_from_proto(state.estimates),
                  "closed_at": found["closed_at"]}
        if "secure_aggregation" in found:  # an estimate round under secure aggregation: its cohorts
            record["secure_aggregation"] = found["secure_aggregation"]
        progress[ESTIMATE_KEY] = record
    if state.finished:
        progress["finished"] = {"stop_reason": state.stop_reason, "after_last_round": dict(federated.after_last_round),
                                "redelivered": federated.redelivered, "at": federated.finished_at}
    return progress

