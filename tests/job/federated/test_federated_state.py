"""``job.federated.state``: a federated job's progress (its closed rounds, estimate round and end)
written into its ``StateStore`` state and read back unchanged."""

from __future__ import annotations

from triehh_beam.job.federated import state as federated_state
from triehh_beam.job.release import outputs
from triehh_beam.job.state.state_store import StateStore
from triehh_beam.proto import state_pb2
from triehh_beam.protocol.items.encoding import ItemEncoder

ENCODER = ItemEncoder(max_length=8)


def _progress() -> dict:
    job = {"registry_sha256": "ab" * 32, "devices": 4000, "theta": 12, "batch_size": 300, "sample_probability": 0.0}
    rounds = [{"round": r, "closed_by": "deadline", "close_micros": 1_700_000_000_000_000 + r, "frontier_size": r,
               "kept": [outputs.units_to_json(ENCODER.encode("the")[:r], ENCODER)], "selected": 300, "goal": 300,
               "labels": {"voted": 200, "abstained": 40}, "closed_at": "2026-11-27T00:00:00+00:00"} for r in (1, 2)]
    estimate = {"round": 3, "closed_by": "report goal", "close_micros": 1_700_000_000_000_009, "targets": 1,
                "invited": 4000, "goal": 4000, "labels": {"counted": 1000, "abstained": 3000},
                "released": {"epsilon": 1.0, "half_width": 4,
                             "items": [[outputs.units_to_json(ENCODER.encode("the"), ENCODER), 97], [["74", "6f"], -2]]},
                "closed_at": "2026-11-27T00:01:00+00:00"}
    finished = {"stop_reason": "a round added nothing", "after_last_round": {"late": 3}, "redelivered": 2,
                "at": "2026-11-27T00:02:00+00:00"}
    return {"job_id": "federated-x", "created_at": "2026-11-26T23:59:00+00:00", "job": job, "rounds": rounds,
            "estimate": estimate, "finished": finished}


def test_the_progress_round_trips_through_a_committed_state(tmp_path):
    progress = _progress()
    state = state_pb2.JobState(job_id="federated-x", created_at=progress["created_at"],
                               plan=state_pb2.PrivacyPlan(theta=12, batch_size=300), release_nonce=bytes(16))
    federated_state.progress_to_state(progress, state)
    store = StateStore(str(tmp_path / "release"))
    store.commit(state)
    read = StateStore(str(tmp_path / "release")).load()
    assert read.rounds_completed == 2 and read.finished and read.release_nonce == bytes(16)
    assert federated_state.progress_from_state(read) == progress


def test_a_secure_round_s_cohort_counts_round_trip(tmp_path):
    progress = _progress()
    progress["rounds"][1]["secure_aggregation"] = {
        "cohorts": 3, "unmasked": 2, "devices_in_dropped_cohorts": 100, "devices_summed": 170,
        "dropped_by_phase": {"masked": 1}}
    state = state_pb2.JobState(job_id="federated-x", created_at=progress["created_at"],
                               plan=state_pb2.PrivacyPlan(theta=12, batch_size=300))
    federated_state.progress_to_state(progress, state)
    assert federated_state.progress_from_state(state) == progress
    assert dict(state.federated.rounds[1].secure_aggregation)["dropped_masked"] == 1


def test_a_state_without_an_estimate_round_or_end_has_neither(tmp_path):
    progress = _progress()
    del progress["estimate"], progress["finished"]
    state = state_pb2.JobState(job_id="federated-x", created_at=progress["created_at"],
                               plan=state_pb2.PrivacyPlan(theta=12, batch_size=300))
    federated_state.progress_to_state(progress, state)
    assert federated_state.progress_from_state(state) == progress
