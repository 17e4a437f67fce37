"""Records, in order, every state commit and every ledger charge a test's job makes, so a test
can check the one release order (``job.release.lifecycle``): the release committed, then charged, then
committed marked charged, in every mode."""

from __future__ import annotations

from typing import List, Tuple

from triehh_beam.job.state.ledger import Ledger
from triehh_beam.job.state.state_store import StateStore


def record_events(monkeypatch) -> List[Tuple[str, str, bool]]:
    """Patches ``StateStore.commit`` and ``Ledger.charge_plan`` to log ``("commit", record id,
    marked charged)`` and ``("charge", record id, False)``; returns the (live) log."""
    events: List[Tuple[str, str, bool]] = []
    commit, charge_plan = StateStore.commit, Ledger.charge_plan

    def logged_commit(self, state):
        events.append(("commit", state.ledger_record, state.release_charged))
        return commit(self, state)

    def logged_charge(self, record_id, *args, **kwargs):
        events.append(("charge", record_id, False))
        return charge_plan(self, record_id, *args, **kwargs)

    monkeypatch.setattr(StateStore, "commit", logged_commit)
    monkeypatch.setattr(Ledger, "charge_plan", logged_charge)
    return events


def check_order(events: List[Tuple[str, str, bool]], marked_in_next_commit: bool = True) -> List[str]:
    """Asserts that every charge comes after a commit of its record id not marked charged, and
    is followed by a commit marking it charged; returns the charged record ids."""
    charged = []
    for i, (kind, record_id, _) in enumerate(events):
        if kind != "charge":
            continue
        before = [e for e in events[:i] if e[0] == "commit" and e[1] == record_id]
        assert before and not before[0][2], f"{record_id} was charged before its release was committed: {events}"
        after = [e for e in events[i + 1:] if e[0] == "commit"]
        if marked_in_next_commit:
            assert after and after[0][1] == record_id and after[0][2], (
                f"{record_id} was not committed marked charged right after its charge: {events}")
        charged.append(record_id)
    return charged
