"""The append-only record log: order kept, appends idempotent by record id, corrupt logs refused
by name, no record lost by racing appenders, a precondition checked in the same compare-and-swap
as the append (no overspent budget), and retries bounded and safe when a response is lost."""

from __future__ import annotations

import json

import pytest

from tests.gcs_emulators import (  # noqa: F401 (fixtures)
    fake_gcs_bucket,
    fake_gcs_server,
)
from tests.job.cas_harness import (  # noqa: F401 (fixtures)
    process_context,
    spec,
    store,
    AlwaysContended,
    BudgetExhausted,
    LostResponses,
    appender,
    budgeted_appender,
    run_processes,
    winners_of,
)
from triehh_beam.job.state.cas import CasError, ContentionError
from triehh_beam.job.state.record_log import append_record, read_records


def test_append_record_keeps_order_and_does_not_touch_the_record(store):
    record = {"job": "a", "epsilon": 1.5}
    ids = [append_record(store, "ledger.jsonl", record), append_record(store, "ledger.jsonl", {"job": "b"})]
    assert record == {"job": "a", "epsilon": 1.5}
    records = read_records(store, "ledger.jsonl")
    assert records == [
        {"job": "a", "epsilon": 1.5, "record_id": ids[0]},
        {"job": "b", "record_id": ids[1]},
    ]
    raw = store.read("ledger.jsonl").data.decode()
    assert [json.loads(line) for line in raw.splitlines()] == records


def test_append_with_a_known_record_id_is_idempotent(store):
    for _ in range(3):  # e.g. a job re-run after a crash records its spend once
        assert append_record(store, "ledger.jsonl", {"record_id": "job-7", "epsilon": 1.0}) == "job-7"
    append_record(store, "ledger.jsonl", {"record_id": "job-8", "epsilon": 1.0})
    assert [r["record_id"] for r in read_records(store, "ledger.jsonl")] == ["job-7", "job-8"]


def test_read_records_of_a_missing_log_is_empty(store):
    assert read_records(store, "ledger.jsonl") == []


def test_a_corrupt_log_is_refused_with_its_name(store):
    store.create("ledger.jsonl", b'{"ok": 1}\nnot json\n')
    with pytest.raises(CasError, match="ledger.jsonl.*line 2"):
        read_records(store, "ledger.jsonl")
    with pytest.raises(CasError, match="ledger.jsonl"):
        append_record(store, "ledger.jsonl", {"x": 1})


def test_append_record_refuses_what_json_cannot_hold(store):
    with pytest.raises(TypeError):
        append_record(store, "ledger.jsonl", {"x": object()})
    with pytest.raises(ValueError):
        append_record(store, "ledger.jsonl", {"x": float("nan")})
    assert store.read("ledger.jsonl") is None


def test_concurrent_appends_lose_no_record(process_context, spec, store):
    writers, per_writer = 4, 25
    collected = run_processes(process_context, appender, [(spec, w, per_writer) for w in range(writers)])
    assert sorted(winners_of(collected)) == list(range(writers))
    records = read_records(store, "ledger/spend.jsonl")
    assert len(records) == writers * per_writer
    assert sorted((r["writer"], r["i"]) for r in records) == [
        (w, i) for w in range(writers) for i in range(per_writer)
    ]
    assert len({r["record_id"] for r in records}) == writers * per_writer
    for w in range(writers):  # each writer's records in its own order
        assert [r["i"] for r in records if r["writer"] == w] == list(range(per_writer))


def test_a_precondition_sees_the_records_and_can_refuse(store):
    seen = []
    append_record(store, "ledger.jsonl", {"record_id": "a"}, precondition=seen.append)
    append_record(store, "ledger.jsonl", {"record_id": "b"}, precondition=seen.append)
    assert [[r["record_id"] for r in records] for records in seen] == [[], ["a"]]

    def refuse(records):
        raise BudgetExhausted(len(records))

    with pytest.raises(BudgetExhausted):
        append_record(store, "ledger.jsonl", {"record_id": "c"}, precondition=refuse)
    append_record(store, "ledger.jsonl", {"record_id": "a"}, precondition=refuse)  # already in: no check
    assert [r["record_id"] for r in read_records(store, "ledger.jsonl")] == ["a", "b"]


def test_racing_appenders_cannot_overspend_a_budget(process_context, spec, store):
    # 4 writers try 6 appends each against a budget of 10 records: exactly 10 get in.
    collected = run_processes(process_context, budgeted_appender, [(spec, w, 6, 10) for w in range(4)])
    assert sum(winners_of(collected)) == 10
    assert len(read_records(store, "ledger.jsonl")) == 10


def test_append_gives_up_after_the_bounded_attempts(tmp_path):
    pauses = []
    with pytest.raises(ContentionError, match="5 times"):
        append_record(AlwaysContended(str(tmp_path)), "ledger.jsonl", {"x": 1}, max_attempts=5,
                      sleep=pauses.append)
    assert len(pauses) == 4 and all(0 <= p <= 0.5 for p in pauses)


def test_a_lost_response_does_not_duplicate_an_append(tmp_path):
    store = LostResponses(str(tmp_path))
    for job in ("a", "b"):
        append_record(store, "ledger.jsonl", {"job": job}, sleep=lambda s: None)
    assert [r["job"] for r in read_records(store, "ledger.jsonl")] == ["a", "b"]
